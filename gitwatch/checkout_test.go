package gitwatch

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stackd/stackd/daemon/model"
)

func checkout(t *testing.T, f *Fetcher, src model.GitSource, commit, dir string) string {
	t.Helper()
	p, err := f.Checkout(context.Background(), src, commit, dir)
	if err != nil {
		t.Fatalf("Checkout(%s, %.8s): %v", src.Ref, commit, err)
	}
	return p
}

// assertAt checks dir's HEAD with the git CLI and its README.
func assertAt(t *testing.T, dir, commit, readme string) {
	t.Helper()
	if head := gitRun(t, dir, "rev-parse", "HEAD"); head != commit {
		t.Fatalf("HEAD = %s, want %s", head, commit)
	}
	if got := readFile(t, filepath.Join(dir, "README")); got != readme {
		t.Fatalf("README = %q, want %q", got, readme)
	}
	if out := gitRun(t, dir, "status", "--porcelain"); out != "" {
		t.Fatalf("checkout not clean:\n%s", out)
	}
}

func isShallow(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, ".git", "shallow"))
	return err == nil
}

func TestCheckout(t *testing.T) {
	fx := sharedFixture(t)
	srv := newGitServer(t, fx.root, "")
	for _, tr := range []struct{ name, url string }{{"file", fx.fileURL()}, {"http", srv.repoURL()}} {
		t.Run(tr.name, func(t *testing.T) {
			var logs logBuf
			f := New(Options{Logger: newLogger(&logs)})
			base := t.TempDir()
			cases := []struct {
				name    string
				src     model.GitSource
				commit  string
				readme  string
				shallow bool // expect a shallow repository
			}{
				{"tip", model.GitSource{Ref: "main", RepoDir: "proj"}, fx.c3, "three", false},
				{"older commit, full", model.GitSource{Ref: "main"}, fx.c1, "one", false},
				{"shallow tip", model.GitSource{Ref: "main", Shallow: true}, fx.c3, "three", true},
				{"shallow fallback", model.GitSource{Ref: "refs/heads/main", Shallow: true}, fx.c1, "one", false},
				{"branch", model.GitSource{Ref: "dev", Shallow: true}, fx.c2, "two", true},
				{"lightweight tag", model.GitSource{Ref: "v1", Shallow: true}, fx.c1, "one", true},
				{"annotated tag", model.GitSource{Ref: "v2"}, fx.c2, "two", false},
				{"pinned commit, no ref", model.GitSource{}, fx.c2, "two", false},
				{"HEAD", model.GitSource{Ref: "HEAD", Shallow: true}, fx.c3, "three", true},
			}
			for i, c := range cases {
				c.src.URL = tr.url
				dir := filepath.Join(base, string(rune('a'+i)))
				p := checkout(t, f, c.src, c.commit, dir)
				if want := filepath.Join(dir, c.src.RepoDir); p != want {
					t.Errorf("%s: project dir %s, want %s", c.name, p, want)
				}
				assertAt(t, dir, c.commit, c.readme)
				if isShallow(dir) != c.shallow {
					t.Errorf("%s: shallow = %v, want %v", c.name, isShallow(dir), c.shallow)
				}
				if s := siblings(t, dir); len(s) > 0 {
					t.Errorf("%s: leftovers %v", c.name, s)
				}
			}
			if !strings.Contains(logs.String(), "falling back to a full fetch") {
				t.Error("shallow fallback not logged")
			}
			if _, err := os.Stat(filepath.Join(base, "a", "proj", "Pulumi.yaml")); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestCheckoutTagObject: a tag object's SHA (what Resolve yields when a
// server advertises no peeled tags) is checked out as its commit.
func TestCheckoutTagObject(t *testing.T) {
	fx := sharedFixture(t)
	dir := filepath.Join(t.TempDir(), "w")
	checkout(t, New(Options{}), model.GitSource{URL: fx.fileURL(), Ref: "v2"}, fx.tagV2, dir)
	assertAt(t, dir, fx.c2, "two")
}

func TestCheckoutReuseAndReplace(t *testing.T) {
	fx := sharedFixture(t)
	srv := newGitServer(t, fx.root, "")
	f := New(Options{})
	src := model.GitSource{URL: srv.repoURL(), Ref: "main", RepoDir: "proj"}
	dir := filepath.Join(t.TempDir(), "w")

	checkout(t, f, src, fx.c1, dir)
	marker := filepath.Join(dir, "marker")
	writeFile(t, marker, "x")
	n := srv.requests.Load()
	checkout(t, f, src, fx.c1, dir)
	if got := srv.requests.Load(); got != n {
		t.Fatalf("reuse made %d requests", got-n)
	}
	if _, err := os.Stat(marker); err != nil {
		t.Fatal("reused checkout was replaced")
	}

	checkout(t, f, src, fx.c3, dir)
	assertAt(t, dir, fx.c3, "three")
	if _, err := os.Stat(marker); !os.IsNotExist(err) {
		t.Fatal("old checkout not replaced")
	}
	if s := siblings(t, dir); len(s) > 0 {
		t.Fatalf("leftovers %v", s)
	}
}

func TestCheckoutFailureKeepsDir(t *testing.T) {
	fx := sharedFixture(t)
	f := New(Options{})
	src := model.GitSource{URL: fx.fileURL(), Ref: "main", Shallow: true}
	dir := filepath.Join(t.TempDir(), "w")
	checkout(t, f, src, fx.c3, dir)

	unknown := strings.Repeat("de", 20)
	_, err := f.Checkout(context.Background(), src, unknown, dir)
	if !errors.Is(err, ErrCommitNotFound) {
		t.Fatalf("unknown commit: got %v, want ErrCommitNotFound", err)
	}
	for _, bad := range []struct {
		src    model.GitSource
		commit string
	}{
		{src, "abc123"}, // not a full sha
		{model.GitSource{URL: src.URL, Ref: "nope"}, fx.c1}, // unknown ref
		{model.GitSource{URL: src.URL, Ref: "main", RepoDir: "missing"}, fx.c1},
		{model.GitSource{URL: "file:///does/not/exist", Ref: "refs/heads/main"}, fx.c1},
	} {
		if _, err := f.Checkout(context.Background(), bad.src, bad.commit, dir); err == nil {
			t.Errorf("Checkout(%+v, %s): want an error", bad.src, bad.commit)
		}
	}
	assertAt(t, dir, fx.c3, "three")
	if s := siblings(t, dir); len(s) > 0 {
		t.Fatalf("leftovers %v", s)
	}
}

func TestCheckoutSweepsLeftovers(t *testing.T) {
	fx := sharedFixture(t)
	f := New(Options{})
	src := model.GitSource{URL: fx.fileURL(), Ref: "main"}
	base := t.TempDir()
	dir := filepath.Join(base, "w")
	// A crash between the two renames: no dir, an old one aside, a temp.
	writeFile(t, filepath.Join(base, "w.old-123", "README"), "stale")
	writeFile(t, filepath.Join(base, "w.tmp-456", ".git", "HEAD"), "garbage")
	writeFile(t, filepath.Join(base, "wx.tmp-789", "keep"), "not ours")
	checkout(t, f, src, fx.c3, dir)
	assertAt(t, dir, fx.c3, "three")
	if s := siblings(t, dir); len(s) > 0 {
		t.Fatalf("leftovers not swept: %v", s)
	}
	if _, err := os.Stat(filepath.Join(base, "wx.tmp-789")); err != nil {
		t.Fatal("swept another dir's sibling")
	}
	// Leftovers are swept on reuse too.
	writeFile(t, filepath.Join(base, "w.tmp-abc", "x"), "x")
	checkout(t, f, src, fx.c3, dir)
	if s := siblings(t, dir); len(s) > 0 {
		t.Fatalf("leftovers not swept on reuse: %v", s)
	}
}

func TestCheckoutRepoDir(t *testing.T) {
	fx := sharedFixture(t)
	f := New(Options{})
	base := t.TempDir()
	for _, ok := range []string{"", "proj", "./proj/", "projlink"} {
		dir := filepath.Join(base, "ok")
		p := checkout(t, f, model.GitSource{URL: fx.fileURL(), Ref: "main", RepoDir: ok}, fx.c3, dir)
		if p != filepath.Join(dir, ok) {
			t.Errorf("repoDir %q: got %s", ok, p)
		}
	}
	for _, c := range []struct {
		repoDir string
		unsafe  bool
	}{
		{"..", true}, {"../x", true}, {"proj/../..", true}, {"/etc", true},
		{"evil", true}, {"up", true}, // symlinks to /etc and ../..
		{"missing", false}, {"afile", false},
	} {
		for _, existing := range []bool{false, true} {
			dir := filepath.Join(base, "fresh")
			if existing {
				dir = filepath.Join(base, "ok") // already at c3: reuse path
			}
			_, err := f.Checkout(context.Background(),
				model.GitSource{URL: fx.fileURL(), Ref: "main", RepoDir: c.repoDir}, fx.c3, dir)
			if err == nil {
				t.Fatalf("repoDir %q: want an error", c.repoDir)
			}
			if c.unsafe != errors.Is(err, ErrUnsafeRepoDir) {
				t.Errorf("repoDir %q: unsafe=%v, got %v", c.repoDir, c.unsafe, err)
			}
			if !strings.Contains(err.Error(), c.repoDir) {
				t.Errorf("repoDir %q: error should name it: %v", c.repoDir, err)
			}
			if _, err := os.Stat(filepath.Join(base, "fresh")); !os.IsNotExist(err) {
				t.Fatalf("repoDir %q: dir created despite the error", c.repoDir)
			}
			if s := siblings(t, dir); len(s) > 0 {
				t.Fatalf("leftovers %v", s)
			}
		}
	}
	assertAt(t, filepath.Join(base, "ok"), fx.c3, "three")
}

// TestCheckoutMaxClones: with MaxClones 1, concurrent checkouts never have
// two requests in flight at the server.
func TestCheckoutMaxClones(t *testing.T) {
	fx := sharedFixture(t)
	srv := newGitServer(t, fx.root, "")
	srv.delay.Store(int64(50 * time.Millisecond))
	f := New(Options{MaxClones: 1})
	base := t.TempDir()
	src := model.GitSource{URL: srv.repoURL(), Ref: "refs/heads/main", Shallow: true}
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			dir := filepath.Join(base, string(rune('a'+i)))
			if _, err := f.Checkout(context.Background(), src, fx.c3, dir); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if m := srv.maxInflight.Load(); m != 1 {
		t.Errorf("max concurrent requests %d, want 1", m)
	}
}

// TestCheckoutSameDirConcurrently: checkouts of one dir are serialized.
func TestCheckoutSameDirConcurrently(t *testing.T) {
	fx := sharedFixture(t)
	f := New(Options{MaxClones: 4})
	dir := filepath.Join(t.TempDir(), "w")
	commits := []string{fx.c1, fx.c2, fx.c3, fx.c1}
	var wg sync.WaitGroup
	for _, c := range commits {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := f.Checkout(context.Background(), model.GitSource{URL: fx.fileURL()}, c, dir); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	head := gitRun(t, dir, "rev-parse", "HEAD")
	if head != fx.c1 && head != fx.c2 && head != fx.c3 {
		t.Fatalf("HEAD %s", head)
	}
	if s := siblings(t, dir); len(s) > 0 {
		t.Fatalf("leftovers %v", s)
	}
}
