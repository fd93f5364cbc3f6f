package gitwatch

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"

	"github.com/stackd/stackd/daemon/model"
)

// TestCheckoutClean: a checkout of nested directories, an executable and
// symlinks has the right contents and modes, HEAD detached at the
// commit, and an index that both git and go-git find clean.
func TestCheckoutClean(t *testing.T) {
	root := t.TempDir()
	p := filepath.Join(root, "repo")
	gitRun(t, root, "init", "-q", "-b", "main", p)
	writeFile(t, filepath.Join(p, "a", "b", "c", "deep.txt"), "deep\n")
	writeFile(t, filepath.Join(p, "a", "b-c"), "sorts before a/b/ in a tree\n")
	writeFile(t, filepath.Join(p, "run.sh"), "#!/bin/sh\necho hi\n")
	if err := os.Chmod(filepath.Join(p, "run.sh"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, target := range map[string]string{"link": "a/b/c", "abs": "/etc/passwd"} {
		if err := os.Symlink(target, filepath.Join(p, name)); err != nil {
			t.Fatal(err)
		}
	}
	c := commit(t, p, "c")
	dir := filepath.Join(t.TempDir(), "w")
	checkout(t, New(Options{}), model.GitSource{URL: "file://" + p, Ref: "main"}, c, dir)

	if got := readFile(t, filepath.Join(dir, "link", "deep.txt")); got != "deep\n" {
		t.Errorf("link/deep.txt = %q", got)
	}
	if fi, err := os.Stat(filepath.Join(dir, "run.sh")); err != nil || fi.Mode().Perm()&0o100 == 0 {
		t.Errorf("run.sh not executable: %v %v", fi, err)
	}
	if fi, err := os.Stat(filepath.Join(dir, "a", "b-c")); err != nil || fi.Mode().Perm()&0o111 != 0 {
		t.Errorf("a/b-c: %v %v", fi, err)
	}
	for name, want := range map[string]string{"link": "a/b/c", "abs": "/etc/passwd"} {
		if got, err := os.Readlink(filepath.Join(dir, name)); err != nil || got != want {
			t.Errorf("%s -> %q (%v), want %q", name, got, err, want)
		}
	}
	if !headIs(dir, plumbing.NewHash(c)) {
		t.Error("headIs is false after the checkout")
	}
	if ref := gitRun(t, dir, "rev-parse", "--symbolic-full-name", "HEAD"); ref != "HEAD" {
		t.Errorf("HEAD is %q, want detached", ref)
	}
	if out := gitRun(t, dir, "status", "--porcelain", "--untracked-files=all"); out != "" {
		t.Errorf("git status:\n%s", out)
	}
	if out := gitRun(t, dir, "ls-files", "-s"); !strings.Contains(out, "100755") || !strings.Contains(out, "120000") {
		t.Errorf("index modes:\n%s", out)
	}
	assertGoGitClean(t, dir)
}

func assertGoGitClean(t *testing.T, dir string) {
	t.Helper()
	repo, err := git.PlainOpen(dir)
	if err != nil {
		t.Fatal(err)
	}
	w, err := repo.Worktree()
	if err != nil {
		t.Fatal(err)
	}
	st, err := w.Status()
	if err != nil {
		t.Fatal(err)
	}
	if !st.IsClean() {
		t.Errorf("go-git status:\n%s", st)
	}
}

// TestCheckoutDuplicateEntry: a tree naming "a" twice, a symlink out of
// the checkout and then a directory, is refused before anything is
// written through the symlink.
func TestCheckoutDuplicateEntry(t *testing.T) {
	root := t.TempDir()
	outside := t.TempDir()
	p := filepath.Join(root, "repo")
	gitRun(t, root, "init", "-q", "-b", "main", p)
	blob := hashObject(t, p, "pwned\n")
	link := hashObject(t, p, outside)
	sub := mktree(t, p, "100644 blob "+blob+"\tx\n")
	top := mktree(t, p, "120000 blob "+link+"\ta\n040000 tree "+sub+"\ta\n")
	c := gitRun(t, p, "commit-tree", top, "-m", "dup")
	gitRun(t, p, "update-ref", "refs/heads/main", c)

	dir := filepath.Join(t.TempDir(), "w")
	_, err := New(Options{}).Checkout(t.Context(), model.GitSource{URL: "file://" + p, Ref: "main"}, c, dir)
	if err == nil || !strings.Contains(err.Error(), "twice") {
		t.Fatalf("err = %v, want a duplicate entry refused", err)
	}
	if _, err := os.Lstat(filepath.Join(outside, "x")); err == nil {
		t.Fatal("a file was written through the symlink")
	}
	if _, err := os.Lstat(dir); err == nil {
		t.Fatal("the checkout dir exists")
	}
}

func hashObject(t *testing.T, repo, content string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "obj")
	if err := os.WriteFile(f, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return gitRun(t, repo, "hash-object", "-w", f)
}

// mktree writes a tree of ls-tree lines as given: git mktree checks
// neither their order nor duplicate names.
func mktree(t *testing.T, repo, lines string) string {
	t.Helper()
	cmd := exec.Command("git", "mktree")
	cmd.Dir, cmd.Stdin = repo, strings.NewReader(lines)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git mktree: %v\n%s", err, out)
	}
	return strings.TrimSpace(string(out))
}
