package runner

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// A stack's engine finds its plugins in a plugin directory of the
// stack's (in its PULUMI_HOME), which the runner alone writes: there
// each plugin is a real directory (pulumi lists only those) of links to
// the real plugin's files, in the shared cache (which no stack may write:
// one stack must not plant a binary another runs) or in the stack's own
// downloads (plugins the cache lacks, installed for that stack alone).
// The engine caches provider schemas beside them.
//
// Confined, the plugin's executable is a link to the runner's wrapper,
// and a hidden link beside it, .<name>.real, to the real one: the wrapper
// enters the program's domain and execs that (see engine.go).
//
// Every pulumi process runs with PULUMI_IGNORE_AMBIENT_PLUGINS: pulumi
// would otherwise take a provider it finds on PATH (an "ambient" plugin,
// meant for developing a provider) over the plugin cache, and warn
// "using pulumi-resource-<name> from $PATH" in every operation's output.
// Instead the providers on the CLI's PATH are installed into the shared
// cache once, at start, under the version they report (installAmbient).

// mirror is what mirrorPlugins needs to know.
type mirror struct {
	// shared are directories of real plugins the stack may not write: the
	// shared cache, and, for a read-only operation's copy, the stack's
	// downloads. downloads are the stack's (or the copy's) own downloads.
	// Any may be missing; a plugin in several comes from the first.
	shared    []string
	downloads string
	// ws is the stack's state directory, and own its plugin directory in
	// it (relative to ws): every change goes through ws.
	ws  *os.Root
	own string
	// wrapper is the runner's plugin wrapper, empty when programs run
	// unconfined.
	wrapper string
}

// mirrorPlugins makes m.own show every plugin of m.shared and
// m.downloads (the shared one when both have it), and no other plugin: a
// directory a data dir of an older version left there with files of its
// own (a plugin the engine downloaded itself) is moved to the downloads;
// a link or a file the runner did not make is removed, never followed.
func mirrorPlugins(m mirror) error {
	if err := rootRealDir(m.ws, m.own); err != nil {
		return err
	}
	if err := m.moveDownloads(); err != nil {
		return err
	}
	from := map[string]string{}
	dirs := []string{m.downloads}
	for i := len(m.shared) - 1; i >= 0; i-- {
		dirs = append(dirs, m.shared[i])
	}
	for _, dir := range dirs { // the later wins
		plugins, err := installedPlugins(dir)
		if err != nil {
			return err
		}
		for _, name := range plugins {
			from[name] = dir
		}
	}
	for name, dir := range from {
		if err := m.mirrorPlugin(filepath.Join(dir, name), filepath.Join(m.own, name)); err != nil {
			return fmt.Errorf("plugin %s: %w", name, err)
		}
	}
	entries, err := readDirIn(m.ws, m.own)
	if err != nil {
		return err
	}
	for _, e := range entries {
		// Files are the schemas the engine and the language host cache
		// there: kept, or every operation would start each provider
		// once more to ask for its schema.
		if _, ok := from[e.Name()]; !ok && !e.Type().IsRegular() {
			if err := m.ws.RemoveAll(filepath.Join(m.own, e.Name())); err != nil {
				return err
			}
		}
	}
	return nil
}

// moveDownloads moves the plugins an older version let the engine
// download into the stack's plugin directory (directories holding
// anything but links) to its downloads.
func (m mirror) moveDownloads() error {
	entries, err := readDirIn(m.ws, m.own)
	if err != nil {
		return err
	}
	for _, e := range entries {
		dir := filepath.Join(m.own, e.Name())
		if !e.IsDir() || onlyLinks(m.ws, dir) {
			continue
		}
		rel, err := filepath.Rel(filepath.Dir(m.ws.Name()), m.downloads)
		if err != nil || !strings.HasPrefix(rel, filepath.Base(m.ws.Name())+string(filepath.Separator)) {
			return fmt.Errorf("the downloads %s are not in the stack's directory", m.downloads)
		}
		target := filepath.Join(strings.TrimPrefix(rel, filepath.Base(m.ws.Name())+string(filepath.Separator)), e.Name())
		if err := m.ws.MkdirAll(filepath.Dir(target), 0o700); err != nil {
			return err
		}
		if err := m.ws.Rename(dir, target); err != nil {
			return fmt.Errorf("move the downloaded plugin %s: %w", e.Name(), err)
		}
	}
	return nil
}

// installedPlugins lists the installed plugins of dir: directories with
// no ".partial" marker (an install in progress). A missing dir has none.
func installedPlugins(dir string) ([]string, error) {
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

// mirrorPlugin makes dst (relative to m.ws) a directory of links to
// src's entries, its executable through the wrapper when there is one;
// links to entries src no longer has are removed.
func (m mirror) mirrorPlugin(src, dst string) error {
	entries, err := os.ReadDir(src)
	if err != nil {
		return err
	}
	if err := rootRealDir(m.ws, dst); err != nil {
		return err
	}
	want := map[string]string{}
	for _, e := range entries {
		name, target := e.Name(), filepath.Join(src, e.Name())
		if m.wrapper != "" && isPluginExecutable(target) {
			want[name], want[realLink(name)] = m.wrapper, target
			continue
		}
		want[name] = target
	}
	for name, target := range want {
		if err := ensureLink(target, m.ws, filepath.Join(dst, name)); err != nil {
			return err
		}
	}
	have, err := readDirIn(m.ws, dst)
	if err != nil {
		return err
	}
	for _, e := range have {
		if _, ok := want[e.Name()]; !ok {
			if err := m.ws.RemoveAll(filepath.Join(dst, e.Name())); err != nil {
				return err
			}
		}
	}
	return nil
}

// realLink is the name of the link, beside a plugin's wrapper name, to
// the real executable the wrapper runs. The sandbox's wrapper reads it.
func realLink(name string) string { return "." + name + ".real" }

// isPluginExecutable says whether path is a plugin's executable: a
// regular, executable file named pulumi-<kind>-<name>.
func isPluginExecutable(path string) bool {
	return strings.HasPrefix(filepath.Base(path), "pulumi-") && isExecutable(path)
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

// onlyLinks says whether dir (relative to ws) holds links only: a
// mirror.
func onlyLinks(ws *os.Root, dir string) bool {
	entries, err := readDirIn(ws, dir)
	if err != nil {
		return false
	}
	for _, e := range entries {
		if e.Type()&fs.ModeSymlink == 0 {
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
