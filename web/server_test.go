package web

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stackd/stackd/daemon"
	"github.com/stackd/stackd/daemon/livelog"
	"github.com/stackd/stackd/daemon/model"
	"github.com/stackd/stackd/daemon/spec"
	"github.com/stackd/stackd/web/metrics"
	"github.com/stackd/stackd/web/webtest"
)

// fakeAPI is a daemon with one stack, "app", unless stacks says
// otherwise. It records the calls that change something.
type fakeAPI struct {
	mu        sync.Mutex
	stacks    []model.StackView
	synced    []string
	ready     error
	updates   []model.Update // of "app", newest first
	logs      map[string][]byte
	live      map[string]*livelog.Log
	reloadErr error
	reloads   int
	// allowed are the allowRemoval of reloads that had one.
	allowed   []int
	pushes    []pushCall
	pushed    model.PushResult // what Push answers
	stats     model.Stats
	config    model.ConfigStatus
	revisions []model.ConfigRevision // newest first
	cluster   model.ClusterStatus    // a single node while Node is empty
	remote    map[string]string      // update id → URL of the replica running it
	// unchanging says the stacks never change: every version is 1, as
	// benchmarks want; else a version is its view's content hash.
	unchanging bool
	resources  map[string]model.Resources
	previewed  []string
	preview    *model.StackPreview
}

func (f *fakeAPI) PreviewNow(name string) error {
	if _, err := f.Stack(name); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.previewed = append(f.previewed, name)
	return nil
}

func (f *fakeAPI) LastPreview(name string) (model.StackPreview, error) {
	if _, err := f.Stack(name); err != nil {
		return model.StackPreview{}, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.preview == nil {
		return model.StackPreview{}, model.ErrNotFound
	}
	return *f.preview, nil
}

func (f *fakeAPI) StackResources(name string) (model.Resources, error) {
	if _, err := f.Stack(name); err != nil {
		return model.Resources{}, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if r, ok := f.resources[name]; ok {
		return r, nil
	}
	return model.Resources{Resources: []model.Resource{}}, nil
}

type pushCall struct {
	urls   []string
	branch string
}

func (f *fakeAPI) Stacks() []model.StackView {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.stacks == nil {
		return []model.StackView{{Name: "app", Spec: map[string]any{"stack": "dev"}}}
	}
	return slices.Clone(f.stacks)
}

func (f *fakeAPI) StackVersions() []model.StackVersion {
	views := f.Stacks()
	out := make([]model.StackVersion, len(views))
	for i, v := range views {
		out[i] = model.StackVersion{Name: v.Name, Version: 1, Holder: v.Holder}
		if !f.unchanging {
			h := fnv.New64a()
			_ = json.NewEncoder(h).Encode(v)
			out[i].Version = h.Sum64()
		}
	}
	return out
}

func (f *fakeAPI) Stack(name string) (model.StackView, error) {
	for _, v := range f.Stacks() {
		if v.Name == name {
			return v, nil
		}
	}
	return model.StackView{}, daemon.ErrUnknownStack
}

func (f *fakeAPI) SyncWindow(string) (*model.ChangeWindowStatus, string) { return nil, "" }

func (f *fakeAPI) Sync(name string) (string, error) {
	if _, err := f.Stack(name); err != nil {
		return "", err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.synced = append(f.synced, name)
	return "token-1", nil
}

func (f *fakeAPI) Ready() error { return f.ready }

func (f *fakeAPI) Updates(stack string, before uint64, limit int) ([]model.Update, error) {
	if _, err := f.Stack(stack); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []model.Update
	for _, u := range f.updates {
		if (before == 0 || u.Seq < before) && len(out) < limit {
			out = append(out, u)
		}
	}
	return out, nil
}

func (f *fakeAPI) Update(id string) (model.Update, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, u := range f.updates {
		if u.ID == id {
			return u, nil
		}
	}
	return model.Update{}, fmt.Errorf("%w: %s", daemon.ErrUnknownUpdate, id)
}

func (f *fakeAPI) Log(id string) ([]byte, *livelog.Log, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if l := f.live[id]; l != nil {
		return nil, l, nil
	}
	if b, ok := f.logs[id]; ok {
		return b, nil, nil
	}
	return nil, nil, fmt.Errorf("%w: %s", daemon.ErrUnknownUpdate, id)
}

func (f *fakeAPI) Reload() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reloads++
	return f.reloadErr
}

func (f *fakeAPI) ReloadAllowingRemoval(n int) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reloads++
	f.allowed = append(f.allowed, n)
	return f.reloadErr
}

func (f *fakeAPI) ConfigStatus() model.ConfigStatus {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.config
}

func (f *fakeAPI) Push(urls []string, branch string) model.PushResult {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pushes = append(f.pushes, pushCall{urls, branch})
	return f.pushed
}

// ConfigRevisions pages revisions as the store does.
func (f *fakeAPI) ConfigRevisions(before uint64, limit int) ([]model.ConfigRevision, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []model.ConfigRevision
	for _, r := range f.revisions {
		if (before == 0 || r.Seq < before) && len(out) < limit {
			out = append(out, r)
		}
	}
	return out, nil
}

func (f *fakeAPI) Backup(w io.Writer) (int64, error) {
	n, err := w.Write([]byte("bolt file"))
	return int64(n), err
}

func (f *fakeAPI) Pause() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stats.Paused = true
	return f.stats.Running
}

func (f *fakeAPI) Resume() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stats.Paused = false
}

func (f *fakeAPI) RemoteLog(id string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.remote[id]
}

func (f *fakeAPI) ClusterStatus() (model.ClusterStatus, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.cluster, f.cluster.Node != ""
}

func (f *fakeAPI) Stats() model.Stats {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.stats
}

// calls returns how many syncs, reloads and pushes the API saw.
func (f *fakeAPI) calls() (synced, reloads, pushes int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.synced), f.reloads, len(f.pushes)
}

func startServer(t *testing.T, api API) string {
	t.Helper()
	_, url := startWith(t, Options{API: api})
	return url
}

// startWith starts a server on a loopback port; tune, if given, changes
// the server before it starts.
func startWith(t *testing.T, opts Options, tune ...func(*Server)) (*Server, string) {
	t.Helper()
	opts.Addr = "127.0.0.1:0"
	s := New(opts)
	for _, f := range tune {
		f(s)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Stop(context.Background()) })
	return s, "http://" + s.Addr()
}

// send makes a request with the given headers and body and returns the
// response with its body read.
func send(t *testing.T, method, url string, header http.Header, body string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, data
}

// callWith is call with headers and a body.
func callWith(t *testing.T, method, url string, header http.Header, body string) (int, map[string]any) {
	t.Helper()
	resp, data := send(t, method, url, header, body)
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("%s %s: Content-Type %q", method, url, ct)
	}
	var v map[string]any
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatalf("%s %s: %v\n%s", method, url, err, data)
	}
	return resp.StatusCode, v
}

func call(t *testing.T, method, url string) (int, map[string]any) {
	t.Helper()
	return callWith(t, method, url, nil, "")
}

func TestAPI(t *testing.T) {
	api := &fakeAPI{logs: map[string][]byte{}}
	url := startServer(t, api)
	tests := []struct {
		method, path string
		code         int
		check        func(map[string]any) bool
	}{
		{"GET", "/healthz", 200, func(v map[string]any) bool { return v["status"] == "ok" }},
		{"GET", "/readyz", 200, func(v map[string]any) bool { return v["status"] == "ready" }},
		{"GET", "/api/v1/stacks", 200, func(v map[string]any) bool { return len(v["stacks"].([]any)) == 1 }},
		{"GET", "/api/v1/stacks/app", 200, func(v map[string]any) bool { return v["name"] == "app" }},
		{"GET", "/api/v1/stacks/nope", 404, func(v map[string]any) bool { return v["error"] == "unknown stack" }},
		{"POST", "/api/v1/stacks/app/sync", 202, func(v map[string]any) bool { return v["request"] == "token-1" }},
		{"POST", "/api/v1/stacks/nope/sync", 404, func(v map[string]any) bool { return v["error"] != nil }},
		{"GET", "/api/v1/stacks/app/updates", 200, func(v map[string]any) bool { return len(v["updates"].([]any)) == 0 && v["next"] == nil }},
		{"GET", "/api/v1/stacks/nope/updates", 404, func(v map[string]any) bool { return v["error"] == "unknown stack" }},
		{"GET", "/api/v1/updates/nope-1/log", 404, func(v map[string]any) bool { return v["error"] == "unknown update: nope-1" }},
		{"POST", "/api/v1/reload", 200, func(v map[string]any) bool { return v["status"] == "reloaded" }},
		{"POST", "/api/v1/webhooks/git", 404, func(v map[string]any) bool { return v["error"] == "webhooks are not configured" }},
		{"GET", "/api/v1/nothing", 404, func(v map[string]any) bool { return v["error"] != nil }},
	}
	for _, tt := range tests {
		code, v := call(t, tt.method, url+tt.path)
		if code != tt.code || !tt.check(v) {
			t.Errorf("%s %s = %d %v, want %d", tt.method, tt.path, code, v, tt.code)
		}
	}
	if synced, reloads, _ := api.calls(); synced != 1 || reloads != 1 {
		t.Fatalf("sync calls = %d, reloads = %d", synced, reloads)
	}
}

func TestNotReady(t *testing.T) {
	url := startServer(t, &fakeAPI{ready: errors.New("starting")})
	if code, v := call(t, "GET", url+"/readyz"); code != 503 || v["error"] != "starting" {
		t.Fatalf("readyz = %d %v", code, v)
	}
}

// TestReloadError: a config with problems is a 422 naming them.
func TestReloadError(t *testing.T) {
	problems := "config not applied: stacks.yaml:3:5: spec.stack is required"
	url := startServer(t, &fakeAPI{reloadErr: errors.New(problems)})
	if code, v := call(t, "POST", url+"/api/v1/reload"); code != 422 || v["error"] != problems {
		t.Fatalf("reload = %d %v", code, v)
	}
	if code, _ := call(t, "GET", url+"/api/v1/reload"); code != 404 {
		t.Fatalf("GET reload = %d, want 404", code)
	}
}

// TestUpdatesPages walks a history of 120 updates a page at a time.
func TestUpdatesPages(t *testing.T) {
	api := &fakeAPI{}
	start := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	for seq := uint64(120); seq >= 1; seq-- {
		api.updates = append(api.updates, model.Update{ID: fmt.Sprintf("app-%d", seq), Stack: "app", Seq: seq,
			Type: model.UpdateUp, Reason: "New commit detected", Commit: "abc123", StartTime: start,
			EndTime: start.Add(time.Minute), State: model.UpdateSucceeded, Changes: map[string]int{"create": 2}})
	}
	url := startServer(t, api)

	var seqs []float64
	path, pages := "/api/v1/stacks/app/updates", 0
	for {
		code, v := call(t, "GET", url+path)
		if code != 200 {
			t.Fatalf("%s = %d %v", path, code, v)
		}
		pages++
		for _, u := range v["updates"].([]any) {
			seqs = append(seqs, u.(map[string]any)["seq"].(float64))
		}
		next, ok := v["next"].(string)
		if !ok {
			break
		}
		path = "/api/v1/stacks/app/updates?before=" + next
	}
	if pages != 6 || len(seqs) != 120 || seqs[0] != 120 || seqs[119] != 1 {
		t.Fatalf("pages = %d, seqs = %v", pages, seqs)
	}

	code, v := call(t, "GET", url+"/api/v1/stacks/app/updates?limit=1000")
	if code != 200 || len(v["updates"].([]any)) != maxUpdates || v["next"] != "21" {
		t.Fatalf("limit=1000 = %d, %d updates, next %v", code, len(v["updates"].([]any)), v["next"])
	}
	code, v = call(t, "GET", url+"/api/v1/stacks/app/updates?limit=2&before=10")
	first := v["updates"].([]any)[0].(map[string]any)
	if code != 200 || first["id"] != "app-9" || first["reason"] != "New commit detected" || first["commit"] != "abc123" ||
		first["changes"].(map[string]any)["create"] != 2.0 || first["endTime"] == nil || v["next"] != "8" {
		t.Fatalf("before=10 = %d %v", code, v)
	}
	for _, q := range []string{"limit=0", "limit=x", "before=-1"} {
		if code, _ := call(t, "GET", url+"/api/v1/stacks/app/updates?"+q); code != 400 {
			t.Errorf("?%s = %d, want 400", q, code)
		}
	}
}

// TestConfigAPI: GET /api/v1/config is the daemon's ConfigStatus.
func TestConfigAPI(t *testing.T) {
	applied := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	api := &fakeAPI{config: model.ConfigStatus{Successful: true, LastSuccess: applied, LastAttempt: applied,
		Health: &model.Health{Status: model.HealthHealthy},
		Sources: []model.SourceStatus{{Source: "git+https://github.com/acme/infra.git//stacks?ref=main",
			Git:    &spec.GitDir{URL: "https://github.com/acme/infra.git", Path: "stacks", Ref: "main"},
			Commit: strings.Repeat("a", 40), LatestCommit: strings.Repeat("a", 40), LastPoll: applied, AppliedAt: applied,
			Stacks: 2, Health: model.Health{Status: model.HealthHealthy}}}}}
	url := startServer(t, api)
	code, v := call(t, "GET", url+"/api/v1/config")
	if code != 200 || v["successful"] != true || v["health"].(map[string]any)["status"] != "Healthy" {
		t.Fatalf("config = %d %v", code, v)
	}
	src := v["sources"].([]any)[0].(map[string]any)
	if src["source"] != "git+https://github.com/acme/infra.git//stacks?ref=main" || src["git"].(map[string]any)["ref"] != "main" ||
		src["commit"] != strings.Repeat("a", 40) || src["stacks"] != 2.0 || src["appliedAt"] != "2025-01-02T03:04:05Z" {
		t.Fatalf("config source = %v", src)
	}
	if code, _ := call(t, "POST", url+"/api/v1/config"); code != 404 {
		t.Fatalf("POST config = %d, want 404", code)
	}
}

// TestRevisionsPages walks 45 config revisions a page at a time, as
// TestUpdatesPages walks updates.
func TestRevisionsPages(t *testing.T) {
	api := &fakeAPI{}
	start := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	for seq := uint64(45); seq >= 1; seq-- {
		api.revisions = append(api.revisions, model.ConfigRevision{Seq: seq, Time: start.Add(time.Duration(seq) * time.Minute),
			Trigger: "git", Applied: seq%2 == 0, Sources: []model.RevisionSource{{Source: "git+https://x/r.git", Commit: strings.Repeat("b", 40)}},
			Added: []string{"app"}})
	}
	url := startServer(t, api)

	var seqs []float64
	path, pages := "/api/v1/config/revisions", 0
	for {
		code, v := call(t, "GET", url+path)
		if code != 200 {
			t.Fatalf("%s = %d %v", path, code, v)
		}
		pages++
		for _, r := range v["revisions"].([]any) {
			seqs = append(seqs, r.(map[string]any)["seq"].(float64))
		}
		next, ok := v["next"].(string)
		if !ok {
			break
		}
		path = "/api/v1/config/revisions?before=" + next
	}
	if pages != 3 || len(seqs) != 45 || seqs[0] != 45 || seqs[44] != 1 {
		t.Fatalf("pages = %d, seqs = %v", pages, seqs)
	}
	code, v := call(t, "GET", url+"/api/v1/config/revisions?limit=2&before=10")
	first := v["revisions"].([]any)[0].(map[string]any)
	if code != 200 || first["seq"] != 9.0 || first["trigger"] != "git" || first["applied"] != false ||
		first["sources"].([]any)[0].(map[string]any)["commit"] != strings.Repeat("b", 40) || v["next"] != "8" {
		t.Fatalf("before=10 = %d %v", code, v)
	}
	for _, q := range []string{"limit=0", "limit=x", "before=-1"} {
		if code, _ := call(t, "GET", url+"/api/v1/config/revisions?"+q); code != 400 {
			t.Errorf("?%s = %d, want 400", q, code)
		}
	}
	// No revisions: an empty list, no next.
	code, v = call(t, "GET", startServer(t, &fakeAPI{})+"/api/v1/config/revisions")
	if revs, ok := v["revisions"].([]any); code != 200 || !ok || len(revs) != 0 || v["next"] != nil {
		t.Fatalf("no revisions = %d %v", code, v)
	}
}

// TestRevisionsError: a store error is a 500 naming it.
func TestRevisionsError(t *testing.T) {
	url := startServer(t, failingRevisions{&fakeAPI{}})
	if code, v := call(t, "GET", url+"/api/v1/config/revisions"); code != 500 || v["error"] != "store: closed" {
		t.Fatalf("revisions = %d %v", code, v)
	}
}

// failingRevisions is an API whose store cannot list revisions.
type failingRevisions struct{ *fakeAPI }

func (failingRevisions) ConfigRevisions(uint64, int) ([]model.ConfigRevision, error) {
	return nil, errors.New("store: closed")
}

// TestDrainAnswersReadsOnly: once draining, the server answers reads
// (/healthz "stopping" with the operations waited for, the API) and
// refuses writes with 503 and Retry-After; /readyz is 503.
func TestDrainAnswersReadsOnly(t *testing.T) {
	api := &fakeAPI{stacks: []model.StackView{{Name: "app"}},
		config: model.ConfigStatus{Stopping: true, WaitingFor: []string{"app (app-3)"}}}
	s, url := startWith(t, Options{API: api})
	s.Drain()
	get := func(path string, v any) int {
		t.Helper()
		resp, err := http.Get(url + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if v != nil {
			_ = json.NewDecoder(resp.Body).Decode(v)
		}
		return resp.StatusCode
	}
	var health map[string]any
	if code := get("/healthz", &health); code != http.StatusOK || health["status"] != "stopping" || health["operations"] != 1.0 {
		t.Fatalf("/healthz: %d %v", code, health)
	}
	if code := get("/readyz", nil); code != http.StatusServiceUnavailable {
		t.Fatalf("/readyz: %d", code)
	}
	if code := get("/api/v1/stacks/app", nil); code != http.StatusOK {
		t.Fatalf("a read: %d", code)
	}
	for _, path := range []string{"/api/v1/stacks/app/sync", "/api/v1/reload", "/api/v1/webhooks/git"} {
		resp, err := http.Post(url+path, "application/json", strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
			t.Errorf("POST %s while draining: %d, Retry-After %q", path, resp.StatusCode, resp.Header.Get("Retry-After"))
		}
	}
	if synced, reloads, _ := api.calls(); synced != 0 || reloads != 0 {
		t.Fatalf("a write reached the daemon: %d syncs, %d reloads", synced, reloads)
	}
}

// TestMetricsRoute: GET /metrics serves the registry, through the
// metrics' cache when they are set; a server without a registry has no
// /metrics.
func TestMetricsRoute(t *testing.T) {
	api := &fakeAPI{}
	reg := prometheus.NewRegistry()
	m := metrics.New(reg, api, "1.2.3")
	for _, opts := range []Options{{API: api, Registry: reg}, {API: api, Registry: reg, Metrics: m}} {
		_, url := startWith(t, opts)
		if body := webtest.Scrape(t, url); !strings.Contains(body, `version="1.2.3"} 1`) {
			t.Errorf("/metrics lacks stackd_build_info:\n%s", body)
		}
	}
	_, url := startWith(t, Options{API: &fakeAPI{}})
	if resp, _ := send(t, "GET", url+"/metrics", nil, ""); resp.StatusCode != 404 {
		t.Fatalf("/metrics without a registry = %d", resp.StatusCode)
	}
}

// TestClusterAPI: /api/v1/cluster serves the cluster's status, and a
// single node has none.
func TestClusterAPI(t *testing.T) {
	cluster := model.ClusterStatus{Node: "node-1", Session: true, Leader: "node-2", Moves: 4, SessionsLost: 1,
		Members: []model.ClusterMember{{Name: "node-1", Stacks: 2}, {Name: "node-2", Stacks: 1}}}
	_, url := startWith(t, Options{API: &fakeAPI{cluster: cluster}})
	resp, got := send(t, "GET", url+"/api/v1/cluster", nil, "")
	var st model.ClusterStatus
	if err := json.Unmarshal(got, &st); resp.StatusCode != 200 || err != nil || !reflect.DeepEqual(st, cluster) {
		t.Errorf("/api/v1/cluster = %d %s (%v), want %+v", resp.StatusCode, got, err, cluster)
	}
	_, single := startWith(t, Options{API: &fakeAPI{}})
	if resp, _ := send(t, "GET", single+"/api/v1/cluster", nil, ""); resp.StatusCode != 404 {
		t.Errorf("/api/v1/cluster of a single node = %d, want 404", resp.StatusCode)
	}
}
