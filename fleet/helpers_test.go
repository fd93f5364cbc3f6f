package fleet

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stackd/stackd/daemon/model"
	"github.com/stackd/stackd/daemon/spec"
	"github.com/stackd/stackd/gitwatch"
)

func TestMain(m *testing.M) {
	home, err := os.MkdirTemp("", "fleet-home-")
	if err != nil {
		panic(err)
	}
	// Isolate git from the machine's configuration.
	os.Setenv("HOME", home)
	os.Setenv("GIT_CONFIG_GLOBAL", "/dev/null")
	os.Setenv("GIT_CONFIG_NOSYSTEM", "true")
	os.Setenv("GIT_TERMINAL_PROMPT", "0")
	code := m.Run()
	os.RemoveAll(home)
	os.Exit(code)
}

// repo is a repository built with the git CLI.
type repo struct {
	tb  testing.TB
	dir string
}

func newRepo(tb testing.TB) *repo {
	tb.Helper()
	r := &repo{tb: tb, dir: filepath.Join(tb.TempDir(), "repo")}
	if err := os.MkdirAll(r.dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	r.git("init", "-q", "-b", "main")
	return r
}

func (r *repo) git(args ...string) string {
	r.tb.Helper()
	base := []string{"-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "commit.gpgsign=false"}
	cmd := exec.Command("git", append(base, args...)...)
	cmd.Dir = r.dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		r.tb.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// write writes files (repository-relative path → content).
func (r *repo) write(files map[string]string) {
	r.tb.Helper()
	for p, content := range files {
		full := filepath.Join(r.dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			r.tb.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			r.tb.Fatal(err)
		}
	}
}

// link makes a symbolic link at p (repository-relative) to target.
func (r *repo) link(p, target string) {
	r.tb.Helper()
	full := filepath.Join(r.dir, filepath.FromSlash(p))
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		r.tb.Fatal(err)
	}
	if err := os.Symlink(target, full); err != nil {
		r.tb.Fatal(err)
	}
}

func (r *repo) commit() string {
	r.tb.Helper()
	r.git("add", "-A")
	r.git("commit", "-q", "-m", "change")
	return r.git("rev-parse", "HEAD")
}

func (r *repo) url() string { return "file://" + r.dir }

// countingGit counts the Resolve calls of a real Git.
type countingGit struct {
	Git
	resolves atomic.Int64
}

func (c *countingGit) Resolve(ctx context.Context, src model.GitSource) (string, error) {
	c.resolves.Add(1)
	return c.Git.Resolve(ctx, src)
}

// clock is a settable Options.Now.
type clock struct{ now atomic.Int64 }

func (c *clock) Now() time.Time { return time.Unix(c.now.Load(), 0).UTC() }

// newExpander returns an Expander on a real gitwatch.Fetcher without an
// ls-remote cache (so that each round sees new commits), and its counter.
func newExpander(tb testing.TB, tweak ...func(*Options)) (*Expander, *countingGit) {
	tb.Helper()
	g := &countingGit{Git: gitwatch.New(gitwatch.Options{CacheFor: -1, Timeout: 30 * time.Second})}
	opts := Options{Git: g, Dir: filepath.Join(tb.TempDir(), "stacksets")}
	for _, f := range tweak {
		f(&opts)
	}
	return New(opts), g
}

func dirsGen(url string, globs ...spec.GitPathGlob) spec.Generator {
	return spec.Generator{Git: &spec.GitGenerator{RepoURL: url, Directories: globs}}
}

func filesGen(url string, globs ...spec.GitPathGlob) spec.Generator {
	return spec.Generator{Git: &spec.GitGenerator{RepoURL: url, Files: globs}}
}

func listGen(elems ...map[string]any) spec.Generator {
	return spec.Generator{List: &spec.ListGenerator{Elements: elems}}
}

func inc(p string) spec.GitPathGlob { return spec.GitPathGlob{Path: p} }
func exc(p string) spec.GitPathGlob { return spec.GitPathGlob{Path: p, Exclude: true} }

func newSet(name string, gens ...spec.Generator) *spec.StackSet {
	return &spec.StackSet{Name: name, Spec: spec.StackSetSpec{Generators: gens}}
}

// origins lists the Origin of each generated set.
func originsOf(gen []spec.Generated) []string {
	out := make([]string, len(gen))
	for i, g := range gen {
		out[i] = g.Origin
	}
	return out
}

func mustExpand(tb testing.TB, x *Expander, set *spec.StackSet) []spec.Generated {
	tb.Helper()
	out, err := x.Expand(set)
	if err != nil {
		tb.Fatalf("Expand: %v", err)
	}
	return out
}
