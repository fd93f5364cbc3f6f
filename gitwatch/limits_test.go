package gitwatch

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-git/go-billy/v5/osfs"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/storage/filesystem"

	"github.com/stackd/stackd/daemon/model"
)

const mib = 1 << 20

// refusedCheckout checks commit of the repository under root out into a
// dir that holds a checkout of the shared fixture, with opts, and returns
// the error. It fails the test unless the error is ErrTooLarge, the old
// checkout is untouched, nothing is left beside it, and the process wrote
// less than a quarter of smallest bytes to files meanwhile (write_bytes
// counts data written even when its file is removed before it reaches
// the disk: no big file was written and removed again).
func refusedCheckout(t *testing.T, root, commit string, opts Options, smallest int64) error {
	t.Helper()
	fx := sharedFixture(t)
	f := New(opts)
	dir := filepath.Join(t.TempDir(), "w")
	checkout(t, f, model.GitSource{URL: fx.fileURL(), Ref: "main"}, fx.c3, dir)

	before := procIO(t, "write_bytes")
	src := model.GitSource{URL: "file://" + filepath.Join(root, "repo"), Ref: "main", Shallow: true}
	_, err := f.Checkout(context.Background(), src, commit, dir)
	wrote := procIO(t, "write_bytes") - before
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("got %v, want ErrTooLarge", err)
	}
	if wrote > smallest/4 {
		t.Errorf("the refused checkout wrote %d bytes", wrote)
	}
	assertAt(t, dir, fx.c3, "three")
	if s := siblings(t, dir); len(s) > 0 {
		t.Errorf("leftovers %v", s)
	}
	return err
}

func wantMessage(t *testing.T, err error, parts ...string) {
	t.Helper()
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("error %q lacks %q", err, p)
		}
	}
}

// TestCheckoutFileOverLimit: a file over MaxFileBytes is refused from
// its object header in the fetched pack, before go-git inflates it.
func TestCheckoutFileOverLimit(t *testing.T) {
	root := t.TempDir()
	commit := buildBigRepo(t, root, []bigFile{{name: "small", size: 1000}, {name: "big/blob.bin", size: 3 * mib}}, false)
	err := refusedCheckout(t, root, commit, Options{MaxFileBytes: 2 * mib}, 3*mib)
	wantMessage(t, err, "a blob of 3145728 bytes (3.0 MiB), more than --max-file-bytes 2097152 bytes (2.0 MiB)")
}

// TestCheckoutTotalOverLimit: files each within MaxFileBytes but over
// MaxCheckoutBytes together are refused from the tree before any is
// written; the pack, compressed, was small enough.
func TestCheckoutTotalOverLimit(t *testing.T) {
	root := t.TempDir()
	files := spread(3*mib, mib)
	commit := buildBigRepo(t, root, files, false)
	err := refusedCheckout(t, root, commit, Options{MaxCheckoutBytes: 2 * mib, MaxFileBytes: mib}, mib)
	wantMessage(t, err, "checkout of "+commit[:12]+" is 3145752 bytes (3.0 MiB), more than --max-checkout-bytes 2097152 bytes (2.0 MiB)")
}

// TestCheckoutDeltaOverLimit: a delta whose result is over MaxFileBytes
// is refused although the delta itself and its base are small.
func TestCheckoutDeltaOverLimit(t *testing.T) {
	root := t.TempDir()
	base := compressible(7, mib)
	twice := append(bytes.Clone(base), base...)
	commit := buildBigRepo(t, root, []bigFile{{name: "a", data: base}, {name: "b", data: twice}}, true)
	err := refusedCheckout(t, root, commit, Options{MaxFileBytes: mib + mib/2}, 2*mib)
	wantMessage(t, err, "a delta's result of 2097152 bytes (2.0 MiB), more than --max-file-bytes")
}

// TestCheckoutPackOverLimit: the fetched pack itself counts against
// MaxCheckoutBytes, compressed as it arrives.
func TestCheckoutPackOverLimit(t *testing.T) {
	root := t.TempDir()
	noise := make([]byte, 512<<10)
	rand.NewChaCha8([32]byte{1}).Read(noise) // incompressible
	commit := buildBigRepo(t, root, []bigFile{{name: "noise", data: noise}}, false)
	err := refusedCheckout(t, root, commit, Options{MaxCheckoutBytes: 64 << 10}, 512<<10)
	wantMessage(t, err, "the fetched pack is more than --max-checkout-bytes 65536 bytes (64.0 KiB)")
}

// TestCheckoutWithinLimits: files above streamAbove, whole or as deltas,
// check out intact under the default limits and replace the old
// checkout.
func TestCheckoutWithinLimits(t *testing.T) {
	for _, deltas := range []bool{false, true} {
		root := t.TempDir()
		files := spread(6*mib, 3*mib)
		commit := buildBigRepo(t, root, files, deltas)
		srv := newGitServer(t, root, "")
		f := New(Options{})
		dir := filepath.Join(t.TempDir(), "w")
		fx := sharedFixture(t)
		checkout(t, f, model.GitSource{URL: fx.fileURL(), Ref: "main"}, fx.c3, dir)
		checkout(t, f, model.GitSource{URL: srv.repoURL(), Ref: "main", Shallow: true}, commit, dir)
		if head := gitRun(t, dir, "rev-parse", "HEAD"); head != commit {
			t.Fatalf("deltas %v: HEAD %s, want %s", deltas, head, commit)
		}
		for i, bf := range files {
			got, err := os.ReadFile(filepath.Join(dir, bf.name))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, compressible(i, bf.size)) {
				t.Errorf("deltas %v: %s differs (%d bytes)", deltas, bf.name, len(got))
			}
		}
		if _, err := os.Stat(filepath.Join(dir, "README")); !os.IsNotExist(err) {
			t.Errorf("deltas %v: old checkout not replaced", deltas)
		}
	}
}

// TestCheckTree: the sizes a commit's tree checks out, against each
// limit, read from a repository the git CLI wrote.
func TestCheckTree(t *testing.T) {
	dir := t.TempDir()
	gitRun(t, dir, "init", "-q", "-b", "main")
	writeFile(t, filepath.Join(dir, "a"), strings.Repeat("a", 300))
	writeFile(t, filepath.Join(dir, "sub", "deeper", "b"), strings.Repeat("b", 500))
	if err := os.Symlink("a", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	commit := plumbing.NewHash(commitAll(t, dir))
	st := filesystem.NewStorage(osfs.New(filepath.Join(dir, ".git")), cache.NewObjectLRUDefault())
	const total = 300 + 500 + 1 // the link's blob is its target, "a"
	for _, c := range []struct {
		name string
		lim  limits
		want string // "" for no error
	}{
		{"no limits", limits{}, ""},
		{"at both limits", limits{checkout: total, file: 500}, ""},
		{"file over", limits{file: 499}, "file sub/deeper/b of " + commit.String()[:12] + " is 500 bytes, more than --max-file-bytes 499 bytes"},
		{"total over", limits{checkout: total - 1}, "is 801 bytes, more than --max-checkout-bytes 800 bytes"},
	} {
		err := checkTree(st, commit, c.lim)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != "" && (!errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: got %v, want %q", c.name, err, c.want)
		}
	}
}

func commitAll(t *testing.T, dir string) string {
	t.Helper()
	return commit(t, dir, "c")
}

func TestSizeText(t *testing.T) {
	for n, want := range map[int64]string{
		0:                       "0 bytes",
		1023:                    "1023 bytes",
		1024:                    "1024 bytes (1.0 KiB)",
		DefaultMaxFileBytes:     "67108864 bytes (64.0 MiB)",
		DefaultMaxCheckoutBytes: "536870912 bytes (512.0 MiB)",
		3 << 30:                 "3221225472 bytes (3.0 GiB)",
	} {
		if got := sizeText(n); got != want {
			t.Errorf("sizeText(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestDeltaHead(t *testing.T) {
	for _, c := range []struct {
		head []byte
		size int64
		ok   bool
	}{
		{[]byte{0x80, 0x08, 0x80, 0x80, 0x01}, 1 << 14, true}, // base 1024, result 16384
		{[]byte{0x05, 0x7f}, 127, true},
		{[]byte{0x05}, 0, false},
		{nil, 0, false},
		{[]byte{0x05, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f}, 0, false},
	} {
		var d deltaHead
		d.Write(c.head)
		if size, ok := d.target(); size != c.size || ok != c.ok {
			t.Errorf("%x: got %d %v, want %d %v", c.head, size, ok, c.size, c.ok)
		}
	}
}
