package runner

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// A stack on the data dir's own backend keeps its Pulumi state in a file
// backend of its own, <DataDir>/backends/<name>, rather than in the
// shared <DataDir>/backend: the sandbox then grants a program its own
// stack's state and nothing of another's. It is keyed by the stackd
// stack's name, unique by construction, never by what the program
// chooses: a program that names another stack's project gets a state of
// its own all the same. The backend URL the stack is known by (in its
// identity, marker and messages) stays the shared one.

// stateDirs are the directories of a file backend that hold a stack's
// files, each under <project>/<stack> (locks under <org>/<project>).
var stateDirs = []string{"history", "backups", "locks"}

// ownStateDir is the file backend of w's own state, on the data dir's
// backend.
func (r *Runner) ownStateDir(w *workspace) string {
	return filepath.Join(r.opts.DataDir, "backends", w.Name)
}

// ownPassphrase is the file of w's own passphrase, on the data dir's
// backend.
func (r *Runner) ownPassphrase(w *workspace) string {
	return filepath.Join(r.passphrasesDir(), w.Name)
}

// keyByName moves w's state and passphrase from where a data dir of an
// earlier version kept them, under the digest of the stack's identity
// (its backend, Pulumi stack and project: a name the program chooses),
// to where they are kept now, under the stack's name. Only a stack whose
// marker says it used that identity moves them: another stack whose
// program names the same project never gets them.
func (r *Runner) keyByName(w *workspace) error {
	if w.backend != r.localBackend() || w.readMarker().Identity != r.identity(w) {
		return nil
	}
	id := r.identity(w)
	for _, m := range [][2]string{
		{filepath.Join(r.opts.DataDir, "backends", id), r.ownStateDir(w)},
		{filepath.Join(r.passphrasesDir(), id), r.ownPassphrase(w)},
	} {
		if _, err := os.Lstat(m[1]); err == nil {
			continue
		}
		if err := os.Rename(m[0], m[1]); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("stack %s: key its state by its name: %w", w.Name, err)
		}
	}
	return nil
}

// stateURL is the backend URL w's processes use: its own file backend
// for a stack of the data dir's backend, else its backend.
func (r *Runner) stateURL(w *workspace) string {
	if w.backend != r.localBackend() {
		return w.backend
	}
	return "file://" + r.ownStateDir(w)
}

// moveState moves what the shared backend holds of w's stack into the
// stack's own backend: a data dir written before stacks had their own.
// Every step is a rename, the checkpoint last, so a move that was
// interrupted is finished by the next one and nothing is copied twice or
// lost; the shared backend's meta.yaml is copied, as other stacks keep
// using it.
func (r *Runner) moveState(w *workspace) error {
	if w.backend != r.localBackend() {
		return nil
	}
	shared, _ := fileBackendDir(r.localBackend())
	own := r.ownStateDir(w)
	_, project := w.orgProject("organization")
	base := stackBase(w.Stack)
	checkpoints, _ := filepath.Glob(filepath.Join(shared, ".pulumi", "stacks", project, base+".json*"))
	if len(checkpoints) == 0 {
		return nil
	}
	for _, name := range []string{"meta.yaml", "meta.yaml.attrs"} {
		if err := copyIfMissing(filepath.Join(shared, ".pulumi", name), filepath.Join(own, ".pulumi", name)); err != nil {
			return fmt.Errorf("stack %s: move its state to its own backend: %w", w.Name, err)
		}
	}
	var moves [][2]string
	for _, kind := range stateDirs {
		for _, rel := range []string{filepath.Join(project, base), filepath.Join("organization", project, base)} {
			moves = append(moves, [2]string{filepath.Join(shared, ".pulumi", kind, rel), filepath.Join(own, ".pulumi", kind, rel)})
		}
	}
	for _, p := range checkpoints {
		moves = append(moves, [2]string{p, filepath.Join(own, ".pulumi", "stacks", project, filepath.Base(p))})
	}
	for _, m := range moves {
		if err := moveInto(m[0], m[1]); err != nil {
			return fmt.Errorf("stack %s: move its state to its own backend: %w", w.Name, err)
		}
	}
	r.log.Info("moved the stack's Pulumi state into a backend of its own", "stack", w.Name, "files", len(checkpoints))
	return nil
}

// moveInto renames src to dst, creating dst's parents. A src that is gone
// was moved already; a directory whose dst exists (an interrupted move)
// has its entries moved one by one.
func moveInto(src, dst string) error {
	fi, err := os.Lstat(src)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		return err
	}
	if _, err := os.Lstat(dst); err == nil && fi.IsDir() {
		entries, err := os.ReadDir(src)
		if err != nil {
			return err
		}
		for _, e := range entries {
			if err := moveInto(filepath.Join(src, e.Name()), filepath.Join(dst, e.Name())); err != nil {
				return err
			}
		}
		return os.Remove(src)
	}
	return os.Rename(src, dst)
}

// copyIfMissing copies src to dst unless dst exists or src does not.
func copyIfMissing(src, dst string) error {
	if _, err := os.Stat(dst); err == nil {
		return nil
	}
	data, err := os.ReadFile(src)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		return err
	}
	return writeFileAtomic(dst, data, 0o600)
}

// access is what w's processes may reach in the sandbox. The engine
// reaches the program's work dir, the runner's state directory of the
// stack (its config file, event log, plans, HOME, TMPDIR and
// PULUMI_HOME), the stack's own state when it is on a file backend
// (read-only for a read-only operation), its passphrase, and the shared
// plugin cache and the CLI's directory, read-only. The plugins it starts,
// and so the program, reach the work dir, the program's own HOME and
// TMPDIR, and the plugins, read-only: nothing the daemon or the engine
// decides on (see engine.go).
func (r *Runner) access(w *workspace) Access {
	work := cmpOr(w.WorkDir, w.ProjectDir)
	a := Access{
		ReadOnly:  []string{r.pluginDir(), r.bin(), w.stackDownloads},
		ReadWrite: []string{work, w.dir},
		Program: &ProgramAccess{
			ReadOnly:  []string{r.pluginDir(), r.bin(), w.downloadDir(), w.stackDownloads},
			ReadWrite: []string{work, w.programDir()},
			Env:       r.programEnv(w),
		},
	}
	if r.wrapper != "" {
		a.ReadOnly = append(a.ReadOnly, r.wrapper)
		a.Program.ReadOnly = append(a.Program.ReadOnly, r.wrapper)
	}
	if dir, ok := fileBackendDir(w.state); ok {
		if w.readOnly {
			a.ReadOnly = append(a.ReadOnly, dir)
		} else {
			a.ReadWrite = append(a.ReadWrite, dir)
		}
	}
	if w.passphraseFile != "" {
		a.ReadOnly = append(a.ReadOnly, w.passphraseFile)
	}
	return a
}

// programEnv is what the program's environment holds in place of the
// engine's: its own HOME, TMPDIR and PULUMI_HOME, each unless the
// operator (--env-file) or the stack (envRefs) set it, and no GOGC or
// GOMEMLIMIT when the engine's are the runner's (see gc.go).
func (r *Runner) programEnv(w *workspace) []string {
	var env []string
	for _, kv := range [][2]string{{"HOME", w.programHome()}, {"TMPDIR", w.programTmp()}, {"PULUMI_HOME", w.programPulumiHome()}} {
		_, own := w.Env[kv[0]]
		if own || slices.ContainsFunc(r.opts.Env, func(e string) bool { return strings.HasPrefix(e, kv[0]+"=") }) {
			continue
		}
		env = append(env, kv[0]+"="+kv[1])
	}
	if w.gogc != 0 {
		env = append(env, gcVars...) // the engine's alone
	}
	return env
}

// pluginDir is the plugin cache every stack shares.
func (r *Runner) pluginDir() string { return filepath.Join(r.opts.DataDir, "pulumi-home", "plugins") }

// Per-stack directories in the runner's state directory of a stack: the
// engine's HOME, TMPDIR and PULUMI_HOME, the plugins downloaded for the
// stack (the PULUMI_HOME of their installs), and the program's own HOME
// and TMPDIR.
func (w *workspace) homeDir() string       { return filepath.Join(w.dir, "home") }
func (w *workspace) tmpDir() string        { return filepath.Join(w.dir, "tmp") }
func (w *workspace) pulumiHomeDir() string { return filepath.Join(w.dir, "pulumi-home") }
func (w *workspace) downloadHome() string  { return filepath.Join(w.dir, "downloads") }
func (w *workspace) downloadDir() string   { return filepath.Join(w.downloadHome(), "plugins") }
func (w *workspace) programDir() string    { return filepath.Join(w.dir, "program") }
func (w *workspace) programHome() string   { return filepath.Join(w.programDir(), "home") }
func (w *workspace) programTmp() string    { return filepath.Join(w.programDir(), "tmp") }
func (w *workspace) programPulumiHome() string {
	return filepath.Join(w.programDir(), "pulumi-home")
}

// mkdirs creates w's state directory with the stack's own HOME, TMPDIR
// and PULUMI_HOME, whose plugins mirror the shared cache (see plugins.go).
// Its programs may write it: a link or a file one left in place of a
// directory is replaced, never followed.
func (r *Runner) mkdirs(w *workspace) error {
	if err := os.MkdirAll(w.dir, 0o700); err != nil {
		return fmt.Errorf("stack %s: workspace: %w", w.Name, err)
	}
	ws, err := os.OpenRoot(w.dir)
	if err != nil {
		return fmt.Errorf("stack %s: workspace: %w", w.Name, err)
	}
	defer ws.Close()
	for _, dir := range []string{w.homeDir(), w.tmpDir(), w.pulumiHomeDir(), w.programDir(), w.programHome(), w.programTmp(), w.programPulumiHome()} {
		rel, _ := filepath.Rel(w.dir, dir)
		if err := rootRealDir(ws, rel); err != nil {
			return fmt.Errorf("stack %s: workspace: %w", w.Name, err)
		}
	}
	// The engine's plugins, and the program's: its language host caches
	// the providers' schemas beside the plugins it finds.
	for _, home := range []string{w.pulumiHomeDir(), w.programPulumiHome()} {
		rel, _ := filepath.Rel(w.dir, home)
		m := mirror{shared: []string{r.pluginDir(), w.stackDownloads}, downloads: w.downloadDir(), ws: ws, own: filepath.Join(rel, "plugins"), wrapper: r.wrapper}
		if err := mirrorPlugins(m); err != nil {
			return fmt.Errorf("stack %s: plugins: %w", w.Name, err)
		}
	}
	return nil
}
