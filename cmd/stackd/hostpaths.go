package main

import (
	"flag"
	"os"
	"path/filepath"

	"github.com/stackd/stackd/daemon/spec"
)

// hostPathFlags are the directories of the host that a config from Git
// may name: as a file:// backend, which its programs then read and write,
// and as a local repository, which stackd clones for it.
type hostPathFlags struct {
	backendRoots stringsFlag
	repoRoots    stringsFlag
}

func (f *hostPathFlags) define(fs *flag.FlagSet) {
	fs.Var(&f.backendRoots, "backend-root", "`DIR` under which a config from Git may name a file:// backend (repeatable; default: none)")
	fs.Var(&f.repoRoots, "repo-root", "`DIR` under which a config from Git may name a local repository as projectRepo (repeatable; default: none)")
}

// hostPaths are the rules on the paths of the host a config may name:
// the roots of f, and the daemon's own paths, which no config may name a
// backend in or above. dataDir is absolute. The roots and
// --default-backend are checked: a usage error names the flag.
func (f *runFlags) hostPaths(srcs []spec.Source, dataDir string) (spec.HostPaths, error) {
	h := spec.HostPaths{Home: userHome()}
	add := func(what, path string) {
		if path == "" {
			return
		}
		if abs, err := filepath.Abs(path); err == nil {
			path = abs
		}
		h.Protected = append(h.Protected, spec.ProtectedPath{Path: path, What: what})
	}
	add("the data dir (--data-dir)", dataDir)
	add("--secrets-dir", f.secretsDir)
	add("--configmaps-dir", f.configMapsDir)
	if bin, err := pulumiBin(f.pulumiBin); err == nil {
		add("the pulumi toolchain (--pulumi-bin)", bin)
	}
	for _, p := range localPaths(srcs) {
		add("a config source (--config)", p)
	}
	add("--passphrase-file", f.secretsPassphraseFile)
	add("--api-token-file", f.tokenFile)
	add("--webhook-secret-file", f.webhookFile)
	add("--notify-secret-file", f.notifySecret)
	add("--tls-key-file", f.tlsKeyFile)
	for _, p := range f.envFiles {
		add("an --env-file", p)
	}
	for _, roots := range []struct {
		flag  string
		paths []string
	}{{"--backend-root", f.backendRoots}, {"--repo-root", f.repoRoots}} {
		for _, r := range roots.paths {
			if err := h.CheckRoot(r); err != nil {
				return spec.HostPaths{}, usageErrorf("run: %s %s: %v", roots.flag, r, err)
			}
		}
	}
	h.BackendRoots, h.RepoRoots = cleanPaths(f.backendRoots), cleanPaths(f.repoRoots)
	if err := checkDefaultBackend(h, f.backend, dataDir); err != nil {
		return spec.HostPaths{}, err
	}
	return h, nil
}

// checkDefaultBackend refuses a --default-backend that names the daemon's
// own paths, as a stack's backend may not: the data dir's own backend,
// the default, goes by leaving the flag unset (or by its exact URL, which
// the runner recognises and splits into one state directory per stack).
func checkDefaultBackend(h spec.HostPaths, backend, dataDir string) error {
	if backend == "" || backend == "file://"+filepath.Join(dataDir, "backend") {
		return nil
	}
	if err := h.CheckBackend(backend, false); err != nil {
		return usageErrorf("run: --default-backend: %v (leave it unset for the data dir's own backend)", err)
	}
	return nil
}

func cleanPaths(paths []string) []string {
	out := make([]string, 0, len(paths))
	for _, p := range paths {
		out = append(out, filepath.Clean(p))
	}
	return out
}

// userHome is the home directory the runner expands a backend's "~"
// with; "" when there is none.
func userHome() string {
	home, err := os.UserHomeDir()
	if err != nil {
		return ""
	}
	return home
}
