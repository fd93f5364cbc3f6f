package fleet

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/stackd/stackd/daemon/model"
	"github.com/stackd/stackd/daemon/scrub"
	"github.com/stackd/stackd/daemon/spec"
)

// AuthFunc resolves a git generator's gitAuth into credentials. Its
// errors name references, never their values.
type AuthFunc func(set *spec.StackSet, auth *spec.GitAuthConfig) (*spec.GitAuth, error)

// RefAuth resolves gitAuth as a stack's is resolved (spec.Config.GitAuth),
// with refs; the set stands for the stack, so a set read from Git reads
// files only inside its checkout and only the environment variables
// refs.EnvAllow allows. Secret references read refs.SecretsDir only (the
// config's Secret documents are not at hand while it loads).
func RefAuth(refs spec.RefSources) AuthFunc {
	return func(set *spec.StackSet, auth *spec.GitAuthConfig) (*spec.GitAuth, error) {
		st := &spec.Stack{Name: set.Name, Dir: set.Dir, Source: set.Source, Root: set.Root,
			Spec: spec.StackSpec{GitAuth: auth}}
		return (&spec.Config{}).GitAuth(st, refs)
	}
}

// watched is a git source an expansion resolved, and the commit it
// resolved to ("" when Resolve failed).
type watched struct {
	src    model.GitSource // Ref set
	commit string
}

// resolved is the outcome of one Resolve within an evaluation.
type resolved struct {
	commit string
	err    error
}

var fullCommit = regexp.MustCompile(`^[0-9a-fA-F]{40}$`)

// git evaluates a git generator: it resolves the revision, checks the
// commit out and walks it.
func (e *eval) git(g *spec.GitGenerator) ([]item, error) {
	if (len(g.Directories) > 0) == (len(g.Files) > 0) {
		return nil, errors.New("git: set either directories or files")
	}
	globs, err := compileGlobs(append(g.Directories, g.Files...))
	if err != nil {
		return nil, fmt.Errorf("git: %w", err)
	}
	if err := checkURL(g.RepoURL); err != nil {
		return nil, fmt.Errorf("git: repoURL: %w", err)
	}
	res := &e.gens[e.cur]
	res.repo = cmp.Or(res.repo, cleanURL(g.RepoURL))
	if e.x.opts.Offline {
		res.offline = true
		return nil, nil
	}
	src, err := e.x.source(e.set, g)
	if err != nil {
		return nil, err
	}
	commit, err := e.resolve(&src, cmp.Or(g.Revision, "HEAD"))
	if err != nil {
		return nil, err
	}
	res.commit = cmp.Or(res.commit, commit)
	dir, err := e.checkout(src, commit)
	if err != nil {
		return nil, err
	}
	if len(g.Directories) > 0 {
		return directories(dir, globs, e.x.opts.MaxItems)
	}
	return files(dir, globs, e.x.opts.MaxFiles, e.x.opts.MaxFileBytes)
}

// source is the GitSource of g, with its credentials resolved. A local
// path is taken relative to the set's file, and a set read from Git may
// name only the local repositories HostPaths allows.
func (x *Expander) source(set *spec.StackSet, g *spec.GitGenerator) (model.GitSource, error) {
	if x.opts.Git == nil {
		return model.GitSource{}, errors.New("git: no Git access configured")
	}
	src := model.GitSource{URL: g.RepoURL}
	dir, err := spec.RepoPath(src.URL, set.Dir)
	if err == nil && dir != "" {
		err = x.opts.HostPaths.CheckRepo(dir, set.Root != "")
	}
	if err != nil {
		return model.GitSource{}, fmt.Errorf("git: repoURL: %w", err)
	}
	if spec.IsLocalPath(src.URL) {
		src.URL = "file://" + filepath.ToSlash(dir)
	}
	if g.GitAuth != nil {
		if src.Auth, err = x.opts.Auth(set, g.GitAuth); err != nil {
			return model.GitSource{}, fmt.Errorf("git: %w", err)
		}
	}
	return src, nil
}

// checkURL refuses an empty URL and credentials in it, in its user info
// or its query (what scrub.URLs masks): they would show in status and
// logs; gitAuth carries them.
func checkURL(u string) error {
	if u == "" {
		return errors.New("empty")
	}
	if !strings.Contains(u, "://") {
		return nil // a local path, or scp-like git@host:path, which names a user, not a secret
	}
	p, err := url.Parse(u)
	if err != nil {
		return errors.New("not a valid URL") // the parser's message may quote a password
	}
	if _, pw := p.User.Password(); pw || p.User != nil && p.Scheme != "ssh" || scrub.URLs(u) != u {
		return errors.New("credentials in the URL: put them in gitAuth instead")
	}
	return nil
}

// cleanURL is u as the status shows it: without userinfo but an ssh
// user name, its credential query parameters masked.
func cleanURL(u string) string {
	if !strings.Contains(u, "://") {
		return u
	}
	p, err := url.Parse(u)
	if err != nil {
		return "(an invalid URL)"
	}
	if p.User != nil {
		if p.Scheme == "ssh" && p.User.Username() != "" {
			p.User = url.User(p.User.Username())
		} else {
			p.User = nil
		}
	}
	return scrub.URLs(p.String())
}

// resolve returns the commit ref of src is at: a full commit as it is
// (src.Ref stays empty: a pinned commit), else from Git.Resolve, once per
// source and ref in an evaluation (src.Ref becomes ref). What it
// resolved is watched by Changed.
func (e *eval) resolve(src *model.GitSource, ref string) (string, error) {
	if fullCommit.MatchString(ref) {
		return strings.ToLower(ref), nil
	}
	src.Ref = ref
	k := src.Key() + "\x00" + ref
	r, ok := e.commits[k]
	if !ok {
		r.commit, r.err = e.x.opts.Git.Resolve(e.ctx, *src)
		e.commits[k] = r
		e.watched[k] = watched{src: *src, commit: r.commit}
	}
	if r.err != nil {
		return "", fmt.Errorf("git: resolve %s: %w", ref, r.err)
	}
	return r.commit, nil
}

// checkout puts commit of src into its directory under Dir, one per
// source (URL and credentials) and revision, shared by every set using
// it, and returns that directory.
func (e *eval) checkout(src model.GitSource, commit string) (string, error) {
	if e.x.opts.Dir == "" {
		return "", errors.New("git: no checkout directory configured")
	}
	name := checkoutName(src, commit)
	e.checkouts[name] = true
	if err := os.MkdirAll(e.x.opts.Dir, 0o700); err != nil {
		return "", fmt.Errorf("git: checkout directory: %w", err)
	}
	dir, err := e.x.opts.Git.Checkout(e.ctx, src, commit, filepath.Join(e.x.opts.Dir, name))
	if err != nil {
		return "", fmt.Errorf("git: %w", err)
	}
	return dir, nil
}

// checkoutName names a checkout directory: a hash of the source's key
// (URL and credentials, so that a set without a repository's credentials
// never reads another's checkout of it) and its revision (the ref, or
// the pinned commit).
func checkoutName(src model.GitSource, commit string) string {
	sum := sha256.Sum256([]byte(src.Key() + "\x00" + cmp.Or(src.Ref, commit)))
	return hex.EncodeToString(sum[:8])
}

// Changed resolves every repository the last expansions resolved again
// (through Git.Resolve, which shares one ls-remote among the calls of a
// round) and says whether one is at a different commit now, or resolves
// now where it failed then. A repository that fails to resolve now
// changes nothing.
func (x *Expander) Changed(ctx context.Context) bool {
	if x.opts.Offline || x.opts.Git == nil {
		return false
	}
	now := map[string]string{} // by source key and ref, this call's
	for _, w := range x.allWatched() {
		k := w.src.Key() + "\x00" + w.src.Ref
		c, seen := now[k]
		if !seen {
			var err error
			if c, err = x.opts.Git.Resolve(ctx, w.src); err != nil {
				x.log.Debug("fleet: resolve for changes", "repository", cleanURL(w.src.URL), "err", err)
			}
			now[k] = c
		}
		if c != "" && c != w.commit {
			x.log.Info("fleet: a generator's repository changed", "repository", cleanURL(w.src.URL),
				"ref", w.src.Ref, "commit", c)
			return true
		}
	}
	return false
}

// allWatched lists the sources of every set's last expansion.
func (x *Expander) allWatched() []watched {
	x.mu.Lock()
	defer x.mu.Unlock()
	var out []watched
	for _, st := range x.sets {
		for _, w := range st.watched {
			out = append(out, w)
		}
	}
	return out
}

// Watch calls reload whenever Changed, checking every period, until ctx
// ends. It runs in the caller's goroutine and starts none.
func (x *Expander) Watch(ctx context.Context, every time.Duration, reload func()) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if x.Changed(ctx) {
				reload()
			}
		}
	}
}

// sweep removes the checkouts under Dir that no set uses, and what the
// Git left of them (name.tmp-*, name.old-*). Expand and Keep call it
// with x.run held, so no checkout of this Expander is under way.
func (x *Expander) sweep() {
	if x.opts.Dir == "" {
		return
	}
	used := map[string]bool{}
	x.mu.Lock()
	for _, st := range x.sets {
		for n := range st.checkouts {
			used[n] = true
		}
	}
	x.mu.Unlock()
	entries, err := os.ReadDir(x.opts.Dir)
	if err != nil {
		return
	}
	for _, en := range entries {
		name, _, _ := strings.Cut(en.Name(), ".")
		if used[name] || !checkoutNameRE.MatchString(name) {
			continue
		}
		if err := os.RemoveAll(filepath.Join(x.opts.Dir, en.Name())); err != nil {
			x.log.Warn("fleet: removing an unused checkout", "dir", en.Name(), "err", err)
		} else {
			x.log.Info("fleet: removed an unused checkout", "dir", en.Name())
		}
	}
}

var checkoutNameRE = regexp.MustCompile(`^[0-9a-f]{16}$`)
