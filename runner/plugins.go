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

// A stack's processes see the plugins of the shared cache, which they
// may not write (one stack must not plant a binary another runs), in a
// plugin directory of their own, which they may: there the language host
// caches provider schemas (beside the plugin's directory, and it fails
// when it cannot), and a plugin the program needs and the cache lacks is
// downloaded for that stack alone.
//
// Pulumi lists only real directories as plugins, so a shared plugin is
// mirrored as a directory of the stack's whose entries are symbolic
// links to the shared plugin's: writing through one is writing the shared
// file, which the sandbox denies.
//
// Every pulumi process runs with PULUMI_IGNORE_AMBIENT_PLUGINS: pulumi
// would otherwise take a provider it finds on PATH (an "ambient" plugin,
// meant for developing a provider) over the plugin cache, and warn
// "using pulumi-resource-<name> from $PATH" in every operation's output.
// Instead the providers on the CLI's PATH are installed into the shared
// cache once, at start, under the version they report (installAmbient).

// mirrorPlugins makes own, the plugin directory of a stack (a path
// relative to ws, the stack's state directory, which the stack's
// programs may write), show every plugin of shared: a directory per
// plugin, of links to the shared plugin's entries. Mirrors of plugins
// that left shared are removed; what the stack downloaded itself is
// kept. Every change goes through ws, and a link the runner did not make
// is removed, never followed: a program that put a link to the shared
// cache (or anywhere) in place of a mirror must not have the daemon
// write there.
func mirrorPlugins(shared string, ws *os.Root, own string) error {
	if err := rootRealDir(ws, own); err != nil {
		return err
	}
	plugins, err := sharedPlugins(shared)
	if err != nil {
		return err
	}
	for _, name := range plugins {
		if err := mirrorPlugin(filepath.Join(shared, name), ws, filepath.Join(own, name)); err != nil {
			return fmt.Errorf("plugin %s: %w", name, err)
		}
	}
	return pruneMirrors(shared, ws, own, plugins)
}

// rootRealDir makes dir (relative to ws) a directory, removing a link or
// a file a program left there (a data dir of an older version linked
// the whole cache there too).
func rootRealDir(ws *os.Root, dir string) error {
	fi, err := ws.Lstat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return err
	case fi.IsDir():
		return nil
	default:
		if err := ws.Remove(dir); err != nil {
			return err
		}
	}
	return ws.Mkdir(dir, 0o700)
}

// sharedPlugins lists the installed plugins of dir: directories with no
// ".partial" marker (an install in progress).
func sharedPlugins(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		if _, err := os.Lstat(filepath.Join(dir, e.Name()+".partial")); err == nil {
			continue
		}
		names = append(names, e.Name())
	}
	return names, nil
}

// mirrorPlugin makes dst (relative to ws) a directory of links to src's
// entries.
func mirrorPlugin(src string, ws *os.Root, dst string) error {
	entries, err := os.ReadDir(src)
	if err != nil {
		return err
	}
	if err := rootRealDir(ws, dst); err != nil {
		return err
	}
	for _, e := range entries {
		if err := ensureLink(filepath.Join(src, e.Name()), ws, filepath.Join(dst, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

// pruneMirrors removes the mirrors in own of plugins that are no longer
// in shared: directories whose entries are all links into shared.
func pruneMirrors(shared string, ws *os.Root, own string, plugins []string) error {
	entries, err := readDirIn(ws, own)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if !e.IsDir() || slices.Contains(plugins, e.Name()) {
			continue
		}
		dir := filepath.Join(own, e.Name())
		if isMirror(ws, dir, filepath.Join(shared, e.Name())) {
			if err := ws.RemoveAll(dir); err != nil {
				return err
			}
		}
	}
	return nil
}

// readDirIn lists dir, relative to ws.
func readDirIn(ws *os.Root, dir string) ([]fs.DirEntry, error) {
	f, err := ws.Open(dir)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.ReadDir(-1)
}

// isMirror says whether dir (relative to ws) holds only links into src.
func isMirror(ws *os.Root, dir, src string) bool {
	entries, err := readDirIn(ws, dir)
	if err != nil || len(entries) == 0 {
		return false
	}
	for _, e := range entries {
		target, err := ws.Readlink(filepath.Join(dir, e.Name()))
		if err != nil || target != filepath.Join(src, e.Name()) {
			return false
		}
	}
	return true
}

// ensureLink makes link (relative to ws) a symbolic link to target,
// replacing whatever else is there.
func ensureLink(target string, ws *os.Root, link string) error {
	if got, err := ws.Readlink(link); err == nil && got == target {
		return nil
	}
	if err := ws.RemoveAll(link); err != nil {
		return err
	}
	return ws.Symlink(target, link)
}

// ambientProviders lists the resource plugins found on path (a PATH
// value), the first of each name, as pulumi would find them.
func ambientProviders(path string) []string {
	var found []string
	seen := map[string]bool{}
	for _, dir := range filepath.SplitList(path) {
		entries, err := os.ReadDir(dir)
		if err != nil || !filepath.IsAbs(dir) {
			continue
		}
		for _, e := range entries {
			name := e.Name()
			if !strings.HasPrefix(name, "pulumi-resource-") || seen[name] {
				continue
			}
			p := filepath.Join(dir, name)
			if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
				seen[name] = true
				found = append(found, p)
			}
		}
	}
	return found
}
