package gitwatch

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stackd/stackd/daemon/model"
	"github.com/stackd/stackd/daemon/spec"
)

func TestResolve(t *testing.T) {
	fx := sharedFixture(t)
	if fx.tagV2 == fx.c2 {
		t.Fatal("v2 should be an annotated tag object")
	}
	srv := newGitServer(t, fx.root, "")
	cases := []struct{ ref, want string }{
		{"main", fx.c3},
		{"refs/heads/main", fx.c3},
		{"HEAD", fx.c3},
		{"dev", fx.c2},
		{"heads/dev", fx.c2},
		{"v1", fx.c1},              // lightweight tag
		{"refs/tags/v1", fx.c1},    // full
		{"v2", fx.c2},              // annotated: the commit, not the tag object
		{"refs/tags/v2", fx.c2},    // full
		{"both", fx.c2},            // branch wins over the tag of the same name
		{"refs/tags/both", fx.c1},  // unless the tag is asked for
		{"refs/heads/both", fx.c2}, // full branch
	}
	for _, tr := range []struct{ name, url string }{{"file", fx.fileURL()}, {"http", srv.repoURL()}} {
		t.Run(tr.name, func(t *testing.T) {
			f := New(Options{})
			for _, c := range cases {
				got, err := f.Resolve(context.Background(), model.GitSource{URL: tr.url, Ref: c.ref})
				if err != nil {
					t.Fatalf("Resolve(%q): %v", c.ref, err)
				}
				if got != c.want {
					t.Errorf("Resolve(%q) = %s, want %s", c.ref, got, c.want)
				}
			}
			_, err := f.Resolve(context.Background(), model.GitSource{URL: tr.url, Ref: "no-such-branch"})
			if !errors.Is(err, ErrRefNotFound) {
				t.Fatalf("unknown ref: got %v, want ErrRefNotFound", err)
			}
			msg := err.Error()
			if !strings.Contains(msg, `"no-such-branch"`) || !strings.Contains(msg, tr.url) || !strings.HasPrefix(msg, "gitwatch: ") {
				t.Errorf("unknown ref error should name the ref and url: %v", err)
			}
			if _, err := f.Resolve(context.Background(), model.GitSource{URL: tr.url}); err == nil {
				t.Error("empty ref: want an error")
			}
		})
	}
}

// TestResolveCache checks caching per key, expiry and Forget against a
// repository that moves. What is cached is cached for an hour, so that a
// busy machine never sees it expire; expiry is checked apart.
func TestResolveCache(t *testing.T) {
	fx := buildRepo(t, t.TempDir())
	srv := newGitServer(t, fx.root, "")
	f := New(Options{CacheFor: time.Hour})
	src := model.GitSource{URL: srv.repoURL(), Ref: "main"}
	ctx := context.Background()

	var wg sync.WaitGroup
	start := make(chan struct{})
	errs := make(chan error, 20)
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			got, err := f.Resolve(ctx, src)
			if err == nil && got != fx.c3 {
				err = errors.New("wrong sha " + got)
			}
			errs <- err
		}()
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := srv.infoRefs.Load(); n != 1 {
		t.Fatalf("20 concurrent Resolve: %d ls-remote, want 1", n)
	}
	// Another ref of the same source is served from the same ls-remote.
	if got, err := f.Resolve(ctx, model.GitSource{URL: src.URL, Ref: "dev"}); err != nil || got != fx.c2 {
		t.Fatalf("Resolve(dev) = %s, %v", got, err)
	}
	c4 := commitREADME(t, fx.path, "four")
	if got, _ := f.Resolve(ctx, src); got != fx.c3 || srv.infoRefs.Load() != 1 {
		t.Fatalf("within CacheFor: got %s after %d ls-remote, want cached %s", got, srv.infoRefs.Load(), fx.c3)
	}
	f.Forget(src.URL + ".git/") // normalized like the URL
	if got, _ := f.Resolve(ctx, src); got != c4 || srv.infoRefs.Load() != 2 {
		t.Fatalf("after Forget: got %s after %d ls-remote, want %s after 2", got, srv.infoRefs.Load(), c4)
	}
	// Other credentials make another key.
	other := src
	other.Auth = &model.GitAuth{Password: "x"}
	if _, err := f.Resolve(ctx, other); err != nil || srv.infoRefs.Load() != 3 {
		t.Fatalf("other key: %v, %d ls-remote, want 3", err, srv.infoRefs.Load())
	}
	// Once CacheFor passed (a sleep that long is sure to), a result is
	// not served again.
	const short = 100 * time.Millisecond
	g := New(Options{CacheFor: short})
	if _, err := g.Resolve(ctx, src); err != nil || srv.infoRefs.Load() != 4 {
		t.Fatalf("a new fetcher: %v, %d ls-remote, want 4", err, srv.infoRefs.Load())
	}
	time.Sleep(short + 50*time.Millisecond)
	if _, err := g.Resolve(ctx, src); err != nil || srv.infoRefs.Load() != 5 {
		t.Fatalf("after CacheFor: %v, %d ls-remote, want 5", err, srv.infoRefs.Load())
	}
}

func commitREADME(t *testing.T, repo, content string) string {
	t.Helper()
	writeFile(t, filepath.Join(repo, "README"), content)
	return commit(t, repo, content)
}

// TestResolveSingleflight: with the cache off, concurrent callers still
// share one ls-remote, and one caller giving up does not fail the others.
// The ls-remote is held at the server until every caller waits for it.
func TestResolveSingleflight(t *testing.T) {
	fx := sharedFixture(t)
	srv := newGitServer(t, fx.root, "")
	release := srv.holdNext(t)
	f := New(Options{CacheFor: -1})
	src := model.GitSource{URL: srv.repoURL(), Ref: "main"}

	var wg sync.WaitGroup
	errs := make(chan error, 9)
	for range 9 {
		wg.Go(func() {
			_, err := f.Resolve(context.Background(), src)
			errs <- err
		})
	}
	impatient, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := f.Resolve(impatient, src); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("the impatient caller: %v, want its deadline", err)
	}
	waitingForLsRemote(t, 9)
	release()
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if n := srv.infoRefs.Load(); n != 1 {
		t.Errorf("%d ls-remote, want 1", n)
	}
	if _, err := f.Resolve(context.Background(), src); err != nil || srv.infoRefs.Load() != 2 {
		t.Errorf("cache off: %v, %d ls-remote, want 2", err, srv.infoRefs.Load())
	}
}

// waitingForLsRemote waits until n goroutines wait in listRefs for the
// outcome of an ls-remote in flight (which the test holds at the
// server): past the point where they could start one of their own.
func waitingForLsRemote(t *testing.T, n int) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(5 * time.Millisecond) {
		buf := make([]byte, 1<<20)
		for {
			if k := runtime.Stack(buf, true); k < len(buf) {
				buf = buf[:k]
				break
			}
			buf = make([]byte, 2*len(buf))
		}
		waiting := 0
		for _, g := range strings.Split(string(buf), "\n\n") {
			if strings.Contains(g, " [select") && strings.Contains(g, "gitwatch.(*Fetcher).listRefs(") {
				waiting++
			}
		}
		if waiting >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d callers wait for the ls-remote, want %d", waiting, n)
		}
	}
}

func TestTimeout(t *testing.T) {
	addr := hangServer(t)
	f := New(Options{Timeout: 300 * time.Millisecond, InsecureIgnoreHostKey: true})
	ctx := context.Background()
	check := func(name string, err error) {
		t.Helper()
		if err == nil {
			t.Fatalf("%s: want an error", name)
		}
		if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "timed out") {
			t.Errorf("%s: want a timeout, got %v", name, err)
		}
	}
	start := time.Now()
	_, err := f.Resolve(ctx, model.GitSource{URL: "http://" + addr + "/repo", Ref: "main"})
	check("http ls-remote", err)

	// The SSH handshake does not honour ctx in go-git: Resolve returns anyway.
	key := keyPEM(t, newKey(t), "")
	_, err = f.Resolve(ctx, model.GitSource{URL: "ssh://git@" + addr + "/repo", Ref: "main",
		Auth: &model.GitAuth{SSHPrivateKey: key}})
	check("ssh ls-remote", err)

	dir := filepath.Join(t.TempDir(), "work")
	_, err = f.Checkout(ctx, model.GitSource{URL: "http://" + addr + "/repo", Ref: "refs/heads/main"},
		strings.Repeat("a", 40), dir)
	check("http clone", err)
	t.Logf("three timed out calls took %s", time.Since(start))
	waitNoSiblings(t, dir)
}

// waitNoSiblings waits for abandoned fetches to remove their temp dirs.
func waitNoSiblings(t *testing.T, dir string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for len(siblings(t, dir)) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("temp dirs left behind: %v", siblings(t, dir))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func BenchmarkResolve(b *testing.B) {
	fx := sharedFixture(b)
	srv := newGitServer(b, fx.root, "")
	f := New(Options{CacheFor: -1})
	src := model.GitSource{URL: srv.repoURL(), Ref: "main"}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := f.Resolve(ctx, src); err != nil {
			b.Fatal(err)
		}
	}
}

// TestForgetInFlight: a call started before Forget is neither cached nor
// joined by later callers. The first ls-remote is held at the server
// until the later caller is served.
func TestForgetInFlight(t *testing.T) {
	fx := sharedFixture(t)
	srv := newGitServer(t, fx.root, "")
	release := srv.holdNext(t)
	f := New(Options{CacheFor: time.Hour})
	src := model.GitSource{URL: srv.repoURL(), Ref: "main"}
	done := make(chan error, 1)
	go func() {
		_, err := f.Resolve(context.Background(), src)
		done <- err
	}()
	for deadline := time.Now().Add(time.Minute); srv.infoRefs.Load() == 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) { // the first ls-remote is held from here on
			t.Fatal("the first ls-remote never reached the server")
		}
	}
	f.Forget(src.URL)
	if _, err := f.Resolve(context.Background(), src); err != nil {
		t.Fatal(err)
	}
	release()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := f.Resolve(context.Background(), src); err != nil {
		t.Fatal(err)
	}
	if n := srv.infoRefs.Load(); n != 2 {
		t.Fatalf("%d ls-remote, want 2 (one before Forget, one after, then cached)", n)
	}
}

// TestResolveSemver: a semver ref (a Flux GitRepository's ref.semver)
// resolves to the highest release tag in its range, annotated tags
// peeled, and checks out.
func TestResolveSemver(t *testing.T) {
	p := filepath.Join(t.TempDir(), "repo")
	if err := os.MkdirAll(p, 0o755); err != nil {
		t.Fatal(err)
	}
	gitRun(t, p, "init", "-q", "-b", "main")
	writeFile(t, filepath.Join(p, "README"), "one")
	c1 := commit(t, p, "c1")
	gitRun(t, p, "tag", "v1.0.0")
	writeFile(t, filepath.Join(p, "README"), "two")
	c2 := commit(t, p, "c2")
	gitRun(t, p, "tag", "-a", "v1.2.0", "-m", "release")
	gitRun(t, p, "tag", "v1.3.0-rc.1")
	writeFile(t, filepath.Join(p, "README"), "three")
	c3 := commit(t, p, "c3")
	gitRun(t, p, "tag", "v2.0.0")
	url := "file://" + p
	f := New(Options{})
	for rng, want := range map[string]string{">=1.0.0 <2.0.0": c2, "^1": c2, "1.0.x": c1, "*": c3} {
		got, err := f.Resolve(context.Background(), model.GitSource{URL: url, Ref: spec.SemverPrefix + rng})
		if err != nil || got != want {
			t.Errorf("semver %q: %s, %v; want %s", rng, got, err, want)
		}
	}
	if _, err := f.Resolve(context.Background(), model.GitSource{URL: url, Ref: spec.SemverPrefix + ">=3.0.0"}); !errors.Is(err, ErrRefNotFound) {
		t.Errorf("a range without a tag: %v", err)
	}
	dir := filepath.Join(t.TempDir(), "w")
	checkout(t, f, model.GitSource{URL: url, Ref: spec.SemverPrefix + "^1", Shallow: true}, c2, dir)
	assertAt(t, dir, c2, "two")
}
