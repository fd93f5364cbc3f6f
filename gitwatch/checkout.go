package gitwatch

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-git/go-billy/v5/osfs"
	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/format/index"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/storage/filesystem"

	"github.com/stackd/stackd/daemon/model"
)

// Checkout makes dir a checkout of commit (a full 40-hex SHA) with HEAD
// detached at it, and returns filepath.Join(dir, src.RepoDir).
//
// A dir whose HEAD already is commit is reused without any network call
// (only HEAD is compared: local changes in it are kept). Otherwise the
// commit is fetched into a fresh sibling "dir.tmp-*" (no tags, no
// submodules; only src.Ref's branch or tag, or all branches when Ref is
// empty; depth 1 when src.Shallow), checked out, verified, and swapped in:
// dir is renamed to "dir.old-*", the temp dir to dir, and the old one
// removed. A crash between the two renames leaves no dir and a
// "dir.old-*" that the next Checkout sweeps, like every "dir.tmp-*" and
// "dir.old-*" left behind. On any error dir is untouched and the temp dir
// removed. Checkouts of the same dir are serialized.
//
// A depth-1 fetch only holds the tip: when commit is not the tip, Checkout
// falls back to a full fetch of the same ref. At most MaxClones fetches run
// at once. Each fetch is bounded by Timeout; as go-git does not always
// honour cancellation (go-git#335), Checkout returns when the deadline
// passes and leaves the fetch to finish in the background, where it
// removes its own temp dir (its clone slot is released at once).
//
// The fetched pack and the checkout are bounded by MaxCheckoutBytes, each
// object of the pack and each file by MaxFileBytes; sizes are read from
// object headers before anything is inflated or written, and a checkout
// over a limit fails with an error that wraps ErrTooLarge, dir untouched.
//
// RepoDir must be relative without "..", and resolve (symlinks followed)
// to a directory inside dir; otherwise the error wraps ErrUnsafeRepoDir
// (or says the directory is missing) and dir is left as it was.
func (f *Fetcher) Checkout(ctx context.Context, src model.GitSource, commit, dir string) (string, error) {
	sc := newScrubber(src)
	p, err := f.checkout(ctx, src, commit, dir)
	if err != nil {
		return "", sc.errorf(err, "gitwatch: checkout %.12s of %s", commit, sc.cleanURL)
	}
	return p, nil
}

func (f *Fetcher) checkout(ctx context.Context, src model.GitSource, commit, dir string) (string, error) {
	if !plumbing.IsHash(commit) {
		return "", fmt.Errorf("invalid commit %q: want a full 40-hex sha", commit)
	}
	h := plumbing.NewHash(commit)
	if err := checkRepoDir(src.RepoDir); err != nil {
		return "", err
	}
	if dir == "" {
		return "", errors.New("empty checkout dir")
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("checkout dir: %w", err)
	}
	unlock, err := f.lockDir(ctx, dir)
	if err != nil {
		return "", err
	}
	defer unlock()
	f.sweep(dir)
	if headIs(dir, h) {
		f.log.Debug("gitwatch: checkout reused", "dir", dir, "commit", commit)
		return projectDir(dir, src.RepoDir)
	}
	tmp, err := f.fetchTemp(ctx, src, h, dir)
	if err != nil {
		return "", err
	}
	if _, err := projectDir(tmp, src.RepoDir); err != nil {
		f.removeTemp(tmp)
		return "", err
	}
	if err := f.swap(tmp, dir); err != nil {
		f.removeTemp(tmp)
		return "", err
	}
	return projectDir(dir, src.RepoDir)
}

// checkRepoDir rejects absolute repoDirs and ".." components lexically.
func checkRepoDir(repoDir string) error {
	if filepath.IsAbs(repoDir) || strings.HasPrefix(repoDir, "/") {
		return fmt.Errorf("%w %q: must be relative", ErrUnsafeRepoDir, repoDir)
	}
	for _, part := range strings.FieldsFunc(repoDir, func(r rune) bool { return r == '/' || r == filepath.Separator }) {
		if part == ".." {
			return fmt.Errorf("%w %q: must not contain \"..\"", ErrUnsafeRepoDir, repoDir)
		}
	}
	return nil
}

// projectDir returns root/repoDir after checking that, symlinks resolved,
// it is a directory inside root.
func projectDir(root, repoDir string) (string, error) {
	p := filepath.Join(root, repoDir)
	realRoot, err := filepath.EvalSymlinks(root)
	if err != nil {
		return "", fmt.Errorf("checkout dir: %w", err)
	}
	resolved, err := filepath.EvalSymlinks(p)
	if errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("repoDir %q does not exist in the repository: %w", repoDir, err)
	}
	if err != nil {
		return "", fmt.Errorf("repoDir %q: %w", repoDir, err)
	}
	rel, err := filepath.Rel(realRoot, resolved)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return "", fmt.Errorf("%w %q: resolves outside the checkout (symlink?)", ErrUnsafeRepoDir, repoDir)
	}
	if fi, err := os.Stat(resolved); err != nil || !fi.IsDir() {
		return "", fmt.Errorf("repoDir %q is not a directory", repoDir)
	}
	return p, nil
}

// headIs reports whether dir is a git checkout whose HEAD is h.
func headIs(dir string, h plumbing.Hash) bool {
	repo, err := git.PlainOpen(dir)
	if err != nil {
		return false
	}
	head, err := repo.Head()
	return err == nil && head.Hash() == h
}

// lockDir serializes checkouts of one dir, honouring ctx while waiting.
func (f *Fetcher) lockDir(ctx context.Context, dir string) (func(), error) {
	f.mu.Lock()
	l := f.dirs[dir]
	if l == nil {
		l = make(chan struct{}, 1)
		f.dirs[dir] = l
	}
	f.mu.Unlock()
	select {
	case l <- struct{}{}:
		return func() { <-l }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// sweep removes "dir.tmp-*" and "dir.old-*" siblings left by crashed runs,
// except temp dirs that a running (or abandoned) fetch still owns.
func (f *Fetcher) sweep(dir string) {
	parent, base := filepath.Split(dir)
	entries, err := os.ReadDir(parent)
	if err != nil {
		return
	}
	for _, e := range entries {
		name := e.Name()
		if !strings.HasPrefix(name, base+".tmp-") && !strings.HasPrefix(name, base+".old-") {
			continue
		}
		p := filepath.Join(parent, name)
		f.mu.Lock()
		_, live := f.live[p]
		f.mu.Unlock()
		if live {
			continue
		}
		if err := os.RemoveAll(p); err != nil {
			f.log.Warn("gitwatch: removing leftover", "path", p, "err", err)
			continue
		}
		f.log.Info("gitwatch: removed leftover", "path", p)
	}
}

// fetchTemp returns a temp sibling of dir holding a checkout of h.
func (f *Fetcher) fetchTemp(ctx context.Context, src model.GitSource, h plumbing.Hash, dir string) (string, error) {
	auth, err := f.authFor(src)
	if err != nil {
		return "", err
	}
	specs, what, err := f.refSpecs(ctx, src)
	if err != nil {
		return "", err
	}
	release, err := f.acquire(ctx)
	if err != nil {
		return "", err
	}
	defer release()
	job := fetchJob{src: src, auth: auth, specs: specs, what: what, commit: h, dir: dir, lim: f.limits()}
	if src.Shallow {
		tmp, err := f.attempt(ctx, job, 1)
		if err == nil || !errors.Is(err, ErrCommitNotFound) {
			return tmp, err
		}
		f.log.Info("gitwatch: commit is not the tip, falling back to a full fetch",
			"url", SanitizeURL(src.URL), "ref", what, "commit", h.String())
	}
	return f.attempt(ctx, job, 0)
}

// refSpecs returns the refspecs to fetch for src.Ref: the branch or tag it
// names (a short name is looked up by ls-remote, usually cached since
// Resolve), or all branches when Ref is empty.
func (f *Fetcher) refSpecs(ctx context.Context, src model.GitSource) ([]config.RefSpec, string, error) {
	if src.Ref == "" {
		return []config.RefSpec{"+refs/heads/*:refs/remotes/origin/*"}, "all branches", nil
	}
	cands := candidates(src.Ref)
	full := cands[0]
	if len(cands) > 1 {
		refs, err := f.listRefs(ctx, src)
		if err != nil {
			return nil, "", fmt.Errorf("ls-remote: %w", err)
		}
		if full, _, err = refs.find(src.Ref); err != nil {
			return nil, "", fmt.Errorf("%q: %w", src.Ref, err)
		}
	}
	if err := full.Validate(); err != nil {
		return nil, "", fmt.Errorf("ref %q: %w", full, err)
	}
	dst := full
	switch {
	case full == plumbing.HEAD:
		dst = "refs/remotes/origin/HEAD"
	case full.IsBranch():
		dst = plumbing.NewRemoteReferenceName("origin", full.Short())
	}
	return []config.RefSpec{config.RefSpec("+" + full + ":" + dst)}, string(full), nil
}

func (f *Fetcher) acquire(ctx context.Context) (func(), error) {
	select {
	case f.clones <- struct{}{}:
		return func() { <-f.clones }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

type fetchJob struct {
	src    model.GitSource
	auth   transport.AuthMethod
	specs  []config.RefSpec
	what   string
	commit plumbing.Hash
	dir    string
	lim    limits
}

// attempt fetches job into a new temp dir with the given depth (0: full),
// bounded by Timeout, and returns the temp dir.
func (f *Fetcher) attempt(ctx context.Context, job fetchJob, depth int) (string, error) {
	parent := filepath.Dir(job.dir)
	if err := os.MkdirAll(parent, 0o700); err != nil {
		return "", fmt.Errorf("checkout parent dir: %w", err)
	}
	tmp, err := os.MkdirTemp(parent, filepath.Base(job.dir)+".tmp-")
	if err != nil {
		return "", fmt.Errorf("temp dir: %w", err)
	}
	f.mu.Lock()
	f.live[tmp] = struct{}{}
	f.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, f.opts.Timeout)
	defer cancel()
	start := time.Now()
	f.opts.RemoteCall(OpFetch)
	abandoned, err := abandonable(ctx, func() error {
		return fetchInto(ctx, tmp, job, depth)
	}, func() { f.removeTemp(tmp) })
	if err != nil {
		if !abandoned {
			f.removeTemp(tmp)
		}
		return "", f.timedOut(ctx, err)
	}
	f.mu.Lock()
	delete(f.live, tmp)
	f.mu.Unlock()
	f.log.Info("gitwatch: fetched", "url", SanitizeURL(job.src.URL), "ref", job.what,
		"commit", job.commit.String(), "depth", depth, "took", time.Since(start))
	return tmp, nil
}

func (f *Fetcher) removeTemp(tmp string) {
	if err := os.RemoveAll(tmp); err != nil {
		f.log.Warn("gitwatch: removing temp dir", "path", tmp, "err", err)
	}
	f.mu.Lock()
	delete(f.live, tmp)
	f.mu.Unlock()
}

// fetchInto initializes a repository in tmp, fetches job's refspecs into
// it and checks out job.commit, detached, once checkTree has found it
// within the limits. The pack goes to disk, never whole into memory.
func fetchInto(ctx context.Context, tmp string, job fetchJob, depth int) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	repo, st, err := initRepo(tmp, job.lim, cancel)
	if err != nil {
		return fmt.Errorf("init: %w", err)
	}
	defer st.Close()
	rem := git.NewRemote(repo.Storer, &config.RemoteConfig{Name: "origin", URLs: []string{job.src.URL}, Fetch: job.specs})
	err = rem.FetchContext(ctx, &git.FetchOptions{
		RemoteName: "origin",
		RefSpecs:   job.specs,
		Depth:      depth,
		Auth:       job.auth,
		Tags:       git.NoTags,
	})
	if refused := st.refusal(); refused != nil {
		return fmt.Errorf("fetch %s: %w", job.what, refused)
	}
	if err != nil && !errors.Is(err, git.NoErrAlreadyUpToDate) {
		return fmt.Errorf("fetch %s: %w", job.what, err)
	}
	target, err := peelCommit(repo, job.commit)
	if err != nil {
		return fmt.Errorf("%s in %s: %w", job.commit, job.what, err)
	}
	if err := checkTree(st.Storage, target, job.lim); err != nil {
		return err
	}
	return checkoutHash(repo, target, job.src.URL, job.specs)
}

// initRepo is git.PlainInit with a BoundOS worktree: go-git's default
// ChrootOS rewrites an absolute symlink target "/etc" to "<tmp>/etc",
// which dangles once tmp is renamed; BoundOS writes targets verbatim and
// never follows a symlink out of the worktree while writing. Its storage
// streams blobs larger than streamAbove to their files, and checks the
// packs it receives against lim, calling cancel to stop a fetch whose
// pack it refuses (guardedStorage). It keeps its packs open, to read the
// objects of a checkout without opening a pack for each: the caller
// closes it.
func initRepo(dir string, lim limits, cancel context.CancelFunc) (*git.Repository, *guardedStorage, error) {
	wt := osfs.New(dir, osfs.WithBoundOS())
	dot, err := wt.Chroot(git.GitDirName)
	if err != nil {
		return nil, nil, err
	}
	st := &guardedStorage{lim: lim, cancel: cancel, Storage: filesystem.NewStorageWithOptions(dot,
		cache.NewObjectLRUDefault(), filesystem.Options{LargeObjectThreshold: streamAbove, KeepDescriptors: true})}
	repo, err := git.Init(st, wt)
	return repo, st, err
}

// peelCommit returns h, or the commit h's tag object points at.
func peelCommit(repo *git.Repository, h plumbing.Hash) (plumbing.Hash, error) {
	obj, err := repo.Object(plumbing.AnyObject, h)
	if errors.Is(err, plumbing.ErrObjectNotFound) {
		return h, ErrCommitNotFound
	}
	if err != nil {
		return h, err
	}
	switch o := obj.(type) {
	case *object.Commit:
		return o.Hash, nil
	case *object.Tag:
		c, err := o.Commit()
		if err != nil {
			return h, fmt.Errorf("peel tag: %w", err)
		}
		return c.Hash, nil
	}
	return h, fmt.Errorf("%w: object is a %s", ErrCommitNotFound, obj.Type())
}

// checkoutHash writes target's tree into the empty worktree of repo,
// then its index and HEAD, detached at target; it verifies HEAD and
// records the sanitized URL as origin (for tools that read it, such as
// Pulumi).
func checkoutHash(repo *git.Repository, target plumbing.Hash, url string, specs []config.RefSpec) error {
	if err := writeWorktree(repo, target); err != nil {
		return fmt.Errorf("checkout %s: %w", target, err)
	}
	head, err := repo.Head()
	if err != nil {
		return fmt.Errorf("read HEAD: %w", err)
	}
	if head.Hash() != target {
		return fmt.Errorf("HEAD is %s after checking out %s", head.Hash(), target)
	}
	_, err = repo.CreateRemote(&config.RemoteConfig{Name: "origin", URLs: []string{SanitizeURL(url)}, Fetch: specs})
	if err != nil {
		return fmt.Errorf("record origin: %w", err)
	}
	return nil
}

// writeWorktree writes commit's files in one walk of its tree (see
// treeWriter), the index of what it wrote, and HEAD.
func writeWorktree(repo *git.Repository, commit plumbing.Hash) error {
	w, err := repo.Worktree()
	if err != nil {
		return fmt.Errorf("worktree: %w", err)
	}
	c, err := repo.CommitObject(commit)
	if err != nil {
		return fmt.Errorf("read commit: %w", err)
	}
	t, err := c.Tree()
	if err != nil {
		return fmt.Errorf("read tree: %w", err)
	}
	tw := newTreeWriter(repo.Storer, w.Filesystem)
	if err := tw.tree(t, ""); err != nil {
		return err
	}
	if err := repo.Storer.SetIndex(&index.Index{Version: 2, Entries: tw.entries}); err != nil {
		return fmt.Errorf("write index: %w", err)
	}
	if err := repo.Storer.SetReference(plumbing.NewHashReference(plumbing.HEAD, commit)); err != nil {
		return fmt.Errorf("set HEAD: %w", err)
	}
	return nil
}

// swap replaces dir by tmp: dir is renamed aside, tmp renamed to dir, the
// old tree removed. If the second rename fails, dir is put back.
func (f *Fetcher) swap(tmp, dir string) error {
	old := ""
	if _, err := os.Lstat(dir); err == nil {
		old = dir + ".old-" + randSuffix()
		if err := os.Rename(dir, old); err != nil {
			return fmt.Errorf("move old checkout aside: %w", err)
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("checkout dir: %w", err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		if old != "" {
			if rerr := os.Rename(old, dir); rerr != nil {
				f.log.Error("gitwatch: restoring old checkout", "dir", dir, "err", rerr)
			}
		}
		return fmt.Errorf("move checkout into place: %w", err)
	}
	if old != "" {
		if err := os.RemoveAll(old); err != nil {
			f.log.Warn("gitwatch: removing old checkout", "path", old, "err", err)
		}
	}
	return nil
}

func randSuffix() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
