package main

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/stackd/stackd/auth"
	"github.com/stackd/stackd/runner"
	"github.com/stackd/stackd/store"
)

// dataDirEntries are the names the daemon keeps in its data dir, files
// and directories: its store, keys, tokens and passphrases, the API's
// URL (a program that rewrote it would get the token of the clients that
// read it), the stacks' checkouts, workspaces and states, the default
// backend, scratch space.
// A --sandbox-ro or --sandbox-rw path may lie in the data dir (as the
// Makefile's example-out does) only outside all of them.
var dataDirEntries = []string{
	store.FileName, apiTokenFile, apiURLFile, auth.SessionKeyFile, "digest.key", "passphrase",
	"backend", "backends", "passphrases", "workspaces", "pulumi-home", "tmp", "home",
	"stacks", "config", "policy", "previews", "reviews", "preview-now", "engine", oidcDir, runner.CredentialsDir,
}

// ownPaths are the daemon's paths that no program may reach through a
// --sandbox-ro or --sandbox-rw path. secretsDir and tokenFile are ""
// when not configured.
type ownPaths struct {
	dataDir    string // --data-dir
	secretsDir string // --secrets-dir
	tokenFile  string // --api-token-file
}

// daemonFiles is what a grant of the data dir opens to programs.
const daemonFiles = "the daemon's API token, passphrases and store"

// checkGrant refuses path as a flag's (--sandbox-ro or --sandbox-rw)
// path that opens the daemon's own files to every program:
//   - the data dir, or a parent of it; in the data dir, one of its
//     dataDirEntries or a path in one (any other path there is allowed);
//   - the secrets dir, a path in it, or a parent of it;
//   - the token file, its directory, or a parent of it.
//
// Paths are compared absolute and cleaned, with their symbolic links
// resolved as far as they exist, as the kernel resolves them.
func checkGrant(flag, path string, own ownPaths) error {
	p := resolvePath(path)
	refuse := func(what, reads string) error {
		return fmt.Errorf("%s %s: it is %s: that would let every program read %s", flag, path, what, reads)
	}
	if own.dataDir != "" {
		data := resolvePath(own.dataDir)
		if within(data, p) {
			return refuse("the data dir (--data-dir "+own.dataDir+") or a parent of it", daemonFiles)
		}
		if rel, ok := relWithin(p, data); ok {
			if first, _, _ := strings.Cut(rel, string(filepath.Separator)); slices.Contains(dataDirEntries, first) {
				return refuse("the data dir's own "+first+" or a path in it", daemonFiles)
			}
		}
	}
	if own.secretsDir != "" {
		secrets := resolvePath(own.secretsDir)
		if within(secrets, p) || within(p, secrets) {
			return refuse("--secrets-dir "+own.secretsDir+", a path in it or a parent of it", "every stack's secrets")
		}
	}
	if own.tokenFile != "" {
		token := resolvePath(own.tokenFile)
		if p == token || within(filepath.Dir(token), p) {
			return refuse("--api-token-file "+own.tokenFile+", its directory or a parent of it", "the daemon's API token")
		}
	}
	return nil
}

// checkGrants refuses the --sandbox-ro paths ro and --sandbox-rw paths
// rw that checkGrant refuses, and a path that lies in a --sandbox-rw path
// other than itself: a program could replace it with a symbolic link to
// anywhere, which the sandbox of the next program would then open.
func checkGrants(ro, rw []string, own ownPaths) error {
	for _, g := range []struct {
		flag  string
		paths []string
	}{{"--sandbox-ro", ro}, {"--sandbox-rw", rw}} {
		for _, p := range g.paths {
			if err := checkGrant(g.flag, p, own); err != nil {
				return err
			}
			for _, w := range rw {
				if rel, ok := relWithin(resolvePath(p), resolvePath(w)); ok && rel != "." {
					return fmt.Errorf("%s %s: it lies in --sandbox-rw %s, where a program could replace it with a link to the data dir: that would let every program read %s", g.flag, p, w, daemonFiles)
				}
			}
		}
	}
	return nil
}

// checkSandboxGrants refuses the --sandbox-ro and --sandbox-rw paths that
// checkGrants refuses, with a usage error. dataDir is absolute.
func (f *runFlags) checkSandboxGrants(dataDir string) error {
	own := ownPaths{dataDir: dataDir, secretsDir: f.secretsDir, tokenFile: f.tokenFile}
	if err := checkGrants(f.sandboxRO, f.sandboxRW, own); err != nil {
		return usageErrorf("run: %v", err)
	}
	return nil
}

// resolvePath is path absolute and cleaned, with the symbolic links of
// its longest existing prefix resolved.
func resolvePath(path string) string {
	p, err := filepath.Abs(path)
	if err != nil {
		return filepath.Clean(path)
	}
	var rest []string
	for {
		if r, err := filepath.EvalSymlinks(p); err == nil {
			return filepath.Join(append([]string{r}, rest...)...)
		}
		parent := filepath.Dir(p)
		if parent == p {
			return filepath.Join(append([]string{p}, rest...)...)
		}
		rest = append([]string{filepath.Base(p)}, rest...)
		p = parent
	}
}

// resolvePaths is paths, each resolved by resolvePath.
func resolvePaths(paths []string) []string {
	out := make([]string, 0, len(paths))
	for _, p := range paths {
		out = append(out, resolvePath(p))
	}
	return out
}

// within says whether the absolute, clean path p is root or lies in it.
func within(p, root string) bool {
	_, ok := relWithin(p, root)
	return ok
}

// relWithin is p relative to root ("." for root itself), and whether p
// lies in root; both are absolute and clean.
func relWithin(p, root string) (string, bool) {
	rel, err := filepath.Rel(root, p)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return "", false
	}
	return rel, true
}
