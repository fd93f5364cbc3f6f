package runner

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// The engine is trusted, the program is not. Confined, the pulumi CLI
// (the engine) runs in a Landlock domain that may write what it reports
// (the event log, the saved plan, the config file, the state) and read
// the passphrase; the plugins it starts (the language host, which runs
// the program, and the providers) and whatever they start run in a
// narrower domain nested in it, which reaches the checkout, the
// program's own HOME and TMPDIR, and the operator's --sandbox-rw paths,
// and nothing the daemon or the engine decides on.
//
// Landlock confines a process and what it starts, so the narrower domain
// must be entered by each plugin as it starts. The engine starts every
// plugin from a path the runner chooses, and there the runner puts a
// link to its own binary, which serves as the sandbox's plugin wrapper:
// it enters the program's domain and execs the real plugin.
//   - The language hosts (and the other plugins bundled with the CLI) are
//     found next to the CLI's executable: the engine runs a copy of the
//     CLI, a hard link where the file system allows one, in the engine
//     directory of the data dir, beside a link for each of them.
//   - Providers are found in the stack's PULUMI_HOME, which the program
//     cannot write: a plugin there is a directory of links to the real
//     plugin's files (in the shared cache, or the stack's own downloads)
//     whose executable is the wrapper (see plugins.go).
//   - Plugins a project declares with a path (Pulumi.yaml plugins:) would
//     start from the checkout, out of the runner's reach: they are
//     refused (see checkProjectPlugins).
//   - The engine downloads no plugin: it would run what it downloaded.
//     A missing plugin is installed into the stack's downloads by a
//     process of its own, and mirrored (see acquire.go).

// engineDir is the directory of the CLI the engine runs, beside the
// wrappers of the plugins bundled with it.
func (r *Runner) engineDir() string { return filepath.Join(r.opts.DataDir, "engine") }

// prepareEngine fills dir from bin: pulumi as a hard link to bin's (or
// a copy, when bin is on another file system or a link is not allowed),
// and, for every other executable pulumi-* of bin, a link to wrapper
// with a link to the real one beside it (see realLink). Whatever else
// dir holds is removed.
func prepareEngine(bin, dir, wrapper string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	plugins, err := bundled(bin)
	if err != nil {
		return err
	}
	if err := sameFile(filepath.Join(bin, "pulumi"), filepath.Join(dir, "pulumi")); err != nil {
		return fmt.Errorf("pulumi: %w", err)
	}
	want := map[string]bool{"pulumi": true}
	for _, name := range plugins {
		want[name], want[realLink(name)] = true, true
		if err := replaceLink(wrapper, filepath.Join(dir, name)); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if err := replaceLink(filepath.Join(bin, name), filepath.Join(dir, realLink(name))); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if !want[e.Name()] {
			if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
				return err
			}
		}
	}
	return nil
}

// bundled lists the executables pulumi-* of bin, the CLI's directory:
// the plugins bundled with it. bin must hold pulumi.
func bundled(bin string) ([]string, error) {
	if !isExecutable(filepath.Join(bin, "pulumi")) {
		return nil, fmt.Errorf("no pulumi executable in %s", bin)
	}
	entries, err := os.ReadDir(bin)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "pulumi-") && isExecutable(filepath.Join(bin, e.Name())) {
			names = append(names, e.Name())
		}
	}
	return names, nil
}

// isExecutable says whether path is a regular executable file.
func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// replaceLink makes link a symbolic link to target, through a rename.
func replaceLink(target, link string) error {
	if got, err := os.Readlink(link); err == nil && got == target {
		return nil
	}
	tmp := link + ".new"
	_ = os.Remove(tmp)
	if err := os.Symlink(target, tmp); err != nil {
		return err
	}
	return os.Rename(tmp, link)
}

// sameFile makes dst the same file as src: a hard link, else a copy
// (mode 0755) unless dst is one already of the same size and time.
func sameFile(src, dst string) error {
	si, err := os.Stat(src)
	if err != nil {
		return err
	}
	if di, err := os.Stat(dst); err == nil {
		if os.SameFile(si, di) || di.Size() == si.Size() && di.ModTime().Equal(si.ModTime()) {
			return nil
		}
	}
	tmp := dst + ".new"
	_ = os.Remove(tmp)
	if err := os.Link(src, tmp); err != nil {
		if !errors.Is(err, syscall.EXDEV) && !errors.Is(err, fs.ErrPermission) {
			return err
		}
		if err := copyExecutable(src, tmp, si); err != nil {
			return err
		}
	}
	return os.Rename(tmp, dst)
}

// copyExecutable copies src to dst with src's modification time, so
// that a later start sees it unchanged.
func copyExecutable(src, dst string, si fs.FileInfo) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		os.Remove(dst)
		return err
	}
	if err := out.Close(); err != nil {
		os.Remove(dst)
		return err
	}
	return os.Chtimes(dst, si.ModTime(), si.ModTime())
}

// ProgramAccess is what the plugins a confined command starts, and so
// the program, may reach, in a domain nested in the command's.
type ProgramAccess struct {
	ReadOnly, ReadWrite []string
	// Env are variables ("NAME=value") the wrapper sets for the plugin
	// in place of the engine's: the program's own HOME and TMPDIR. A
	// "NAME" alone removes the engine's NAME (its GOGC, see gc.go).
	Env []string
}

// prepareEngine fills the engine directory (see above) and learns
// the wrapper: this binary, which the sandbox package makes one. It
// returns the directory.
func (r *Runner) prepareEngine() (string, error) {
	exe, err := os.Executable()
	if err == nil {
		exe, err = filepath.EvalSymlinks(exe)
	}
	if err != nil {
		return "", fmt.Errorf("the plugin wrapper: %w", err)
	}
	if err := prepareEngine(r.bin(), r.engineDir(), exe); err != nil {
		return "", fmt.Errorf("engine directory: %w", err)
	}
	r.wrapper = exe
	return r.engineDir(), nil
}

// bin is the absolute directory of the CLI and its bundled plugins.
func (r *Runner) bin() string {
	bin, err := filepath.Abs(r.opts.Bin)
	if err != nil {
		return r.opts.Bin
	}
	return bin
}
