package daemon

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stackd/stackd/daemon/model"
	"github.com/stackd/stackd/daemon/spec"
)

func TestParseSource(t *testing.T) {
	tests := []struct {
		in      string
		want    spec.Source
		wantErr string
	}{
		{in: "configs/stacks.yaml", want: spec.Source{Path: "configs/stacks.yaml"}},
		{in: "git+https://github.com/org/infra.git//environments/staging?ref=main",
			want: spec.Source{Git: &spec.GitDir{URL: "https://github.com/org/infra.git", Path: "environments/staging", Ref: "main"}}},
		{in: "git+https://github.com/org/infra.git",
			want: spec.Source{Git: &spec.GitDir{URL: "https://github.com/org/infra.git"}}},
		{in: "git+https://github.com/org/infra.git?ref=v1.2.0",
			want: spec.Source{Git: &spec.GitDir{URL: "https://github.com/org/infra.git", Ref: "v1.2.0"}}},
		{in: "git+file:///srv/git/infra.git//prod/?ref=release",
			want: spec.Source{Git: &spec.GitDir{URL: "file:///srv/git/infra.git", Path: "prod", Ref: "release"}}},
		{in: "git+ssh://git@github.com/org/infra.git//prod",
			want: spec.Source{Git: &spec.GitDir{URL: "ssh://git@github.com/org/infra.git", Path: "prod"}}},
		{in: "git+git@github.com:org/infra.git//prod?ref=0123456789abcdef0123456789abcdef01234567",
			want: spec.Source{Git: &spec.GitDir{URL: "git@github.com:org/infra.git", Path: "prod", Ref: "0123456789abcdef0123456789abcdef01234567"}}},
		{in: "git+https://github.com/org/infra.git//.", want: spec.Source{Git: &spec.GitDir{URL: "https://github.com/org/infra.git"}}},
		{in: "", wantErr: "empty config path"},
		{in: "git+", wantErr: "no repository URL"},
		{in: "git+https://github.com/org/infra.git//../etc", wantErr: "must stay inside the repository"},
		{in: "git+https://u:p@github.com/org/infra.git", wantErr: "holds a password"},
		{in: "git+https://token@github.com/org/infra.git", wantErr: "holds a user name"},
		{in: "git+https://github.com/org/infra.git?branch=main", wantErr: `unknown parameter "branch"`},
		{in: "git+https://github.com/org/infra.git?ref=a:b", wantErr: "not a branch, tag or commit"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := spec.ParseSource(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				if strings.Contains(tt.in, "u:p@") && strings.Contains(err.Error(), "u:p") {
					t.Fatalf("the error repeats the credentials: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.String() == "" || fmt.Sprint(got.Path) != fmt.Sprint(tt.want.Path) ||
				(got.Git == nil) != (tt.want.Git == nil) || (got.Git != nil && *got.Git != *tt.want.Git) {
				t.Fatalf("got %+v %+v, want %+v %+v", got, got.Git, tt.want, tt.want.Git)
			}
			if again, err := spec.ParseSource(got.String()); err != nil || again.String() != got.String() {
				t.Fatalf("String() %q does not parse back: %v", got.String(), err)
			}
		})
	}
}

const manifestsURL = "https://git.example/org/manifests.git"

// manifestDoc is a Stack document of the manifests repository.
func manifestDoc(name, wave string) string {
	return fmt.Sprintf(`apiVersion: pulumi.com/v1
kind: Stack
metadata:
  name: %s
  annotations: {argocd.argoproj.io/sync-wave: "%s"}
spec: {stack: dev, projectRepo: https://git.example/%s.git, branch: main}
`, name, wave, name)
}

const sha3, sha4, sha5 = "3333333333333333333333333333333333333333", "4444444444444444444444444444444444444444", "5555555555555555555555555555555555555555"

func newSourceHarness(t *testing.T, store *memStore, fetcher *fakeFetcher, dir string) *harness {
	t.Helper()
	src, err := spec.ParseSource("git+" + manifestsURL + "//env/staging?ref=main")
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, store: store, fetcher: fetcher, runner: &fakeRunner{fail: map[string]error{}}, dir: dir}
	d, err := New(nil, Options{Store: h.store, Fetcher: h.fetcher, Runner: h.runner, DataDir: h.dir,
		MinResync: 50 * time.Millisecond, BackoffBase: 20 * time.Millisecond, pollEvery: 20 * time.Millisecond,
		Sources: []spec.Source{src}, SourcePoll: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	h.d = d
	return h
}

func (h *harness) sourceStatus() model.SourceStatus {
	return h.d.ConfigStatus().Sources[0]
}

func TestGitConfigSource(t *testing.T) {
	fetcher := &fakeFetcher{commits: map[string]string{}}
	for _, app := range []string{"net", "app", "db"} {
		fetcher.set("https://git.example/"+app+".git", sha1, nil)
	}
	fetcher.setTree(sha1, map[string]string{
		"env/staging/net.yaml": manifestDoc("net", "1"),
		"env/staging/app.yaml": manifestDoc("app", "2"),
		"env/staging/db.yaml":  manifestDoc("db", "1"),
		"README.md":            "not a manifest",
	})
	fetcher.set(manifestsURL, sha1, nil)
	h := newSourceHarness(t, newMemStore(), fetcher, t.TempDir())
	h.start()
	h.eventually("three stacks deployed", func() bool { return h.ready("net") && h.ready("app") && h.ready("db") })
	h.eventually("source healthy", func() bool { return h.sourceStatus().Health.Status == model.HealthHealthy })
	if s := h.sourceStatus(); s.Commit != sha1 || s.Stacks != 3 {
		t.Fatalf("source status = %+v", s)
	}
	// The config's health is the config's: a stack whose program fails
	// is Degraded, its source and the config stay Healthy.
	h.runner.setFail("db", errors.New("program failed"))
	if _, err := h.d.Sync("db"); err != nil {
		t.Fatal(err)
	}
	h.eventually("db failed", func() bool {
		v, _ := h.d.Stack("db")
		return v.Status.LastUpdate != nil && v.Status.LastUpdate.State == model.UpdateFailed
	})
	if st := h.d.ConfigStatus(); st.Health.Status != model.HealthHealthy || st.Sources[0].Health.Status != model.HealthHealthy {
		t.Fatalf("config health %+v, source health %+v with a failing stack; want both Healthy", st.Health, st.Sources[0].Health)
	}
	h.runner.setFail("db", nil)

	// A broken document: the config in force stays; the status names
	// the commit and the file.
	fetcher.setTree(sha2, map[string]string{"env/staging/net.yaml": "kind: Stack\n  bad: [", "env/staging/app.yaml": manifestDoc("app", "2"),
		"env/staging/db.yaml": manifestDoc("db", "1")})
	fetcher.set(manifestsURL, sha2, nil)
	h.eventually("broken commit reported", func() bool { return h.sourceStatus().LatestCommit == sha2 && h.sourceStatus().Error != "" })
	s := h.sourceStatus()
	if s.Commit != sha1 || s.Health.Status != model.HealthDegraded || !strings.Contains(s.Error, manifestsURL+"//env/staging/net.yaml:") {
		t.Fatalf("after a broken commit, source = %+v", s)
	}
	if st := h.d.ConfigStatus(); st.Successful || st.Health.Status != model.HealthDegraded {
		t.Fatalf("config status = %+v", st)
	}
	if _, err := h.d.Stack("net"); err != nil {
		t.Fatal("a broken commit removed a stack")
	}

	// Every manifest deleted: refused by the mass-removal guard.
	fetcher.setTree(sha3, map[string]string{"README.md": "emptied"})
	fetcher.set(manifestsURL, sha3, nil)
	h.eventually("emptying commit refused", func() bool {
		return h.sourceStatus().LatestCommit == sha3 && strings.Contains(h.d.ConfigStatus().Error, "removes 3 of the 3 stacks")
	})
	if v, _ := h.d.Stack("net"); v.Removed {
		t.Fatal("the emptying commit was applied")
	}

	// One stack deleted and one changed: applied, and recorded.
	fetcher.setTree(sha4, map[string]string{"env/staging/net.yaml": manifestDoc("net", "1"),
		"env/staging/app.yaml": strings.Replace(manifestDoc("app", "2"), "stack: dev", "stack: dev2", 1)})
	fetcher.set(manifestsURL, sha4, nil)
	h.eventually("db finalized", func() bool { _, err := h.d.Stack("db"); return errors.Is(err, ErrUnknownStack) })
	h.eventually("app changed", func() bool { v, _ := h.d.Stack("app"); return v.Spec["stack"] == "dev2" && h.ready("app") })
	revs, _ := h.d.ConfigRevisions(0, 10)
	var summary []string
	for _, r := range revs {
		summary = append(summary, fmt.Sprintf("%s:%v:%s:+%v~%v-%v", r.Trigger, r.Applied, model.ShortCommit(r.Sources[0].Commit), r.Added, r.Changed, r.Removed))
	}
	want := []string{"git:true:444444444444:+[]~[app]-[db]", "git:false:333333333333:+[]~[]-[]",
		"git:false:222222222222:+[]~[]-[]", "start:true:111111111111:+[app db net]~[]-[]"}
	if !slices.Equal(summary, want) {
		t.Fatalf("revisions:\n%s\nwant:\n%s", strings.Join(summary, "\n"), strings.Join(want, "\n"))
	}
	h.eventually("older checkouts removed", func() bool {
		entries, _ := filepath.Glob(filepath.Join(h.dir, "config", "*", "*"))
		return len(entries) == 1 && filepath.Base(entries[0]) == sha4[:12]
	})

	// A restart with the repository unreachable runs the commit in force.
	_ = h.d.Stop(t.Context())
	fetcher.set(manifestsURL, "", errors.New("connection refused"))
	h2 := newSourceHarness(t, h.store, fetcher, h.dir)
	h2.start()
	if err := h2.d.Ready(); err != nil {
		t.Fatalf("not ready after a restart with Git down: %v", err)
	}
	h2.eventually("fetch error shown", func() bool { return strings.Contains(h2.sourceStatus().Error, "connection refused") })
	if s := h2.sourceStatus(); s.Commit != sha4 || s.Stacks != 2 {
		t.Fatalf("after restart, source = %+v", s)
	}
}

func TestGitConfigSourceFirstFetchFails(t *testing.T) {
	fetcher := &fakeFetcher{commits: map[string]string{}}
	fetcher.set(manifestsURL, "", errors.New("connection refused"))
	store := newMemStore()
	_ = store.PutStack(model.StackRecord{Name: "kept", Generation: 1, SpecHash: "x"})
	h := newSourceHarness(t, store, fetcher, t.TempDir())
	h.start()
	if err := h.d.Ready(); err == nil {
		t.Fatal("ready without a config")
	}
	h.eventually("error shown", func() bool { return strings.Contains(h.sourceStatus().Error, "connection refused") })
	time.Sleep(50 * time.Millisecond)
	if v, err := h.d.Stack("kept"); err != nil || v.Removed {
		t.Fatalf("a stack of the store was judged removed without a config: %+v %v", v, err)
	}
	fetcher.setTree(sha1, map[string]string{"env/staging/kept.yaml": manifestDoc("kept", "0")})
	fetcher.set("https://git.example/kept.git", sha1, nil)
	fetcher.set(manifestsURL, sha1, nil)
	h.eventually("first config applied", func() bool { return h.d.Ready() == nil && h.ready("kept") })
}

func TestPushPollsConfigSource(t *testing.T) {
	fetcher := &fakeFetcher{commits: map[string]string{}}
	fetcher.set("https://git.example/net.git", sha1, nil)
	fetcher.setTree(sha1, map[string]string{"env/staging/net.yaml": manifestDoc("net", "1")})
	fetcher.setTree(sha2, map[string]string{"env/staging/net.yaml": manifestDoc("net", "1"), "env/staging/app.yaml": manifestDoc("app", "2")})
	fetcher.set(manifestsURL, sha1, nil)
	h := newSourceHarness(t, newMemStore(), fetcher, t.TempDir())
	h.d.opts.SourcePoll = time.Hour // only the push polls
	h.start()
	h.eventually("first config", func() bool { return h.ready("net") })
	fetcher.set(manifestsURL, sha2, nil)
	fetcher.set("https://git.example/app.git", sha1, nil)
	if got := h.d.Push([]string{"git@git.example:org/manifests.git"}, "dev"); len(got.Sources) != 0 {
		t.Fatalf("a push to another branch woke %v", got.Sources)
	}
	got := h.d.Push([]string{"https://git.example/org/manifests"}, "main")
	if len(got.Sources) != 1 || got.Sources[0] != "git+"+manifestsURL+"//env/staging?ref=main" {
		t.Fatalf("Push woke %+v", got)
	}
	h.eventually("the pushed commit applied", func() bool { return h.ready("app") && h.sourceStatus().Commit == sha2 })
}

// TestNewCommitReachesEveryWave: a stack of a higher wave that sees a new
// commit first makes its lower wave poll, and the lower wave runs first.
func TestNewCommitReachesEveryWave(t *testing.T) {
	const two = `
stacks:
  - {name: net, stack: net, projectRepo: https://git.example/infra.git, repoDir: net, branch: main}
  - {name: app, stack: app, projectRepo: https://git.example/infra.git, repoDir: app, branch: main}
`
	h := newHarness(t, two, func(o *Options) { o.pollEvery = time.Hour })
	h.d.cfg.Stack("app").SyncWave = 1
	h.fetcher.set("https://git.example/infra.git", sha1, nil)
	h.start()
	h.eventually("deployed", func() bool { return h.ready("net") && h.ready("app") })
	h.fetcher.set("https://git.example/infra.git", sha2, nil)
	l := h.d.lock()
	l.stacks["app"].pollNow = true // app polls first
	l.markDirty(l.stacks["app"])
	l.unlock()
	h.eventually("both at the new commit", func() bool {
		n, a := h.last("net"), h.last("app")
		return n != nil && a != nil && n.LastSuccessfulCommit == sha2 && a.LastSuccessfulCommit == sha2
	})
	names := opNames(h.runner)
	if got := strings.Join(names, ","); got != "net,app,net,app" {
		t.Fatalf("runs in order %s; want net,app,net,app", got)
	}
}

func opNames(r *fakeRunner) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, op := range r.ops {
		out = append(out, op.Name)
	}
	return out
}

// TestSourceProblemsCauseFirst: a source whose config has several
// problems says how many, and names the cause first (the misspelt field),
// not its consequence (a stack without a branch).
func TestSourceProblemsCauseFirst(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "stacks.yaml")
	good := "stacks:\n  - name: app\n    stack: dev\n    projectRepo: https://git.example/app.git\n    branch: main\n"
	if err := os.WriteFile(path, []byte(good), 0o600); err != nil {
		t.Fatal(err)
	}
	h := startLocalSource(t, dir, path)
	d := h.d
	bad := strings.Replace(good, "    branch: main\n", "    brnach: main\n    resyncFrequencySeconds: -1\n", 1)
	if err := os.WriteFile(path, []byte(bad), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := d.Reload(); err == nil {
		t.Fatal("a config with problems was applied")
	}
	msg := h.sourceStatus().Health.Message
	if !strings.HasPrefix(msg, "3 problems: "+path+":5:5: stacks[0].brnach: unknown field") {
		t.Fatalf("the source's health says %q", msg)
	}
}

// TestReloadAllowingRemoval: the override lets one reload remove up to n
// stacks past the mass-removal guard, no more, and only that reload.
func TestReloadAllowingRemoval(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "stacks.yaml")
	write := func(names ...string) {
		t.Helper()
		doc := "stacks:\n"
		for _, n := range names {
			doc += "  - {name: " + n + ", stack: dev, projectRepo: https://git.example/app.git, branch: main}\n"
		}
		if len(names) == 0 {
			doc = "stacks: []\n"
		}
		if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("a", "b", "c")
	h := startLocalSource(t, dir, path)
	d := h.d
	write("a")
	if err := d.Reload(); err == nil || !strings.Contains(err.Error(), "--allow-removal 2") {
		t.Fatalf("removing 2 of 3 stacks: %v", err)
	}
	if cs := d.ConfigStatus(); cs.Removes != 2 {
		t.Fatalf("removes = %d, want 2", cs.Removes)
	}
	if err := d.ReloadAllowingRemoval(1); err == nil || !strings.Contains(err.Error(), "removes 2 stacks, more than the 1 allowed") {
		t.Fatalf("allowing 1 of 2 removals: %v", err)
	}
	if err := d.ReloadAllowingRemoval(2); err != nil {
		t.Fatalf("allowing 2 removals: %v", err)
	}
	if cs := d.ConfigStatus(); cs.Removes != 0 || len(d.Config().Stacks) != 1 {
		t.Fatalf("after the override: removes %d, %d stacks", cs.Removes, len(d.Config().Stacks))
	}
	revs, _ := d.ConfigRevisions(0, 1)
	if len(revs) != 1 || revs[0].AllowedRemoval != 2 {
		t.Fatalf("the revision does not record the override: %+v", revs)
	}
	// The override was for that reload only: the last stack is guarded.
	write()
	if err := d.Reload(); err == nil {
		t.Fatal("the override outlived its reload")
	}
}

// startLocalSource starts a daemon whose one config source is the local
// file path, its stacks' repository at sha1.
func startLocalSource(t *testing.T, dir, path string) *harness {
	t.Helper()
	h := &harness{t: t, store: newMemStore(), fetcher: &fakeFetcher{commits: map[string]string{}}, runner: &fakeRunner{fail: map[string]error{}}, dir: dir}
	h.fetcher.set("https://git.example/app.git", sha1, nil)
	d, err := New(nil, Options{Store: h.store, Fetcher: h.fetcher, Runner: h.runner, DataDir: dir,
		MinResync: 50 * time.Millisecond, Sources: []spec.Source{{Path: path}}})
	if err != nil {
		t.Fatal(err)
	}
	h.d = d
	h.start()
	return h
}
