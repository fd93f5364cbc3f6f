package gitwatch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/stackd/stackd/daemon"
	"github.com/stackd/stackd/daemon/model"
)

// Defaults for zero Options fields.
const (
	DefaultTimeout   = 60 * time.Second
	DefaultCacheFor  = 5 * time.Second
	DefaultMaxClones = 2
)

// The operations Options.RemoteCall reports.
const (
	OpLsRemote = "ls-remote"
	OpFetch    = "fetch"
)

// Errors callers may test with errors.Is.
var (
	// ErrRefNotFound: the remote has no branch, tag or ref of that name.
	ErrRefNotFound = errors.New("ref not found")
	// ErrCommitNotFound: the commit is not in what was fetched for the ref.
	ErrCommitNotFound = errors.New("commit not found")
	// ErrUnsafeRepoDir: repoDir is absolute, has a ".." component or
	// resolves (through symlinks) outside the checkout.
	ErrUnsafeRepoDir = errors.New("unsafe repoDir")

	errEmptyRef = errors.New("empty ref: a pinned commit needs no resolve")
)

// Options configures a Fetcher. Zero values select the defaults given in
// parentheses.
type Options struct {
	// Timeout bounds every network call, ls-remote and clone (60s).
	Timeout time.Duration
	// CacheFor is how long an ls-remote result is reused for the same
	// GitSource.Key() (5s); negative disables the cache (concurrent calls
	// still share one ls-remote).
	CacheFor time.Duration
	// MaxClones bounds concurrent clones (2); ls-remote is not limited.
	MaxClones int
	// MaxCheckoutBytes bounds the files of one checkout together, and
	// the pack fetched for it (DefaultMaxCheckoutBytes); negative: no
	// limit.
	MaxCheckoutBytes int64
	// MaxFileBytes bounds one file of a checkout, and each object of the
	// fetched pack (DefaultMaxFileBytes); negative: no limit.
	MaxFileBytes int64
	// KnownHosts is the known_hosts file for SSH host key checking; ""
	// means $SSH_KNOWN_HOSTS (a path list), then ~/.ssh/known_hosts.
	KnownHosts string
	// InsecureIgnoreHostKey turns SSH host key checking off.
	InsecureIgnoreHostKey bool
	// AllowPlainHTTPAuth allows credentials over http:// to non-loopback
	// hosts (refused by default, like Flux).
	AllowPlainHTTPAuth bool
	// RemoteCall, when set, is told of every call to a remote as it
	// starts: op is "ls-remote" or "fetch". It must not block.
	RemoteCall func(op string)
	// Logger receives the package's records (ls-remote at debug, fetches
	// and sweeps at info, cleanup failures at warn); nil discards them.
	// Records never contain credentials.
	Logger *slog.Logger
}

// Fetcher implements daemon.Fetcher with go-git. Use New; its methods are
// safe for concurrent use.
type Fetcher struct {
	opts   Options
	log    *slog.Logger
	clones chan struct{} // semaphore of MaxClones slots

	mu    sync.Mutex
	cache map[string]*cached       // by GitSource.Key()
	calls map[string]*call         // in-flight ls-remotes by Key()
	dirs  map[string]chan struct{} // per checkout dir lock
	live  map[string]struct{}      // temp dirs of running clones
	// appTokens are GitHub App installation tokens, by app, installation
	// and API.
	appTokens map[string]appToken
}

var _ daemon.Fetcher = (*Fetcher)(nil)

type cached struct {
	url     string
	refs    *remoteRefs
	expires time.Time
}

type call struct {
	url  string
	done chan struct{}
	refs *remoteRefs
	err  error
}

// New returns a Fetcher configured by opts, with defaults filled in.
func New(opts Options) *Fetcher {
	if opts.Timeout <= 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.CacheFor == 0 {
		opts.CacheFor = DefaultCacheFor
	}
	if opts.MaxClones <= 0 {
		opts.MaxClones = DefaultMaxClones
	}
	if opts.MaxCheckoutBytes == 0 {
		opts.MaxCheckoutBytes = DefaultMaxCheckoutBytes
	}
	if opts.MaxFileBytes == 0 {
		opts.MaxFileBytes = DefaultMaxFileBytes
	}
	if opts.RemoteCall == nil {
		opts.RemoteCall = func(string) {}
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return &Fetcher{
		opts:      opts,
		log:       log,
		clones:    make(chan struct{}, opts.MaxClones),
		cache:     map[string]*cached{},
		calls:     map[string]*call{},
		dirs:      map[string]chan struct{}{},
		live:      map[string]struct{}{},
		appTokens: map[string]appToken{},
	}
}

// Resolve returns the full SHA of the commit src.Ref points at, from one
// ls-remote (shared with concurrent callers and cached for CacheFor per
// src.Key()).
//
// Ref may be full ("refs/heads/main", "refs/tags/v1", "HEAD") or short;
// a short name is tried as refs/heads/<ref>, then refs/tags/<ref>, then
// refs/<ref>, so a branch wins over a tag of the same name (git rev-parse
// prefers the tag, but stackd's ref names a branch first, like PKO's
// spec.branch). For an annotated tag the result is the commit it points at,
// taken from the peeled "<tag>^{}" entry that git servers advertise; a
// server that does not advertise it yields the tag object's SHA, which
// Checkout peels (Resolve never clones to find out).
func (f *Fetcher) Resolve(ctx context.Context, src model.GitSource) (string, error) {
	sc := newScrubber(src)
	if src.Ref == "" {
		return "", sc.errorf(errEmptyRef, "gitwatch: resolve in %s", sc.cleanURL)
	}
	refs, err := f.listRefs(ctx, src)
	if err != nil {
		return "", sc.errorf(err, "gitwatch: ls-remote %s", sc.cleanURL)
	}
	_, h, err := refs.find(src.Ref)
	if err != nil {
		return "", sc.errorf(err, "gitwatch: resolve %q in %s", src.Ref, sc.cleanURL)
	}
	return h.String(), nil
}

// Forget drops every cached ls-remote result for url, whatever the
// credentials, and detaches in-flight calls for it so that the next
// Resolve asks the remote. URLs are compared ignoring a trailing "/" or
// ".git".
func (f *Fetcher) Forget(url string) {
	want := normalizeURL(url)
	f.mu.Lock()
	defer f.mu.Unlock()
	for k, e := range f.cache {
		if normalizeURL(e.url) == want {
			delete(f.cache, k)
		}
	}
	for k, c := range f.calls {
		if normalizeURL(c.url) == want {
			delete(f.calls, k)
		}
	}
}

func normalizeURL(u string) string {
	u = strings.TrimSuffix(strings.TrimSpace(u), "/")
	return strings.TrimSuffix(u, ".git")
}

// listRefs returns the remote's refs, from the cache, from an in-flight
// call for the same key, or from a new ls-remote. The ls-remote runs
// detached from ctx (bounded by Timeout) so that one caller giving up does
// not fail the others; each caller stops waiting when its own ctx ends.
func (f *Fetcher) listRefs(ctx context.Context, src model.GitSource) (*remoteRefs, error) {
	key := src.Key()
	f.mu.Lock()
	if e := f.cache[key]; e != nil && time.Now().Before(e.expires) {
		f.mu.Unlock()
		return e.refs, nil
	}
	c := f.calls[key]
	if c == nil {
		c = &call{url: src.URL, done: make(chan struct{})}
		f.calls[key] = c
		go f.runCall(context.WithoutCancel(ctx), key, c, src)
	}
	f.mu.Unlock()
	select {
	case <-c.done:
		return c.refs, c.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (f *Fetcher) runCall(ctx context.Context, key string, c *call, src model.GitSource) {
	c.refs, c.err = f.lsRemote(ctx, src)
	f.mu.Lock()
	if f.calls[key] == c { // not forgotten meanwhile
		delete(f.calls, key)
		if c.err == nil && f.opts.CacheFor > 0 {
			f.store(key, c)
		}
	}
	f.mu.Unlock()
	close(c.done)
}

// store caches c's result and drops expired entries; f.mu is held.
func (f *Fetcher) store(key string, c *call) {
	now := time.Now()
	for k, e := range f.cache {
		if !now.Before(e.expires) {
			delete(f.cache, k)
		}
	}
	f.cache[key] = &cached{url: c.url, refs: c.refs, expires: now.Add(f.opts.CacheFor)}
}

// abandonable runs work in a goroutine and returns its error, or ctx.Err()
// as soon as ctx ends even if work has not returned (go-git does not honour
// ctx everywhere, e.g. go-git#335 and the SSH handshake). In that case late
// runs in the goroutine once work finally returns, and abandoned is true.
func abandonable(ctx context.Context, work func() error, late func()) (abandoned bool, err error) {
	done := make(chan error, 1)
	go func() { done <- work() }()
	select {
	case err := <-done:
		return false, err
	case <-ctx.Done():
		go func() {
			<-done
			if late != nil {
				late()
			}
		}()
		return true, ctx.Err()
	}
}

// timedOut adds the deadline to err when ctx (bounded by Timeout) ended.
func (f *Fetcher) timedOut(ctx context.Context, err error) error {
	cerr := ctx.Err()
	if err == nil || cerr == nil {
		return err
	}
	if !errors.Is(err, cerr) {
		err = fmt.Errorf("%w: %w", cerr, err)
	}
	if errors.Is(cerr, context.DeadlineExceeded) {
		return fmt.Errorf("timed out (limit %s): %w", f.opts.Timeout, err)
	}
	return err
}
