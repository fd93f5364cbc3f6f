package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stackd/stackd/daemon/activity"
	"github.com/stackd/stackd/daemon/conditions"
	"github.com/stackd/stackd/daemon/decide"
	"github.com/stackd/stackd/daemon/model"
	"github.com/stackd/stackd/daemon/sched"
	"github.com/stackd/stackd/daemon/spec"

	"github.com/stackd/stackd/daemon/notify"
)

// The daemon's scheduling tests use hand-written fakes of its interfaces;
// the end-to-end tests in cmd/stackd run the real ones.

type memStore struct {
	mu        sync.Mutex
	stacks    map[string]model.StackRecord
	updates   map[string]model.Update
	logs      map[string][]byte
	seq       map[string]uint64
	revisions []model.ConfigRevision
	meta      map[string][]byte
	resources map[string]model.Resources
	previews  map[string]model.StackPreview
}

func newMemStore() *memStore {
	return &memStore{stacks: map[string]model.StackRecord{}, updates: map[string]model.Update{}, logs: map[string][]byte{},
		seq: map[string]uint64{}, meta: map[string][]byte{}, resources: map[string]model.Resources{},
		previews: map[string]model.StackPreview{}}
}

func (m *memStore) PutResources(stack string, r model.Resources) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.resources[stack] = r
	return nil
}

func (m *memStore) PutPreview(stack string, p model.StackPreview) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.previews[stack] = p
	return nil
}

func (m *memStore) Preview(stack string) (model.StackPreview, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	p, ok := m.previews[stack]
	if !ok {
		return model.StackPreview{}, model.ErrNotFound
	}
	return p, nil
}

func (m *memStore) Resources(stack string) (model.Resources, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.resources[stack]
	if !ok {
		return model.Resources{}, model.ErrNotFound
	}
	return r, nil
}

func (m *memStore) PutRevision(r model.ConfigRevision) (model.ConfigRevision, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r.Seq = uint64(len(m.revisions) + 1)
	m.revisions = append(m.revisions, r)
	return r, nil
}

func (m *memStore) Revisions(before uint64, limit int) ([]model.ConfigRevision, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []model.ConfigRevision
	for i := len(m.revisions) - 1; i >= 0 && len(out) < limit; i-- {
		if r := m.revisions[i]; before == 0 || r.Seq < before {
			out = append(out, r)
		}
	}
	return out, nil
}

func (m *memStore) Meta(key string) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	v, ok := m.meta[key]
	if !ok {
		return nil, errors.New("not found")
	}
	return v, nil
}

func (m *memStore) PutMeta(key string, value []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.meta[key] = value
	return nil
}

func (m *memStore) PutStack(r model.StackRecord) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	data, _ := json.Marshal(r) // deep copy, as a real store keeps bytes
	var c model.StackRecord
	_ = json.Unmarshal(data, &c)
	m.stacks[r.Name] = c
	return nil
}

func (m *memStore) Stack(name string) (model.StackRecord, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.stacks[name]
	if !ok {
		return model.StackRecord{}, model.ErrNotFound
	}
	return r, nil
}

func (m *memStore) Stacks() ([]model.StackRecord, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []model.StackRecord
	for _, r := range m.stacks {
		out = append(out, r)
	}
	return out, nil
}

func (m *memStore) DeleteStack(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.stacks, name)
	return nil
}

func (m *memStore) BeginUpdate(u model.Update) (model.Update, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.seq[u.Stack]++
	u.Seq = m.seq[u.Stack]
	u.ID = fmt.Sprintf("%s-%d", u.Stack, u.Seq)
	m.updates[u.ID] = u
	return u, nil
}

func (m *memStore) PutUpdate(u model.Update) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.updates[u.ID] = u
	return nil
}

func (m *memStore) PutLog(id string, log []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.logs[id] = log
	return nil
}

func (m *memStore) RunningUpdates() ([]model.Update, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []model.Update
	for _, u := range m.updates {
		if u.State == model.UpdateRunning {
			out = append(out, u)
		}
	}
	return out, nil
}

func (m *memStore) Updates(stack string, before uint64, limit int) ([]model.Update, error) {
	all := m.updatesOf(stack)
	var out []model.Update
	for i := len(all) - 1; i >= 0 && len(out) < limit; i-- {
		if before == 0 || all[i].Seq < before {
			out = append(out, all[i])
		}
	}
	return out, nil
}

func (m *memStore) Update(id string) (model.Update, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	u, ok := m.updates[id]
	if !ok {
		return model.Update{}, errors.New("not found")
	}
	return u, nil
}

func (m *memStore) Log(id string) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.logs[id], nil
}

func (m *memStore) updatesOf(stack string) []model.Update {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []model.Update
	for i := uint64(1); i <= m.seq[stack]; i++ {
		out = append(out, m.updates[fmt.Sprintf("%s-%d", stack, i)])
	}
	return out
}

type fakeFetcher struct {
	mu      sync.Mutex
	commits map[string]string // by URL
	err     error
	// trees holds the files (path → content) of commits that Checkout
	// writes; other commits get a Pulumi.yaml naming the commit.
	trees map[string]map[string]string
}

func (f *fakeFetcher) setTree(commit string, files map[string]string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.trees == nil {
		f.trees = map[string]map[string]string{}
	}
	f.trees[commit] = files
}

func (f *fakeFetcher) set(url, commit string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.commits[url], f.err = commit, err
}

func (f *fakeFetcher) Resolve(_ context.Context, src model.GitSource) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return "", f.err
	}
	return f.commits[src.URL], nil
}

func (f *fakeFetcher) Checkout(_ context.Context, src model.GitSource, commit, dir string) (string, error) {
	f.mu.Lock()
	tree, ok := f.trees[commit]
	f.mu.Unlock()
	if !ok {
		tree = map[string]string{"Pulumi.yaml": "commit: " + commit}
	}
	_ = os.RemoveAll(dir)
	for name, content := range tree {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			return "", err
		}
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			return "", err
		}
	}
	return dir, os.MkdirAll(dir, 0o700)
}

func (f *fakeFetcher) Forget(string) {}

type fakeRunner struct {
	mu      sync.Mutex
	ops     []model.Operation
	fail    map[string]error // by stack name
	running int
	peak    int
	gate    chan struct{}          // when set, each Run waits for a receive
	deaf    bool                   // the gate ignores cancellation, as a CLI slow to stop
	drift   []spec.DriftedResource // what drift checks find
	// resources are what an operation that exports gives.
	resources []model.Resource
	// exportFails makes every export fail.
	exportFails bool
}

func (r *fakeRunner) Run(ctx context.Context, op model.Operation) (model.Result, error) {
	r.mu.Lock()
	r.ops = append(r.ops, op)
	r.running++
	r.peak = max(r.peak, r.running)
	err, gate, deaf := r.fail[op.Name], r.gate, r.deaf
	r.mu.Unlock()
	defer func() { r.mu.Lock(); r.running--; r.mu.Unlock() }()
	if gate != nil && deaf {
		<-gate
	} else if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return model.Result{}, ctx.Err()
		}
	}
	if op.Log != nil {
		fmt.Fprintf(op.Log, "running %s of %s\n", op.Type, op.Name)
	}
	if err != nil {
		return model.Result{}, err
	}
	if op.Type == model.UpdateDrift {
		r.mu.Lock()
		defer r.mu.Unlock()
		return model.Result{Drift: slices.Clone(r.drift)}, nil
	}
	if op.Refresh {
		r.mu.Lock()
		r.drift = nil // a refreshing up repairs the drift
		r.mu.Unlock()
	}
	out := map[string]json.RawMessage{"name": json.RawMessage(`"` + op.Name + `"`)}
	res := model.Result{Outputs: out, Changes: map[string]int{"same": 1}}
	r.mu.Lock()
	switch {
	case op.Export && r.exportFails:
		res.ExportFailed = true
	case op.Export && r.resources != nil:
		res.Resources, res.Exported = slices.Clone(r.resources), true
	}
	r.mu.Unlock()
	return res, nil
}

func (r *fakeRunner) Outputs(_ context.Context, ws model.Workspace) (map[string]any, error) {
	return map[string]any{"name": ws.Name, "secret": "s3cr3t-" + ws.Name}, nil
}

func (r *fakeRunner) setFail(name string, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fail[name] = err
}

func (r *fakeRunner) opsOf(name string) []model.Operation {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []model.Operation
	for _, op := range r.ops {
		if op.Name == name {
			out = append(out, op)
		}
	}
	return out
}

type harness struct {
	t       *testing.T
	d       *Daemon
	store   *memStore
	fetcher *fakeFetcher
	runner  *fakeRunner
	dir     string
}

func newHarness(t *testing.T, yamlText string, tweak func(*Options)) *harness {
	t.Helper()
	h := &harness{t: t, store: newMemStore(), fetcher: &fakeFetcher{commits: map[string]string{}},
		runner: &fakeRunner{fail: map[string]error{}}, dir: t.TempDir()}
	opts := Options{Store: h.store, Fetcher: h.fetcher, Runner: h.runner, DataDir: h.dir,
		MinResync: 50 * time.Millisecond, BackoffBase: 20 * time.Millisecond, pollEvery: 20 * time.Millisecond,
		Refs: spec.RefSources{SecretsDir: filepath.Join(h.dir, "secrets")}}
	if tweak != nil {
		tweak(&opts)
	}
	d, err := New(h.parse(yamlText), opts)
	if err != nil {
		t.Fatal(err)
	}
	h.d = d
	return h
}

func (h *harness) parse(yamlText string) *spec.Config {
	h.t.Helper()
	cfg, diags, err := spec.Parse("stacks.yaml", []byte(yamlText))
	if err != nil {
		h.t.Fatalf("parse: %v\n%v", err, diags)
	}
	return cfg
}

func (h *harness) start() {
	h.t.Helper()
	if err := h.d.Start(context.Background()); err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() {
		// A short drain: a test that failed may leave gated operations.
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = h.d.Stop(ctx)
	})
}

// eventually waits for cond, failing with what describe says. The bound
// is long (30s): it only ends a test that failed, and a busy machine
// running the race detector may take seconds for a few passes.
func (h *harness) eventually(what string, cond func() bool) {
	h.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			h.t.Fatalf("timed out waiting for %s; stacks: %s", what, h.dump())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (h *harness) dump() string {
	data, _ := json.MarshalIndent(h.d.Stacks(), "", " ")
	return string(data)
}

func (h *harness) last(name string) *model.LastUpdate {
	v, err := h.d.Stack(name)
	if err != nil {
		return nil
	}
	return v.Status.LastUpdate
}

func (h *harness) ready(name string) bool {
	v, err := h.d.Stack(name)
	if err != nil {
		return false
	}
	c := v.Status.Condition(model.ConditionReady)
	return c != nil && c.Status == conditions.True
}

const sha1, sha2 = "1111111111111111111111111111111111111111", "2222222222222222222222222222222222222222"

const oneStack = `
stacks:
  - name: app
    stack: dev
    projectRepo: https://git.example/app.git
    branch: main
`

func TestNewCommitIsApplied(t *testing.T) {
	h := newHarness(t, oneStack, nil)
	h.fetcher.set("https://git.example/app.git", sha1, nil)
	h.start()
	h.eventually("first deploy", func() bool { return h.ready("app") })
	if l := h.last("app"); l.LastSuccessfulCommit != sha1 || l.Type != model.UpdateUp {
		t.Fatalf("last update = %+v", l)
	}
	h.fetcher.set("https://git.example/app.git", sha2, nil)
	h.eventually("second commit", func() bool { l := h.last("app"); return l != nil && l.LastSuccessfulCommit == sha2 })
	ups := h.store.updatesOf("app")
	if len(ups) != 2 || !strings.Contains(ups[1].Reason, "New commit detected") {
		t.Fatalf("updates = %+v", ups)
	}
	if string(h.store.logs[ups[0].ID]) != "running up of app\n" {
		t.Fatalf("log = %q", h.store.logs[ups[0].ID])
	}
	v, _ := h.d.Stack("app")
	if string(v.Status.Outputs["name"]) != `"app"` || v.Status.Health.Status != model.HealthHealthy {
		t.Fatalf("status = %+v", v.Status)
	}
}

func TestFailuresBackOffThenStallThenRecover(t *testing.T) {
	h := newHarness(t, oneStack, nil)
	h.fetcher.set("https://git.example/app.git", sha1, nil)
	h.runner.setFail("app", errors.New("program failed: boom"))
	h.start()
	h.eventually("stalled", func() bool {
		v, _ := h.d.Stack("app")
		c := v.Status.Condition(model.ConditionStalled)
		return c != nil && c.Reason == model.ReasonUpdateFailed
	})
	ups := h.store.updatesOf("app")
	if len(ups) != 3 {
		t.Fatalf("%d attempts before stalling, want 3 (--max-failures)", len(ups))
	}
	// The count, the message and the record agree.
	v, _ := h.d.Stack("app")
	if l := v.Status.LastUpdate; l.Failures != 3 || !strings.Contains(v.Status.Condition(model.ConditionStalled).Message, "up failed 3 times") {
		t.Fatalf("failures %d, message %q", l.Failures, v.Status.Condition(model.ConditionStalled).Message)
	}
	for i := 1; i < len(ups); i++ {
		gap := ups[i].StartTime.Sub(ups[i-1].EndTime)
		if want := decide.BackoffFrom(20*time.Millisecond, int64(i-1), decide.DefaultMaxBackoff); gap < want {
			t.Errorf("attempt %d started %v after the previous failure, want >= %v", i+1, gap, want)
		}
		if ups[i].Message != "program failed: boom" {
			t.Errorf("message = %q", ups[i].Message)
		}
	}
	time.Sleep(200 * time.Millisecond)
	if n := len(h.store.updatesOf("app")); n != 3 {
		t.Fatalf("a stalled stack ran again: %d updates", n)
	}
	// A new commit gets the whole retry budget again, not one attempt.
	h.fetcher.set("https://git.example/app.git", sha2, nil)
	h.eventually("stalled on the new commit", func() bool {
		v, _ := h.d.Stack("app")
		l := v.Status.LastUpdate
		return l != nil && l.LastAttemptedCommit == sha2 && l.Failures == 3
	})
	if n := len(h.store.updatesOf("app")); n != 6 {
		t.Fatalf("%d updates after the new commit stalled, want 6", n)
	}
	h.runner.setFail("app", nil)
	const sha3 = "3333333333333333333333333333333333333333"
	h.fetcher.set("https://git.example/app.git", sha3, nil)
	h.eventually("recovery on a new commit", func() bool { return h.ready("app") })
}

func TestSyncRequestRunsAgain(t *testing.T) {
	h := newHarness(t, oneStack, nil)
	h.fetcher.set("https://git.example/app.git", sha1, nil)
	h.start()
	h.eventually("first deploy", func() bool { return h.ready("app") })
	token, err := h.d.Sync("app")
	if err != nil {
		t.Fatal(err)
	}
	h.eventually("sync", func() bool { return len(h.runner.opsOf("app")) == 2 && h.ready("app") })
	if got := h.last("app").ReconcileRequest; got != token {
		t.Fatalf("reconcileRequest = %q, want %q", got, token)
	}
	if _, err := h.d.Sync("nope"); !errors.Is(err, ErrUnknownStack) {
		t.Fatalf("sync of an unknown stack: %v", err)
	}
}

const chain = `
stacks:
  - name: a
    stack: dev
    projectRepo: https://git.example/a.git
    branch: main
  - name: b
    stack: dev
    projectRepo: https://git.example/b.git
    branch: main
    prerequisites:
      - name: a
    envRefs:
      A_SECRET:
        type: StackOutput
        stackOutput: {stack: a, output: secret}
`

func TestPrerequisiteAndStackOutput(t *testing.T) {
	h := newHarness(t, chain, nil)
	h.fetcher.set("https://git.example/a.git", sha1, nil)
	h.fetcher.set("https://git.example/b.git", sha1, nil)
	h.runner.setFail("a", errors.New("a is broken"))
	h.start()
	h.eventually("b waiting", func() bool {
		v, _ := h.d.Stack("b")
		c := v.Status.Condition(model.ConditionReconciling)
		return c != nil && c.Reason == model.ReasonPrerequisiteNotSatisfied
	})
	if n := len(h.runner.opsOf("b")); n != 0 {
		t.Fatalf("b ran %d times before a succeeded", n)
	}
	h.runner.setFail("a", nil)
	h.d.Sync("a")
	h.eventually("b deployed", func() bool { return h.ready("b") })
	op := h.runner.opsOf("b")[0]
	if op.Env["A_SECRET"] != "s3cr3t-a" {
		t.Fatalf("b's env = %v", op.Env)
	}
}

func TestMaxConcurrentAndCoalescing(t *testing.T) {
	var text strings.Builder
	text.WriteString("stacks:\n")
	for i := range 4 {
		fmt.Fprintf(&text, "  - {name: s%d, stack: dev, projectRepo: https://git.example/s%d.git, branch: main}\n", i, i)
	}
	h := newHarness(t, text.String(), func(o *Options) { o.MaxConcurrent = 2 })
	for i := range 4 {
		h.fetcher.set(fmt.Sprintf("https://git.example/s%d.git", i), sha1, nil)
	}
	h.runner.gate = make(chan struct{})
	h.start()
	h.eventually("two running", func() bool { h.runner.mu.Lock(); defer h.runner.mu.Unlock(); return h.runner.running == 2 })
	// Three sync requests for a running stack coalesce into one more run.
	h.runner.mu.Lock()
	running := h.runner.ops[0].Name
	h.runner.mu.Unlock()
	for range 3 {
		h.d.Sync(running)
	}
	go func() {
		for range 6 {
			h.runner.gate <- struct{}{}
		}
	}()
	for i := range 4 {
		h.eventually("all deployed", func() bool { return h.ready(fmt.Sprintf("s%d", i)) })
	}
	h.runner.mu.Lock()
	peak := h.runner.peak // the rerun may be starting: read it locked
	h.runner.mu.Unlock()
	if peak > 2 {
		t.Fatalf("peak concurrency %d > 2", peak)
	}
	h.eventually("one coalesced rerun", func() bool { return len(h.runner.opsOf(running)) == 2 })
	time.Sleep(100 * time.Millisecond)
	if n := len(h.runner.opsOf(running)); n != 2 {
		t.Fatalf("%s ran %d times, want 2 (one coalesced rerun)", running, n)
	}
}

func TestRemoval(t *testing.T) {
	const two = `
stacks:
  - {name: keep, stack: dev, projectRepo: https://git.example/k.git, branch: main}
  - {name: gone, stack: dev, projectRepo: https://git.example/g.git, branch: main, destroyOnFinalize: true}
`
	h := newHarness(t, two, nil)
	h.fetcher.set("https://git.example/k.git", sha1, nil)
	h.fetcher.set("https://git.example/g.git", sha1, nil)
	h.start()
	h.eventually("both deployed", func() bool { return h.ready("keep") && h.ready("gone") })
	h.runner.setFail("gone", errors.New("destroy failed"))
	if err := h.d.Apply(h.parse("stacks: []\n")); err != nil {
		t.Fatal(err)
	}
	h.eventually("keep forgotten without destroy", func() bool { _, err := h.d.Stack("keep"); return err != nil })
	h.eventually("failed destroy", func() bool { l := h.last("gone"); return l != nil && l.Type == model.UpdateDestroy })
	if _, err := h.d.Stack("gone"); err != nil {
		t.Fatal("record dropped before the destroy succeeded")
	}
	h.eventually("stalled destroy", func() bool {
		v, _ := h.d.Stack("gone")
		c := v.Status.Condition(model.ConditionStalled)
		return c != nil && c.Reason == model.ReasonUpdateFailed
	})
	h.runner.setFail("gone", nil)
	time.Sleep(100 * time.Millisecond)
	if _, err := h.d.Stack("gone"); err != nil {
		t.Fatal("a stalled destroy was retried without a sync request")
	}
	if _, err := h.d.Sync("gone"); err != nil {
		t.Fatal(err)
	}
	h.eventually("gone forgotten after destroy", func() bool { _, err := h.d.Stack("gone"); return err != nil })
	for _, op := range h.runner.opsOf("keep") {
		if op.Type == model.UpdateDestroy {
			t.Fatal("a stack without destroyOnFinalize was destroyed")
		}
	}
}

func TestSourceUnavailableAndMissingSecret(t *testing.T) {
	const withSecret = `
stacks:
  - name: app
    stack: dev
    projectRepo: https://git.example/app.git
    branch: main
    secretsRef:
      password: {type: Secret, secret: {name: db, key: password}}
`
	h := newHarness(t, withSecret, nil)
	h.fetcher.set("https://git.example/app.git", "", errors.New("dial tcp: connection refused"))
	h.start()
	stalled := func(reason, text string) func() bool {
		return func() bool {
			v, _ := h.d.Stack("app")
			c := v.Status.Condition(model.ConditionStalled)
			return c != nil && c.Reason == reason && strings.Contains(c.Message, text)
		}
	}
	h.eventually("SourceUnavailable", stalled(model.ReasonSourceUnavailable, "connection refused"))
	h.fetcher.set("https://git.example/app.git", sha1, nil)
	h.eventually("SpecInvalid naming the file", stalled(model.ReasonSpecInvalid, filepath.Join("secrets", "db", "password")))
	if err := os.MkdirAll(filepath.Join(h.dir, "secrets", "db"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(h.dir, "secrets", "db", "password"), []byte("hunter22\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	h.eventually("recovered", func() bool { return h.ready("app") })
	op := h.runner.opsOf("app")[0]
	if len(op.Config) != 1 || op.Config[0].Value != "hunter22" || !op.Config[0].Secret {
		t.Fatalf("config = %+v", op.Config)
	}
	if data, _ := json.Marshal(h.d.Stacks()); strings.Contains(string(data), "hunter22") {
		t.Fatal("the secret appears in the API view")
	}
}

func TestProgramStack(t *testing.T) {
	const prog = `
apiVersion: pulumi.com/v1
kind: Program
metadata: {name: hello}
program:
  variables: {greeting: hi}
  outputs: {greeting: "${greeting}"}
---
apiVersion: pulumi.com/v1
kind: Stack
metadata: {name: hello}
spec: {stack: dev, programRef: {name: hello}}
`
	h := newHarness(t, prog, nil)
	h.start()
	h.eventually("deployed", func() bool { return h.ready("hello") })
	data, err := os.ReadFile(filepath.Join(h.dir, "stacks", "hello", "program", "Pulumi.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"name: hello", "runtime: yaml", "greeting: hi"} {
		if !strings.Contains(string(data), want) {
			t.Errorf("Pulumi.yaml lacks %q:\n%s", want, data)
		}
	}
}

func TestSyncWaves(t *testing.T) {
	h := newHarness(t, manifestDoc("late", "1")+"---\n"+manifestDoc("early", "-1"), nil)
	h.fetcher.set("https://git.example/late.git", sha1, nil)
	h.fetcher.set("https://git.example/early.git", sha1, nil)
	h.runner.gate = make(chan struct{})
	h.start()
	h.eventually("early running", func() bool { return len(h.runner.opsOf("early")) == 1 })
	// early is held at the runner's gate: once late says it waits for
	// early's wave, the daemon has judged it, and it must not have run.
	h.eventually("late waiting for sync wave -1", func() bool {
		c := reconciling(h, "late")
		return c != nil && strings.Contains(c.Message, "sync wave -1")
	})
	if n := len(h.runner.opsOf("late")); n != 0 {
		t.Fatal("a later sync wave started while an earlier one was running")
	}
	h.runner.gate <- struct{}{}
	h.eventually("late running", func() bool { return len(h.runner.opsOf("late")) == 1 })
	h.runner.gate <- struct{}{}
	h.eventually("both ready", func() bool { return h.ready("early") && h.ready("late") })
}

// TestStackVersionsByName: StackVersions lists every stack by name,
// though the loop orders stacks by sync wave, and follows the stacks that
// come and go.
func TestStackVersionsByName(t *testing.T) {
	h := newHarness(t, manifestDoc("late", "1")+"---\n"+manifestDoc("early", "-1")+"---\n"+manifestDoc("mid", "0"), nil)
	for _, name := range []string{"late", "early", "mid", "zed"} {
		h.fetcher.set("https://git.example/"+name+".git", sha1, nil)
	}
	names := func() string {
		var out []string
		for _, sv := range h.d.StackVersions() {
			out = append(out, sv.Name)
		}
		return strings.Join(out, " ")
	}
	h.start()
	h.eventually("every stack ready", func() bool { return h.ready("late") && h.ready("early") && h.ready("mid") })
	if got := names(); got != "early late mid" {
		t.Fatalf("StackVersions = %s, want early late mid", got)
	}
	if err := h.d.Apply(h.parse(manifestDoc("zed", "-2") + "---\n" + manifestDoc("late", "1"))); err != nil {
		t.Fatal(err)
	}
	h.eventually("early and mid gone, zed there", func() bool { return names() == "late zed" })
}

func TestRepoKey(t *testing.T) {
	same := []string{
		"https://github.com/Acme/App.git",
		"https://GitHub.com/Acme/App",
		"http://github.com/Acme/App/",
		"ssh://git@github.com/Acme/App.git",
		"git@github.com:Acme/App.git",
	}
	for _, u := range same {
		if got := spec.RepoKey(u); got != "github.com/Acme/App" {
			t.Errorf("spec.RepoKey(%q) = %q", u, got)
		}
	}
	if spec.RepoKey("https://github.com/acme/other") == spec.RepoKey(same[0]) {
		t.Error("different repositories share a key")
	}
}

func TestPushPollsTrackingStacks(t *testing.T) {
	const two = `
stacks:
  - {name: app, stack: dev, projectRepo: https://git.example/org/app.git, branch: main}
  - {name: other, stack: dev, projectRepo: https://git.example/org/app.git, branch: dev}
`
	h := newHarness(t, two, func(o *Options) { o.pollEvery = time.Hour })
	h.fetcher.set("https://git.example/org/app.git", sha1, nil)
	h.start()
	h.eventually("deployed", func() bool { return h.ready("app") && h.ready("other") })
	h.fetcher.set("https://git.example/org/app.git", sha2, nil)
	if got := h.d.Push([]string{"git@git.example:org/app.git"}, "main"); strings.Join(got.Stacks, ",") != "app" {
		t.Fatalf("Push matched %v, want [app]", got)
	}
	h.eventually("new commit via push", func() bool { l := h.last("app"); return l != nil && l.LastSuccessfulCommit == sha2 })
	if l := h.last("other"); l.LastSuccessfulCommit != sha1 {
		t.Fatal("a stack on another branch ran")
	}
}

// saveLikeEditor writes path the way editors do: a temp file renamed over
// the old one.
func saveLikeEditor(t *testing.T, path, content string) {
	t.Helper()
	tmp := path + ".swp"
	if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func TestHotReload(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "stacks.yaml")
	stack := func(name string) string {
		return fmt.Sprintf("  - {name: %s, stack: dev, projectRepo: https://git.example/%s.git, branch: main}\n", name, name)
	}
	two := "stacks:\n" + stack("a") + stack("b")
	if err := os.WriteFile(path, []byte(two), 0o600); err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, two, func(o *Options) { o.Sources, o.WatchConfig = []spec.Source{{Path: path}}, true })
	for _, n := range []string{"a", "b", "c"} {
		h.fetcher.set("https://git.example/"+n+".git", sha1, nil)
	}
	h.start()
	h.eventually("deployed", func() bool { return h.ready("a") && h.ready("b") })

	saveLikeEditor(t, path, two+stack("c"))
	h.eventually("c added by an editor's save", func() bool { return h.ready("c") })

	saveLikeEditor(t, path, two+stack("c")+"  - {name: d, stack: dev, branch: main}\n")
	h.eventually("a broken edit refused", func() bool { return !h.d.ConfigStatus().Successful })
	if msg := h.d.ConfigStatus().Error; !strings.Contains(msg, "stacks.yaml:") {
		t.Fatalf("reload error %q does not name the file", msg)
	}
	saveLikeEditor(t, path, "# reordered, same meaning\nstacks:\n"+stack("c")+stack("b")+stack("a"))
	h.eventually("the fix accepted", func() bool { return h.d.ConfigStatus().Successful })

	saveLikeEditor(t, path, "")
	h.eventually("an empty file refused", func() bool { return !h.d.ConfigStatus().Successful })
	saveLikeEditor(t, path, "stacks: []\n")
	h.eventually("emptying refused", func() bool {
		return strings.Contains(h.d.ConfigStatus().Error, "removes 3 of the 3 stacks")
	})
	time.Sleep(200 * time.Millisecond)
	for _, n := range []string{"a", "b", "c"} {
		if !h.ready(n) {
			t.Fatalf("stack %s changed after an emptied config", n)
		}
		for _, op := range h.runner.opsOf(n) {
			if op.Type == model.UpdateDestroy {
				t.Fatalf("stack %s was destroyed", n)
			}
		}
	}
	if n := len(h.runner.opsOf("a")); n != 1 {
		t.Fatalf("a ran %d times; a reordered config must not re-run it", n)
	}
}

func TestDeprecatedEnvFields(t *testing.T) {
	const cfg = `
apiVersion: v1
kind: ConfigMap
metadata: {name: settings}
data: {REGION: eu-west-1}
---
apiVersion: v1
kind: Secret
metadata: {name: creds}
stringData: {API_KEY: key-123456}
---
apiVersion: v1
kind: Secret
metadata: {name: pulumi}
stringData: {accessToken: pul-abcdef}
---
apiVersion: pulumi.com/v1
kind: Stack
metadata: {name: app}
spec:
  stack: dev
  projectRepo: https://git.example/app.git
  branch: main
  envs: [settings]
  envSecrets: [creds]
  accessTokenSecret: pulumi
  envRefs:
    REGION: {type: Literal, literal: {value: us-east-1}}
`
	h := newHarness(t, cfg, nil)
	h.fetcher.set("https://git.example/app.git", sha1, nil)
	h.start()
	h.eventually("deployed", func() bool { return h.ready("app") })
	env := h.runner.opsOf("app")[0].Env
	want := map[string]string{"REGION": "us-east-1", "API_KEY": "key-123456", "PULUMI_ACCESS_TOKEN": "pul-abcdef"}
	for k, v := range want {
		if env[k] != v {
			t.Errorf("env %s = %q, want %q", k, env[k], v)
		}
	}
}

func TestDriftChecks(t *testing.T) {
	const manifest = `
stacks:
  - name: app
    stack: dev
    projectRepo: https://git.example/app.git
    branch: main
    driftDetection:
      interval: 1ms
      remediate: %v
      ignore:
        - {type: "aws:s3/bucket:Bucket"}
        - {urn: "*::tagged", properties: [tags]}
`
	for _, remediate := range []bool{false, true} {
		t.Run(fmt.Sprint("remediate=", remediate), func(t *testing.T) {
			h := newHarness(t, fmt.Sprintf(manifest, remediate), nil)
			h.fetcher.set("https://git.example/app.git", sha1, nil)
			h.start()
			drift := func() *spec.DriftStatus { v, _ := h.d.Stack("app"); return v.Status.Drift }
			h.eventually("in sync", func() bool { d := drift(); return d != nil && d.State == spec.DriftInSync })
			h.runner.mu.Lock()
			h.runner.drift = []spec.DriftedResource{
				{URN: "urn:pulumi:dev::p::stackdtest:index:File::note", Type: "stackdtest:index:File", Op: "update", Properties: []string{"content"}},
				{URN: "urn:pulumi:dev::p::aws:s3/bucket:Bucket::b", Type: "aws:s3/bucket:Bucket", Op: "delete"},
				{URN: "urn:pulumi:dev::p::x:y:Z::tagged", Type: "x:y:Z", Op: "update", Properties: []string{"tags"}},
			}
			h.runner.mu.Unlock()
			if !remediate {
				h.eventually("drifted", func() bool { d := drift(); return d != nil && d.State == spec.DriftDrifted })
				d := drift()
				if len(d.Resources) != 1 || d.Resources[0].Type != "stackdtest:index:File" || d.Ignored != 2 {
					t.Fatalf("drift = %+v", d)
				}
				if !h.ready("app") {
					t.Fatal("drift made the stack un-Ready")
				}
				for _, op := range h.runner.opsOf("app") {
					if op.Type == model.UpdateUp && op.Refresh {
						t.Fatal("remediated without remediate: true")
					}
				}
				return
			}
			h.eventually("remediated", func() bool {
				for _, op := range h.runner.opsOf("app") {
					if op.Type == model.UpdateUp && op.Refresh {
						return true
					}
				}
				return false
			})
			h.eventually("in sync again", func() bool { d := drift(); return d != nil && d.State == spec.DriftInSync })
			var reasons []string
			for _, u := range h.store.updatesOf("app") {
				reasons = append(reasons, u.Reason)
			}
			if !slices.ContainsFunc(reasons, func(r string) bool { return strings.HasPrefix(r, "Drift remediation after check app-") }) {
				t.Fatalf("no update says it remediates drift: %q", reasons)
			}
		})
	}
}

type recordingNotifier struct {
	mu     sync.Mutex
	events []notify.Event
}

func (n *recordingNotifier) Notify(e notify.Event) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.events = append(n.events, e)
}

func (n *recordingNotifier) kinds() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	var k []string
	for _, e := range n.events {
		k = append(k, e.Kind)
	}
	return strings.Join(k, ",")
}

func TestNotifications(t *testing.T) {
	n := &recordingNotifier{}
	h := newHarness(t, oneStack, func(o *Options) { o.Notifier, o.MaxFailures = n, 2 })
	h.fetcher.set("https://git.example/app.git", sha1, nil)
	h.runner.setFail("app", errors.New("boom"))
	h.start()
	h.eventually("stalled", func() bool { return strings.HasSuffix(n.kinds(), notify.StackStalled) })
	if got := n.kinds(); got != "update_failed,stack_stalled" {
		t.Fatalf("events %s", got)
	}
	h.runner.setFail("app", nil)
	h.fetcher.set("https://git.example/app.git", sha2, nil)
	h.eventually("recovered", func() bool { return strings.HasSuffix(n.kinds(), notify.StackRecovered) })
	n.mu.Lock()
	defer n.mu.Unlock()
	if e := n.events[1]; e.Stack != "app" || !strings.Contains(e.Message, "boom") || e.Update == "" {
		t.Fatalf("stalled event = %+v", e)
	}
}

// TestQueueDepthForgetsStacksThatNoLongerWait: a stack that waited to
// run and no longer wants to (here: its last update is current) leaves
// the queue at the next evaluation.
func TestQueueDepthForgetsStacksThatNoLongerWait(t *testing.T) {
	h := newHarness(t, oneStack, nil)
	st := &stackState{stack: h.d.cfg.Stack("app"), commit: sha1,
		rec: model.StackRecord{Name: "app", Generation: 1, Status: model.StackStatus{LastUpdate: &model.LastUpdate{
			Generation: 1, State: model.UpdateSucceeded, Type: model.UpdateUp, LastSuccessfulCommit: sha1, LastAttemptedCommit: sha1}}}}
	if err := st.act.Do(activity.Want); err != nil { // it waits
		t.Fatal(err)
	}
	st.round = 1 // polled in its repository's current round
	round := &sched.Round{}
	round.Join(time.Now(), time.Hour, time.Hour) // round 1, the next in an hour
	h.d.repoPolls[spec.RepoKey(st.stack.Spec.ProjectRepo)] = round
	h.d.stacks["app"], h.d.waiters["app"] = st, true
	if got := h.d.Stats().Queued; got != 1 {
		t.Fatalf("queued = %d before the evaluation, want 1", got)
	}
	l := h.d.lock()
	l.evaluateStack(st, time.Now(), &passState{})
	l.unlock()
	if got := h.d.Stats().Queued; got != 0 {
		t.Fatalf("queued = %d after an evaluation that found nothing to do", got)
	}
}

func TestSyncWaveHeldByUnhealthyLowerWave(t *testing.T) {
	const three = `
stacks:
  - {name: net, stack: dev, projectRepo: https://git.example/net.git, branch: main}
  - {name: app, stack: dev, projectRepo: https://git.example/app.git, branch: main}
  - {name: other, stack: dev, projectRepo: https://git.example/other.git, branch: main}
`
	h := newHarness(t, three, func(o *Options) { o.MaxFailures = 2 })
	for _, s := range h.d.cfg.Stacks {
		s.Source = "staging"
		if s.Name == "other" {
			s.Source = "production" // waves order stacks of one source only
		}
		if s.Name != "net" {
			s.SyncWave = 2
		}
	}
	for _, repo := range []string{"net", "app", "other"} {
		h.fetcher.set("https://git.example/"+repo+".git", sha1, nil)
	}
	h.runner.setFail("net", errors.New("boom"))
	h.start()
	h.eventually("net stalled", func() bool {
		v, _ := h.d.Stack("net")
		return v.Status.Health != nil && v.Status.Health.Status == model.HealthDegraded
	})
	h.eventually("other deployed", func() bool { return h.ready("other") })
	// net fails for as long as the test says: once app says it waits for
	// wave 0, the daemon has judged it, and it must not have run.
	h.eventually("app waiting for sync wave 0", func() bool {
		c := reconciling(h, "app")
		return c != nil && strings.Contains(c.Message, "sync wave 0 to be Ready")
	})
	if n := len(h.runner.opsOf("app")); n != 0 {
		t.Fatalf("wave 2 ran %d times while wave 0 was Degraded", n)
	}
	h.runner.setFail("net", nil)
	if _, err := h.d.Sync("net"); err != nil {
		t.Fatal(err)
	}
	h.eventually("app deployed once net is Ready", func() bool { return h.ready("net") && h.ready("app") })
}

// TestSyncOfDriftedStackRefreshes: a sync of a drifted stack runs an up
// that refreshes first, says so in its reason, and clears the drift at
// once (the up's id in the drift status, drift_resolved), before any
// further check.
func TestSyncOfDriftedStackRefreshes(t *testing.T) {
	n := &recordingNotifier{}
	h := newHarness(t, oneStack+"    driftDetection:\n      interval: 1h\n", func(o *Options) { o.Notifier = n })
	h.fetcher.set("https://git.example/app.git", sha1, nil)
	h.start()
	drift := func() *spec.DriftStatus { v, _ := h.d.Stack("app"); return v.Status.Drift }
	h.eventually("a first check", func() bool { return drift() != nil && drift().State == spec.DriftInSync })
	// A drift check found drift; the next check is an hour away.
	h.d.mu.Lock()
	st := h.d.stacks["app"]
	st.rec.Status.Drift = &spec.DriftStatus{State: spec.DriftDrifted, LastCheck: time.Now(), Since: time.Now(), Check: "app-9",
		Resources: []spec.DriftedResource{{URN: "urn:pulumi:dev::p::stackdtest:index:File::note", Op: "update"}}}
	h.d.mu.Unlock()
	if _, err := h.d.Sync("app"); err != nil {
		t.Fatal(err)
	}
	ups := func() []model.Operation {
		var out []model.Operation
		for _, op := range h.runner.opsOf("app") {
			if op.Type == model.UpdateUp {
				out = append(out, op)
			}
		}
		return out
	}
	h.eventually("the sync's up", func() bool { return len(ups()) == 2 && h.ready("app") })
	op := ups()[1]
	all := h.store.updatesOf("app")
	up := all[len(all)-1]
	if op.Type != model.UpdateUp || !op.Refresh || !strings.HasPrefix(up.Reason, SyncWithRefresh+" (drift found by check app-9)") {
		t.Fatalf("the sync ran %s refresh=%v, reason %q", op.Type, op.Refresh, up.Reason)
	}
	h.eventually("drift cleared", func() bool {
		return drift().State == spec.DriftInSync && drift().Check == up.ID
	})
	if !strings.Contains(n.kinds(), notify.DriftResolved) {
		t.Fatalf("no drift_resolved: %s", n.kinds())
	}
	// A stack in sync syncs without a refresh.
	if _, err := h.d.Sync("app"); err != nil {
		t.Fatal(err)
	}
	h.eventually("a plain sync", func() bool { return len(ups()) == 3 && h.ready("app") })
	if op := ups()[2]; op.Refresh {
		t.Fatal("a sync of a stack in sync refreshed")
	}
}

// TestFailingStackSaysWhenItRetries: while a failing stack has attempts
// left, its status says which attempt comes and when (PKO's conditions
// unchanged); a stall or a success clears it.
func TestFailingStackSaysWhenItRetries(t *testing.T) {
	h := newHarness(t, oneStack, func(o *Options) { o.BackoffBase = time.Hour })
	h.fetcher.set("https://git.example/app.git", sha1, nil)
	h.runner.setFail("app", errors.New("program failed: boom"))
	h.start()
	var v model.StackView
	h.eventually("a first failure", func() bool {
		v, _ = h.d.Stack("app")
		return v.Status.LastUpdate != nil && v.Status.CurrentUpdate == nil
	})
	r := v.Status.Retry
	end := h.store.updatesOf("app")[0].EndTime
	if r == nil || r.Attempt != 2 || r.Of != 3 || r.At.Sub(end) < time.Hour-time.Second || r.At.Sub(end) > time.Hour+time.Second {
		t.Fatalf("retry = %+v, failed at %v", r, end)
	}
	if want := "failing, retry 2 of 3 at " + r.At.UTC().Format(time.RFC3339); r.String() != want {
		t.Fatalf("retry says %q, want %q", r, want)
	}
	if c := v.Status.Condition(model.ConditionReconciling); c == nil || c.Reason != model.ReasonRetryingAfterFailure {
		t.Fatalf("PKO's condition changed: %+v", v.Status.Conditions)
	}
	h.runner.setFail("app", nil)
	if _, err := h.d.Sync("app"); err != nil {
		t.Fatal(err)
	}
	h.eventually("recovered", func() bool { return h.ready("app") })
	if v, _ := h.d.Stack("app"); v.Status.Retry != nil {
		t.Fatalf("a recovered stack still retries: %+v", v.Status.Retry)
	}
}
