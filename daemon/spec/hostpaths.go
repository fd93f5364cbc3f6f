package spec

import (
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// BackendURLEnv is the environment variable through which a stack's
// envRefs (or envs, envSecrets) can name its backend: the runner takes
// it when spec.backend is empty.
const BackendURLEnv = "PULUMI_BACKEND_URL"

// HostPaths says which paths of the daemon's host a config may name in
// the fields that reach past the config and the stack's own files:
//
//   - a file:// backend (spec.backend, or PULUMI_BACKEND_URL in the
//     stack's environment), which the sandbox opens read-write to the
//     stack's programs;
//   - a local repository as projectRepo (a path, or a file:// URL), which
//     the daemon, unconfined, clones into the stack's checkout.
//
// A config from Git is written by whoever can commit to its repository:
// it may name a backend only under BackendRoots and a local repository
// only under RepoRoots, never in a Protected path. No config, from any
// source, may name a backend in a Protected path, or in a parent of one.
// Every other field that names a path is confined where it is read: FS
// references of a config from Git read only its own checkout, Secret and
// ConfigMap references only names inside --secrets-dir and
// --configmaps-dir, repoDir only its checkout.
//
// The zero value allows a config from Git no file backend and no local
// repository, and protects nothing else.
type HostPaths struct {
	// BackendRoots are the directories under which a config from Git may
	// name a file:// backend (--backend-root).
	BackendRoots []string
	// RepoRoots are the directories under which a config from Git may
	// name a local repository (--repo-root).
	RepoRoots []string
	// Protected are the daemon's own paths: its data dir, --secrets-dir,
	// the toolchain, …
	Protected []ProtectedPath
	// Home expands a backend's "~", as the runner does (the daemon's
	// os.UserHomeDir); empty refuses "~".
	Home string
}

// ProtectedPath is one of the daemon's own paths.
type ProtectedPath struct {
	Path string
	// What names it in errors, with the flag that sets it: "the data dir
	// (--data-dir)". A path is never quoted from the config: a backend
	// URL read from a Secret is a secret.
	What string
}

// The flags named in refusals.
const (
	backendRootFlag = "--backend-root"
	repoRootFlag    = "--repo-root"
)

// hosts are the rules on the host paths s may name; the zero HostPaths
// for a stack not read from an Input.
func (s *Stack) hosts() HostPaths {
	if s.hostPaths == nil {
		return HostPaths{}
	}
	return *s.hostPaths
}

// FileBackendPath is the directory the runner opens to a stack's programs
// for backend, a backend URL: for file://PATH, PATH as the runner reads it
// (a query dropped, "~" expanded with home, cleaned). isFile is false for
// other backends, which name no path of the host. A path that is not
// absolute, holds "..", or has "~" without home is an error: the runner
// would open the daemon's working directory, or something else than the
// CLI writes to.
func FileBackendPath(backend, home string) (dir string, isFile bool, err error) {
	scheme, rest, ok := strings.Cut(backend, "://")
	if !ok || !strings.EqualFold(scheme, "file") {
		return "", false, nil
	}
	if scheme != "file" {
		// The runner and the CLI know only the lowercase scheme; what
		// they would make of another is not worth guessing.
		return "", true, errors.New("write the scheme of a file backend in lowercase: file://")
	}
	rest, _, _ = strings.Cut(rest, "?")
	switch {
	case rest == "":
		return "", true, errors.New("a file:// backend needs a directory: file:///path/to/dir")
	case slices.Contains(strings.Split(filepath.ToSlash(rest), "/"), ".."):
		return "", true, errors.New("the path of a file:// backend may not hold \"..\"")
	case rest == "~" || strings.HasPrefix(rest, "~/"):
		if home == "" || !filepath.IsAbs(home) {
			return "", true, errors.New("a file:// backend in ~ cannot be checked here: write its absolute path")
		}
		rest = home + rest[1:]
	case !filepath.IsAbs(rest):
		return "", true, errors.New("a file:// backend needs an absolute path (file:///path/to/dir): a relative one would name the daemon's working directory")
	}
	return filepath.Clean(rest), true, nil
}

// CheckBackend says why a stack may not use backend (a backend URL), or
// nil. fromGit says that the stack's config comes from a Git source.
func (h HostPaths) CheckBackend(backend string, fromGit bool) error {
	if fromGit && isHomeBackend(backend) {
		return fmt.Errorf("a config from Git may not name a file:// backend in ~: write an absolute path under a %s directory", backendRootFlag)
	}
	dir, isFile, err := FileBackendPath(backend, h.Home)
	if err != nil || !isFile {
		return err
	}
	return h.checkBackendDir(dir, fromGit)
}

func isHomeBackend(backend string) bool {
	rest, ok := strings.CutPrefix(backend, "file://")
	return ok && (rest == "~" || strings.HasPrefix(rest, "~/") || strings.HasPrefix(rest, "~?"))
}

// checkBackendDir applies the rules to dir, absolute and clean: never
// in, equal to or above a protected path; from Git, under a root. Both
// are compared with symbolic links resolved, as the sandbox opens them.
func (h HostPaths) checkBackendDir(dir string, fromGit bool) error {
	real, err := resolvePath(dir)
	if err != nil {
		return fmt.Errorf("a file:// backend: %w", err)
	}
	for _, p := range h.protected() {
		pr := resolved(p.Path)
		switch {
		case within(real, pr) || within(dir, filepath.Clean(p.Path)):
			return fmt.Errorf("a file:// backend may not lie in %s: its programs would read and write the daemon's files", p.What)
		case within(pr, real) || within(filepath.Clean(p.Path), dir):
			return fmt.Errorf("a file:// backend may not be a parent of %s: its programs would read and write the daemon's files", p.What)
		}
	}
	if fromGit && !underRoot(real, h.BackendRoots) {
		return rootError("a file:// backend", backendRootFlag, h.BackendRoots)
	}
	return nil
}

// RepoPath is the local directory a projectRepo names, or "" for a remote
// repository: a path (relative ones start at dir, the config file's
// directory) or a file:// URL. A file:// URL with a host is an error.
func RepoPath(projectRepo, dir string) (string, error) {
	if IsLocalPath(projectRepo) {
		p := projectRepo
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		return filepath.Clean(p), nil
	}
	scheme, _, ok := strings.Cut(projectRepo, "://")
	if !ok || !strings.EqualFold(scheme, "file") {
		return "", nil
	}
	u, err := url.Parse(projectRepo)
	if err != nil {
		return "", errors.New("not a valid file:// URL")
	}
	if u.Host != "" && u.Host != "localhost" {
		return "", errors.New("a file:// URL names a path of this host: file:///path")
	}
	if u.Path == "" || !filepath.IsAbs(u.Path) {
		return "", errors.New("a file:// URL needs an absolute path: file:///path")
	}
	return filepath.Clean(u.Path), nil
}

// CheckRepo says why a stack whose config comes from Git may not have the
// local repository at dir (absolute, clean; see RepoPath) cloned into its
// checkout, or nil: it must lie under a root and in no protected path,
// where the checkouts of other stacks and config sources are kept. A
// local config may name any repository.
func (h HostPaths) CheckRepo(dir string, fromGit bool) error {
	if !fromGit {
		return nil
	}
	real, err := resolvePath(dir)
	if err != nil {
		return fmt.Errorf("a local repository: %w", err)
	}
	for _, p := range h.protected() {
		if within(real, resolved(p.Path)) || within(dir, filepath.Clean(p.Path)) {
			return fmt.Errorf("a config from Git may not name a local repository in %s", p.What)
		}
	}
	if !underRoot(real, h.RepoRoots) {
		return rootError("a local repository", repoRootFlag, h.RepoRoots)
	}
	return nil
}

// CheckRoot says why root cannot be a --backend-root or --repo-root: it
// must be absolute and lie in no protected path (it may be a parent of
// one: CheckBackend and CheckRepo refuse what lies in a protected path).
func (h HostPaths) CheckRoot(root string) error {
	if !filepath.IsAbs(root) {
		return errors.New("not an absolute path")
	}
	root = filepath.Clean(root)
	for _, p := range h.protected() {
		if within(resolved(root), resolved(p.Path)) || within(root, filepath.Clean(p.Path)) {
			return fmt.Errorf("lies in %s", p.What)
		}
	}
	return nil
}

// protected are the Protected paths that are set, made absolute.
func (h HostPaths) protected() []ProtectedPath {
	var out []ProtectedPath
	for _, p := range h.Protected {
		if p.Path == "" {
			continue
		}
		if abs, err := filepath.Abs(p.Path); err == nil {
			p.Path = abs
		}
		out = append(out, p)
	}
	return out
}

func rootError(what, flag string, roots []string) error {
	if len(roots) == 0 {
		return fmt.Errorf("a config from Git may name %s only under a directory the operator allows with %s, and none is allowed", what, flag)
	}
	return fmt.Errorf("a config from Git may name %s only under a %s directory (%s)", what, flag, strings.Join(roots, ", "))
}

func underRoot(real string, roots []string) bool {
	return slices.ContainsFunc(roots, func(r string) bool {
		return filepath.IsAbs(r) && within(real, resolved(r))
	})
}

// within says whether p is dir or lies below it; both absolute and clean.
func within(p, dir string) bool {
	if p == dir || dir == string(filepath.Separator) {
		return true
	}
	return strings.HasPrefix(p, dir+string(filepath.Separator))
}

// errUnresolvable refuses a path whose symbolic links cannot be told.
var errUnresolvable = errors.New("its path cannot be resolved (a dangling symbolic link, or a directory the daemon cannot read)")

// resolvePath is p, absolute and clean, with the symbolic links of its
// longest existing prefix resolved: where the kernel takes p once the
// missing rest is created (a backend's directory may not exist yet). A
// component that exists but cannot be resolved (a dangling link, which
// creating the directory would follow) is errUnresolvable.
func resolvePath(p string) (string, error) {
	var rest []string
	for cur := p; ; cur = filepath.Dir(cur) {
		if real, err := filepath.EvalSymlinks(cur); err == nil {
			slices.Reverse(rest)
			return filepath.Join(append([]string{real}, rest...)...), nil
		}
		if _, err := os.Lstat(cur); !errors.Is(err, fs.ErrNotExist) {
			return "", errUnresolvable
		}
		if cur == filepath.Dir(cur) {
			return p, nil
		}
		rest = append(rest, filepath.Base(cur))
	}
}

// resolved is an operator's path (a root, a protected path) resolved as
// far as it can be, else as written.
func resolved(p string) string {
	if abs, err := filepath.Abs(p); err == nil {
		p = abs
	}
	if r, err := resolvePath(p); err == nil {
		return r
	}
	return p
}

// CheckStackBackend says why stack s may not run with backend (its
// spec.backend) and env (its environment, resolved), or nil: the checks
// of CheckBackend, on what the config names once every reference is
// read. The error names the field that gave the backend.
func (h HostPaths) CheckStackBackend(s *Stack, backend string, env map[string]string) error {
	if err := h.CheckBackend(backend, s.FromGit("backend")); err != nil {
		return &FieldError{Path: "backend", Err: err}
	}
	v, ok := env[BackendURLEnv]
	if !ok {
		return nil
	}
	if err := h.CheckBackend(v, s.FromGit("envRefs."+BackendURLEnv)); err != nil {
		field := "envRefs." + BackendURLEnv
		if _, ref := s.Spec.EnvRefs[BackendURLEnv]; !ref {
			field = "the environment variable " + BackendURLEnv + " (envs, envSecrets)"
		}
		return &FieldError{Path: field, Err: err}
	}
	return nil
}

// StackBackend is the backend stack s names: spec.backend, else the
// variable PULUMI_BACKEND_URL of its environment, resolved as StackEnv
// does (envRefs win over envs and envSecrets), the runner's order; ""
// leaves it to the daemon's default backend. Only that variable is read.
func (c *Config) StackBackend(s *Stack, refs RefSources) (string, error) {
	if s.Spec.Backend != "" {
		return s.Spec.Backend, nil
	}
	if r, ok := s.Spec.EnvRefs[BackendURLEnv]; ok {
		return c.ResolveRef(s, "envRefs."+BackendURLEnv, r, refs)
	}
	more, err := c.legacyEnv(s, refs)
	if err != nil {
		return "", err
	}
	return more[BackendURLEnv].value, nil
}
