package runner

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/stackd/stackd/daemon"
	"github.com/stackd/stackd/daemon/model"
)

// workspace is a model.Workspace with what the runner derives from it.
type workspace struct {
	model.Workspace
	dir     string // <DataDir>/workspaces/<Name>: the runner's state
	backend string // the backend URL in effect
	// state is the backend URL its processes use: backend, or the stack's
	// own file backend for a stack of the data dir's (see stateURL).
	state string
	// readOnly marks a read-only operation's copy (see scratch): its
	// processes may read the stack's state, not write it. copy marks the
	// copy, also once it has a backend of its own.
	readOnly   bool
	copy       bool
	project    string // the project's name, from Pulumi.yaml
	stackFile  string // Pulumi.<last element of Stack>.yaml
	configFile string // dir/stackFile, passed as --config-file
	redact     *redactor
	// passphraseFile is the passphrase of its secrets, when the
	// passphrase provider encrypts them; ownPassphrase says it is the
	// stack's own.
	passphraseFile string
	ownPassphrase  bool
	// stackDownloads are the plugins downloaded for the stack: in dir's
	// downloads, or, for a read-only operation's copy, in the stack's
	// own, which the copy uses read-only.
	stackDownloads string
	// gogc is its engine's GOGC, 0 for Go's default (see gc.go).
	gogc int
}

// workspace validates ws and derives the runner's view of it. It creates
// nothing, but moves the state of a data dir of an earlier version (see
// keyByName).
func (r *Runner) workspace(ws model.Workspace) (*workspace, error) {
	if err := validateNames(ws); err != nil {
		return nil, err
	}
	if err := validateEnv(envList(ws.Env)); err != nil {
		return nil, fmt.Errorf("stack %s: %w", ws.Name, err)
	}
	w := &workspace{Workspace: ws, dir: filepath.Join(r.opts.DataDir, "workspaces", ws.Name)}
	base := stackBase(ws.Stack)
	if err := checkLinks(ws.ProjectDir, "Pulumi.yaml", "Pulumi.yml", "Main.yaml",
		"Pulumi."+base+".yaml", "Pulumi."+base+".yml"); err != nil {
		return nil, fmt.Errorf("stack %s: %w", ws.Name, err)
	}
	w.backend = cmpOr(ws.Backend, ws.Env["PULUMI_BACKEND_URL"], r.opts.DefaultBackend)
	if len(ws.Environments) > 0 && !isCloudBackend(w.backend) {
		return nil, fmt.Errorf("spec.environment needs a Pulumi Cloud backend; this stack's backend is %s", redactURL(w.backend))
	}
	project, main, err := readProject(ws.WorkDir, ws.ProjectDir)
	if err != nil {
		return nil, fmt.Errorf("stack %s: %w", ws.Name, err)
	}
	if err := checkMain(cmpOr(ws.WorkDir, ws.ProjectDir), ws.ProjectDir, main); err != nil {
		return nil, fmt.Errorf("stack %s: %w", ws.Name, err)
	}
	if err := checkProjectPlugins(cmpOr(ws.WorkDir, ws.ProjectDir), ws.ProjectDir, r.opts.ProjectPlugins); err != nil {
		return nil, fmt.Errorf("stack %s: %w", ws.Name, err)
	}
	w.project = project
	w.state = r.stateURL(w)
	w.stackFile = "Pulumi." + stackBase(ws.Stack) + ".yaml"
	w.configFile = filepath.Join(w.dir, w.stackFile)
	if err := r.checkProject(w); err != nil {
		return nil, err
	}
	if err := r.keyByName(w); err != nil {
		return nil, err
	}
	if err := r.choosePassphrase(w); err != nil {
		return nil, fmt.Errorf("stack %s: passphrase: %w", ws.Name, err)
	}
	w.redact = r.redactor(w)
	w.stackDownloads = w.downloadDir()
	w.gogc = r.gogc(w)
	return w, nil
}

// checkLinks refuses project files of dir that are symbolic links
// leading outside dir: the CLI would run a project, or apply a stack
// config, from elsewhere on the host, and echo what it read in its
// errors. Links that stay inside dir are fine.
func checkLinks(dir string, names ...string) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return fmt.Errorf("project directory: %w", err)
	}
	defer root.Close()
	for _, name := range names {
		fi, err := os.Lstat(filepath.Join(dir, name))
		if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
			continue
		}
		f, err := root.Open(name)
		if err != nil {
			return fmt.Errorf("%s is a symbolic link that leads outside the project directory; refusing to use it", name)
		}
		f.Close()
	}
	return nil
}

// validateNames checks the names the runner turns into paths and
// arguments.
func validateNames(ws model.Workspace) error {
	if ws.Name == "" || ws.Name == "." || ws.Name == ".." || strings.ContainsAny(ws.Name, "/\\\x00") {
		return fmt.Errorf("invalid stack name %q for a workspace directory", ws.Name)
	}
	parts := strings.Split(ws.Stack, "/")
	if len(parts) > 3 || slices.Contains(parts, "") || strings.ContainsAny(ws.Stack, "\x00") || strings.HasPrefix(ws.Stack, "-") {
		return fmt.Errorf("stack %s: invalid Pulumi stack name %q", ws.Name, ws.Stack)
	}
	if ws.ProjectDir == "" {
		return fmt.Errorf("stack %s: no project directory", ws.Name)
	}
	return nil
}

// validateEnv checks "NAME=value" entries: a name is not empty and holds
// no '=' or NUL, a value holds no NUL.
func validateEnv(env []string) error {
	for _, kv := range env {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" || strings.ContainsRune(k, 0) {
			return fmt.Errorf("invalid environment variable name %q", k)
		}
		if strings.ContainsRune(v, 0) {
			return fmt.Errorf("environment variable %s: value holds a NUL byte", k)
		}
	}
	return nil
}

// envList is env as sorted "NAME=value" entries. A name holding '=' keeps
// it, so that validateEnv rejects it.
func envList(env map[string]string) []string {
	var list []string
	for _, k := range slices.Sorted(maps.Keys(env)) {
		if strings.Contains(k, "=") {
			list = append(list, "="+k)
			continue
		}
		list = append(list, k+"="+env[k])
	}
	return list
}

// env is the environment added to w's processes: the stack's own
// variables, then what the runner needs, which they cannot override. It
// is derived from w at each use, so that it always names w's directories
// (HOME, TMPDIR, PULUMI_HOME), whose every path access opens to the
// sandbox: a read-only operation moves w into a scratch copy (see
// scratch), and its processes must not be left with the stack's own.
func (r *Runner) env(w *workspace) []string {
	env := []string{"PULUMI_HOME=" + w.pulumiHomeDir(), "TMPDIR=" + w.tmpDir()}
	if !slices.ContainsFunc(r.opts.Env, func(kv string) bool { return strings.HasPrefix(kv, "HOME=") }) {
		env = append(env, "HOME="+w.homeDir())
	}
	env = append(env, envList(w.Env)...)
	_, ok1 := w.Env["PULUMI_CONFIG_PASSPHRASE"]
	_, ok2 := w.Env["PULUMI_CONFIG_PASSPHRASE_FILE"]
	if !ok1 && !ok2 {
		env = append(env, "PULUMI_CONFIG_PASSPHRASE_FILE="+w.passphraseFile)
	}
	env = append(env, gogcEnv(w.gogc)...)
	return append(env, "PULUMI_BACKEND_URL="+w.state, "PULUMI_DEBUG_COMMANDS=true")
}

// choosePassphrase picks w's passphrase file. A Pulumi stack created on
// the data dir's own backend gets a passphrase of its own, kept under the
// stackd stack's name, so that a passphrase that leaks opens one stack's
// secrets only; a stack that exists already with the shared passphrase
// keeps that one.
func (r *Runner) choosePassphrase(w *workspace) error {
	w.passphraseFile = r.opts.PassphraseFile
	if !r.ownPassphrases || w.backend != r.localBackend() || w.SecretsProvider != "" {
		return nil
	}
	own := r.ownPassphrase(w)
	if _, err := os.Stat(own); err != nil {
		if r.inLocalBackend(w) {
			return nil // created with the shared passphrase
		}
		if _, err := ensureSecretFile(own); err != nil {
			return err
		}
	}
	w.passphraseFile, w.ownPassphrase = own, true
	return nil
}

// inLocalBackend says whether w's stack exists in the data dir's backend:
// in the shared one, or in its own (see moveState).
func (r *Runner) inLocalBackend(w *workspace) bool {
	shared, _ := fileBackendDir(r.localBackend())
	org, project := w.orgProject("organization")
	for _, root := range []string{shared, r.ownStateDir(w)} {
		for _, p := range []string{
			filepath.Join(root, ".pulumi", "stacks", project, stackBase(w.Stack)+".json"),
			filepath.Join(root, ".pulumi", "stacks", org, project, stackBase(w.Stack)+".json"),
		} {
			if _, err := os.Stat(p); err == nil {
				return true
			}
		}
	}
	return false
}

// cmpOr is the first non-empty string.
func cmpOr(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

// stackBase is the last element of a stack name: "dev" of "org/proj/dev".
func stackBase(stack string) string { return stack[strings.LastIndexByte(stack, '/')+1:] }

// isCloudBackend tells whether backend is a Pulumi Cloud (or self-hosted
// Pulumi service) URL rather than a DIY backend (file, s3, gs, azblob,
// postgres).
func isCloudBackend(backend string) bool {
	return strings.HasPrefix(backend, "https://") || strings.HasPrefix(backend, "http://")
}

// redactURL is backend without userinfo and query, fit for messages.
func redactURL(backend string) string {
	u, err := url.Parse(backend)
	if err != nil {
		return "(an unparsable URL)"
	}
	u.User, u.RawQuery, u.Fragment = nil, "", ""
	return u.String()
}

// readProject reads the name and the main entry point of the project in
// projectDir, of the checkout workDir (see readProjectFile).
func readProject(workDir, projectDir string) (name, main string, err error) {
	path, err := projectFile(projectDir)
	if err != nil {
		return "", "", err
	}
	data, err := readProjectFile(workDir, projectDir, filepath.Base(path))
	if err != nil {
		return "", "", fmt.Errorf("read project: %w", err)
	}
	var p struct {
		Name string `yaml:"name"`
		Main string `yaml:"main"`
	}
	if err := yaml.Unmarshal(data, &p); err != nil {
		return "", "", fmt.Errorf("parse %s: %w", filepath.Base(path), err)
	}
	if p.Name == "" {
		return "", "", fmt.Errorf("%s has no project name", filepath.Base(path))
	}
	return p.Name, p.Main, nil
}

// checkMain refuses a project whose main entry point (Pulumi.yaml's
// main:, relative to projectDir) leads outside workDir, the checkout the
// stack deploys: the CLI would run a program of the host's. Links are
// not followed here; the sandbox denies what they lead to.
func checkMain(workDir, projectDir, main string) error {
	if main == "" {
		return nil
	}
	target := main
	if !filepath.IsAbs(target) {
		target = filepath.Join(projectDir, target)
	}
	rel, err := filepath.Rel(workDir, filepath.Clean(target))
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return fmt.Errorf("Pulumi.yaml's main %q leads outside the checkout; refusing to run it", main)
	}
	return nil
}

// projectFile is the path of dir's Pulumi.yaml or Pulumi.yml.
func projectFile(dir string) (string, error) {
	for _, name := range []string{"Pulumi.yaml", "Pulumi.yml"} {
		path := filepath.Join(dir, name)
		if _, err := os.Stat(path); err == nil {
			return path, nil
		}
	}
	return "", fmt.Errorf("no Pulumi.yaml in the project directory %s", dir)
}

// checkProject refuses a program that names a Pulumi project other than
// the one the stack's config names, or, with none named, other than the
// one the stack has used so far: the program's committers choose its
// project's name, and another project is another Pulumi stack, on a
// shared backend maybe another team's. A person confirms a change by
// naming the new project in the config (spec.project).
func (r *Runner) checkProject(w *workspace) error {
	if w.Project != "" {
		if w.Project != w.project {
			return fmt.Errorf("stack %s: the program names the project %q (Pulumi.yaml name:), and the stack's config says project %q", w.Name, w.project, w.Project)
		}
		return nil
	}
	m := w.readMarker()
	if m.Identity == "" || m.Identity == r.identity(w) || m.Backend != redactURL(w.backend) || m.Stack != w.Stack {
		return nil
	}
	was := ""
	if m.Project != "" {
		was = fmt.Sprintf(" from %q", m.Project)
	}
	return fmt.Errorf("stack %s: the program's project changed%s to %q (Pulumi.yaml name:), which is another Pulumi stack; "+
		"nothing runs until a person confirms it with project: %s in the stack's config", w.Name, was, w.project, w.project)
}

// marker records, in w's state directory, that the stack exists and
// which config its config file holds. It holds digests, no value.
type marker struct {
	Backend string `json:"backend"` // without userinfo
	Stack   string `json:"stack"`
	// Project is the project's name, for messages.
	Project string `json:"project,omitempty"`
	// Identity is a digest of the backend, the stack and the project.
	Identity string `json:"identity"`
	// Config is the digest of the config last applied; empty while the
	// config file is being rebuilt.
	Config string `json:"config,omitempty"`
	// Secrets digests each secret value the config file holds, by key:
	// an unchanged one keeps its ciphertext.
	Secrets map[string]string `json:"secrets,omitempty"`
}

func (w *workspace) markerFile() string { return filepath.Join(w.dir, "stack.json") }

// readMarker returns the zero marker when there is none or it is damaged.
func (w *workspace) readMarker() marker {
	var m marker
	if data, err := readRegular(w.markerFile()); err == nil {
		_ = json.Unmarshal(data, &m)
	}
	return m
}

func (w *workspace) writeMarker(m marker) error {
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	if err := writeFileAtomic(w.markerFile(), append(data, '\n'), 0o600); err != nil {
		return fmt.Errorf("stack %s: write marker: %w", w.Name, err)
	}
	return nil
}

// forget drops what the runner holds of a removed stack.
func (w *workspace) forget() {
	_ = os.Remove(w.markerFile())
	_ = os.Remove(w.configFile)
}

// identity digests what names the stack.
func (r *Runner) identity(w *workspace) string {
	return r.digest("identity", []byte(w.backend), []byte(w.Stack), []byte(w.project))
}

// digest is an HMAC of parts under the runner's key, each part length
// prefixed. Keyed, it reveals nothing of secret parts.
func (r *Runner) digest(kind string, parts ...[]byte) string {
	h := hmac.New(sha256.New, r.digestKey)
	h.Write([]byte(kind))
	for _, p := range parts {
		h.Write(binary.AppendUvarint(nil, uint64(len(p))))
		h.Write(p)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// ensureStack makes sure the stack exists and that the runner's config
// file holds its secrets provider header, unless the marker says so
// already. With UseLocalStackOnly a missing stack is an error.
func (r *Runner) ensureStack(ctx context.Context, w *workspace) error {
	if err := r.claim(ctx, w); err != nil {
		return err
	}
	m := w.readMarker()
	id := r.identity(w)
	if _, err := os.Stat(w.configFile); err == nil && m.Identity == id {
		return nil
	}
	var header []*yaml.Node
	var err error
	if w.UseLocalStackOnly {
		err = r.checkStack(ctx, w)
	} else {
		header, err = r.createStack(ctx, w)
	}
	if err != nil {
		return err
	}
	if header == nil {
		header = fileHeader(w.configFile)
	}
	if header == nil {
		header = projectHeader(w)
	}
	if err := setHeader(w.configFile, header); err != nil {
		return fmt.Errorf("stack %s: write config file: %w", w.Name, err)
	}
	return w.writeMarker(marker{Backend: redactURL(w.backend), Stack: w.Stack, Project: w.project, Identity: id})
}

// createStack runs `stack init` in a scratch copy of the project's
// Pulumi.yaml (and Pulumi.<stack>.yaml, whose secrets provider settings
// init honours), so that the checkout is never written to. It returns the
// secrets provider header init wrote, nil when the stack already existed.
func (r *Runner) createStack(ctx context.Context, w *workspace) ([]*yaml.Node, error) {
	scratch := filepath.Join(w.dir, "init")
	if err := os.RemoveAll(scratch); err != nil {
		return nil, fmt.Errorf("stack %s: %w", w.Name, err)
	}
	defer os.RemoveAll(scratch)
	if err := copyProjectFiles(w, scratch); err != nil {
		return nil, fmt.Errorf("stack %s: prepare stack init: %w", w.Name, err)
	}
	args := []string{"stack", "init", w.Stack, "--no-select"}
	if w.SecretsProvider != "" {
		args = append(args, "--secrets-provider", w.SecretsProvider)
	}
	_, err := r.pulumi(ctx, w, call{what: "create stack " + w.Stack, dir: scratch}, args...)
	switch {
	case err != nil && stackExists.MatchString(err.Error()):
		return nil, nil
	case err != nil:
		return nil, err
	}
	r.log.Info("created the Pulumi stack", "stack", w.Name, "pulumiStack", w.Stack, "backend", redactURL(w.backend))
	return fileHeader(filepath.Join(scratch, w.stackFile)), nil
}

// stackExists matches the CLI's error for a stack that exists already,
// and not other errors that say "already exists" (a backend's table
// created by two CLIs at once on a new PostgreSQL database).
var stackExists = regexp.MustCompile(`stack '[^']+' already exists`)

// copyProjectFiles copies the project file and the repository's stack
// config file (when there is one) into dir.
func copyProjectFiles(w *workspace, dir string) error {
	if err := os.Mkdir(dir, 0o700); err != nil {
		return err
	}
	project, err := projectFile(w.ProjectDir)
	if err != nil {
		return err
	}
	for _, name := range []string{filepath.Base(project), w.stackFile} {
		data, err := readProjectFile(w.WorkDir, w.ProjectDir, name)
		if errors.Is(err, fs.ErrNotExist) && name == w.stackFile {
			continue
		}
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			return err
		}
	}
	return nil
}

// checkStack fails unless the stack exists: UseLocalStackOnly forbids
// creating it.
func (r *Runner) checkStack(ctx context.Context, w *workspace) error {
	out, err := r.pulumi(ctx, w, call{what: "list stacks"}, "stack", "ls", "--json", "--fully-qualify-stack-names")
	if err != nil {
		return err
	}
	var stacks []struct {
		Name string `json:"name"`
	}
	if err := json.Unmarshal([]byte(out), &stacks); err != nil {
		return fmt.Errorf("stack %s: list stacks: %w", w.Name, err)
	}
	for _, s := range stacks {
		if strings.HasSuffix("/"+s.Name, "/"+w.Stack) {
			return nil
		}
	}
	return missingStack(fmt.Sprintf("stack %s: the Pulumi stack %s does not exist in project %s on %s, and useLocalStackOnly forbids creating it",
		w.Name, w.Stack, w.project, redactURL(w.backend)))
}

// missingStack is daemon.ErrStackNotFound with the stack's details.
type missingStack string

func (e missingStack) Error() string        { return string(e) }
func (e missingStack) Is(target error) bool { return target == daemon.ErrStackNotFound }

// ensureSecretFile returns the content of path, first writing 32 random
// bytes in base64 there (mode 0600) when it does not exist. An existing
// file is never overwritten.
func ensureSecretFile(path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err == nil {
		return data, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	raw := make([]byte, 32)
	_, _ = rand.Read(raw)
	data = []byte(base64.StdEncoding.EncodeToString(raw))
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) { // another process won the race
		return os.ReadFile(path)
	}
	if err != nil {
		return nil, err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return nil, err
	}
	return data, f.Close()
}

// writeFileAtomic replaces path with data through a temporary file.
func writeFileAtomic(path string, data []byte, perm os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Chmod(perm); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}
