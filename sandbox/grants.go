package sandbox

import (
	"path/filepath"
	"slices"
	"strings"
)

// Grants says whether every confined process may read path: it lies in
// a system path the sandbox grants (TLS certificates among them, so
// /etc/ssl/private and /etc/pki/tls/private too) or in o's ReadOnly or
// ReadWrite paths. Symbolic links are resolved first, as the kernel
// resolves them when a process opens path. The daemon uses it to warn of
// a secret file that programs could read.
func (o Options) Grants(path string) bool {
	p := resolve(path)
	for _, root := range slices.Concat(systemRODirs, systemROFiles, systemRWFiles, o.ReadOnly, o.ReadWrite) {
		if root = resolve(root); p == root || strings.HasPrefix(p, strings.TrimSuffix(root, "/")+"/") {
			return true
		}
	}
	return false
}

// resolve is path absolute, with its symbolic links resolved when it
// exists.
func resolve(path string) string {
	p, err := filepath.Abs(path)
	if err != nil {
		return path
	}
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	return p
}
