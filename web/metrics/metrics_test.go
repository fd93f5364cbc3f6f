package metrics

import (
	"encoding/json"
	"errors"
	"hash/fnv"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/stackd/stackd/daemon"
	"github.com/stackd/stackd/daemon/model"
	"github.com/stackd/stackd/daemon/spec"
	"github.com/stackd/stackd/web/webtest"
)

const failingCommit = "0123456789abcdef0123456789abcdef01234567"

// metricStacks are three stacks: ready, failing twice and stalled, and
// reconciling for the first time.
func metricStacks() []model.StackView {
	success := time.Unix(1_700_000_000, 0)
	cond := func(typ, status string) model.Condition {
		return model.Condition{Type: typ, Status: status, Reason: "R", Message: "exit status 1: " + failingCommit}
	}
	return []model.StackView{
		{Name: "app", LastSuccess: success, Status: model.StackStatus{
			Conditions: []model.Condition{cond(model.ConditionReady, "True")},
			LastUpdate: &model.LastUpdate{State: model.UpdateSucceeded, LastSuccessfulCommit: failingCommit}}},
		{Name: "db", LastSuccess: success, Status: model.StackStatus{
			Conditions: []model.Condition{cond(model.ConditionReady, "False"), cond(model.ConditionStalled, "True")},
			LastUpdate: &model.LastUpdate{State: model.UpdateFailed, Failures: 2, LastAttemptedCommit: failingCommit,
				Message: "error: permission denied"}}},
		{Name: "new", Status: model.StackStatus{
			Conditions:   []model.Condition{cond(model.ConditionReady, "False"), cond(model.ConditionReconciling, "True")},
			ChangeWindow: &model.ChangeWindowStatus{Change: "commit", NextOpen: time.Unix(1_700_003_600, 0), Windows: []string{`deny window "freeze"`}}}},
	}
}

// fakeState is a daemon of the stacks, scheduler, config and cluster the
// test sets; a stack's version is its view's content hash.
type fakeState struct {
	mu      sync.Mutex
	stacks  []model.StackView
	stats   model.Stats
	config  model.ConfigStatus
	cluster model.ClusterStatus // a single node while Node is empty
}

func (f *fakeState) StackVersions() []model.StackVersion {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]model.StackVersion, len(f.stacks))
	for i, v := range f.stacks {
		h := fnv.New64a()
		_ = json.NewEncoder(h).Encode(v)
		out[i] = model.StackVersion{Name: v.Name, Version: h.Sum64(), Holder: v.Holder}
	}
	return out
}

func (f *fakeState) Stack(name string) (model.StackView, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if i := slices.IndexFunc(f.stacks, func(v model.StackView) bool { return v.Name == name }); i >= 0 {
		return f.stacks[i], nil
	}
	return model.StackView{}, daemon.ErrUnknownStack
}

func (f *fakeState) Stats() model.Stats {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.stats
}

func (f *fakeState) ConfigStatus() model.ConfigStatus {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.config
}

func (f *fakeState) ClusterStatus() (model.ClusterStatus, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.cluster, f.cluster.Node != ""
}

// serve serves reg at GET /metrics as package web does: through m's
// cache when m is set. It returns the server's URL.
func serve(t *testing.T, reg *prometheus.Registry, m *Metrics) string {
	t.Helper()
	var h http.Handler = promhttp.HandlerFor(reg, promhttp.HandlerOpts{CoalesceGather: true})
	if m != nil {
		h = m.Cached(h)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", h)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestMetrics(t *testing.T) {
	api := &fakeState{stacks: metricStacks(), stats: model.Stats{Running: 1, Queued: 2},
		config: model.ConfigStatus{Successful: false, LastSuccess: time.Unix(1_700_000_100, 0), Error: "stacks.yaml:1:1: bad",
			Policies: &model.PolicyStatus{Source: "policies", Error: "policies/files.rego:3:1: bad"}}}
	reg := prometheus.NewPedanticRegistry() // checks what collectors emit against what they describe
	m := New(reg, nil, "1.2.3")
	m.SetAPI(api)
	start := time.Now()
	m.UpdateFinished(model.Update{Type: model.UpdateUp, State: model.UpdateSucceeded, StartTime: start, EndTime: start.Add(90 * time.Second), Commit: failingCommit})
	m.UpdateFinished(model.Update{Type: model.UpdateUp, State: model.UpdateFailed, StartTime: start, EndTime: start.Add(time.Second), Message: "error: permission denied"})
	m.Polled(nil, 200*time.Millisecond)
	m.Polled(errors.New("dial tcp: refused"), time.Second)
	m.CommitApplied(2 * time.Minute)
	m.ConfigReloaded(api.ConfigStatus())
	m.ResourcesExportFailed("db")
	m.PolicyEvaluated("app", model.PolicyVerdict{
		Deny: []model.Violation{{Policy: "stackd.files", Level: model.PolicyDeny, Message: "deleting /srv/data is denied"}},
		Warn: []model.Violation{{Policy: "stackd.files", Level: model.PolicyWarn, Message: "a"}, {Policy: "stackd.tags", Level: model.PolicyWarn, Message: "b"}},
	})
	url := serve(t, reg, nil)

	body := webtest.Scrape(t, url)
	for _, want := range []string{
		`stackd_build_info{goversion="go`,
		`version="1.2.3"} 1`,
		"stackd_stacks 3",
		`stackd_stack_ready{stack="app"} 1`,
		"stackd_resource_export_failures_total 1",
		`stackd_stack_ready{stack="db"} 0`,
		`stackd_stack_reconciling{stack="new"} 1`,
		`stackd_stack_stalled{stack="db"} 1`,
		`stackd_stack_stalled{stack="app"} 0`,
		`stackd_stack_failing{stack="db"} 1`,
		`stackd_stack_failing{stack="app"} 0`,
		`stackd_stack_consecutive_failures{stack="db"} 2`,
		`stackd_stack_consecutive_failures{stack="new"} 0`,
		`stackd_stack_last_success_timestamp_seconds{stack="app"} 1.7e+09`,
		`stackd_stack_change_window_closed{stack="app"} 0`,
		`stackd_stack_change_window_closed{stack="new"} 1`,
		`stackd_stack_change_window_next_open_timestamp_seconds{stack="new"} 1.7000036e+09`,
		`stackd_updates_total{result="succeeded",type="up"} 1`,
		`stackd_updates_total{result="failed",type="up"} 1`,
		`stackd_updates_total{result="failed",type="destroy"} 0`,
		`stackd_update_duration_seconds_bucket{type="up",le="120"} 2`,
		`stackd_update_duration_seconds_count{type="preview"} 0`,
		`stackd_git_polls_total{result="success"} 1`,
		`stackd_git_polls_total{result="error"} 1`,
		"stackd_git_poll_duration_seconds_count 2",
		"stackd_commit_seen_to_applied_seconds_count 1",
		"stackd_queue_depth 2",
		"stackd_operations_running 1",
		"stackd_config_last_reload_successful 0",
		"stackd_config_last_reload_success_timestamp_seconds 1.7000001e+09",
		"stackd_policy_last_reload_successful 0",
		`stackd_policy_violations_total{level="deny",policy="stackd.files",stack="app"} 1`,
		`stackd_policy_violations_total{level="warn",policy="stackd.files",stack="app"} 1`,
		`stackd_policy_violations_total{level="warn",policy="stackd.tags",stack="app"} 1`,
		"go_goroutines ",
		"process_start_time_seconds ",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	for _, never := range []string{failingCommit, "permission denied", "refused", "stacks.yaml", "/srv/data", "files.rego",
		`stackd_stack_last_success_timestamp_seconds{stack="new"}`, `stackd_stack_change_window_next_open_timestamp_seconds{stack="app"}`} {
		if strings.Contains(body, never) {
			t.Errorf("/metrics holds %q", never)
		}
	}

	// A stack that leaves the daemon leaves the per-stack series.
	api.mu.Lock()
	api.stacks = api.stacks[:1]
	api.mu.Unlock()
	body = webtest.Scrape(t, url)
	if strings.Contains(body, `stack="db"`) || strings.Contains(body, `stack="new"`) || !strings.Contains(body, "stackd_stacks 1") {
		t.Fatalf("removed stacks are still reported:\n%s", body)
	}
}

// TestMetricsWithoutAPI: until SetAPI, a scrape has no state gauges but
// is valid.
func TestMetricsWithoutAPI(t *testing.T) {
	reg := prometheus.NewRegistry()
	New(reg, nil, "")
	body := webtest.Scrape(t, serve(t, reg, nil))
	if strings.Contains(body, "stackd_stacks") || !strings.Contains(body, `version="unknown"`) {
		t.Fatalf("/metrics without an API:\n%s", body)
	}
}

// TestMetricsHealth: each stack with a known health and each config
// source report 1 for their health and 0 for the two others; sources
// report whether they fail, their stacks, and their poll and apply times
// when known. Commits and error text never become label values.
func TestMetricsHealth(t *testing.T) {
	stacks := metricStacks()
	stacks[0].Status.Health = &model.Health{Status: model.HealthHealthy}
	stacks[1].Status.Health = &model.Health{Status: model.HealthDegraded, Message: "error: permission denied"}
	gitSource := "git+https://github.com/acme/infra.git//stacks?ref=main"
	api := &fakeState{stacks: stacks, config: model.ConfigStatus{Successful: true, Sources: []model.SourceStatus{
		{Source: gitSource, Git: &spec.GitDir{URL: "https://github.com/acme/infra.git", Path: "stacks", Ref: "main"},
			Commit: failingCommit, LatestCommit: strings.Repeat("f", 40), LastPoll: time.Unix(1_700_000_200, 0),
			AppliedAt: time.Unix(1_700_000_100, 0), Error: "stacks/app.yaml:1:1: refused at " + failingCommit, Stacks: 2,
			Health: model.Health{Status: model.HealthDegraded, Message: "refused"}},
		{Source: "/etc/stackd/local.yaml", AppliedAt: time.Unix(1_700_000_000, 0), Stacks: 1,
			Health: model.Health{Status: model.HealthProgressing}},
		{Source: "/etc/stackd/local.yaml", Stacks: 7}, // named twice: reported once
	}}}
	reg := prometheus.NewPedanticRegistry()
	New(reg, api, "test")
	url := serve(t, reg, nil)

	body := webtest.Scrape(t, url)
	for _, want := range []string{
		`stackd_stack_health{health="Healthy",stack="app"} 1`,
		`stackd_stack_health{health="Progressing",stack="app"} 0`,
		`stackd_stack_health{health="Degraded",stack="app"} 0`,
		`stackd_stack_health{health="Degraded",stack="db"} 1`,
		`stackd_stack_health{health="Healthy",stack="db"} 0`,
		`stackd_config_source_health{health="Degraded",source="` + gitSource + `"} 1`,
		`stackd_config_source_health{health="Healthy",source="` + gitSource + `"} 0`,
		`stackd_config_source_health{health="Progressing",source="` + gitSource + `"} 0`,
		`stackd_config_source_health{health="Progressing",source="/etc/stackd/local.yaml"} 1`,
		`stackd_config_source_health{health="Degraded",source="/etc/stackd/local.yaml"} 0`,
		`stackd_config_source_failing{source="` + gitSource + `"} 1`,
		`stackd_config_source_failing{source="/etc/stackd/local.yaml"} 0`,
		`stackd_config_source_stacks{source="` + gitSource + `"} 2`,
		`stackd_config_source_stacks{source="/etc/stackd/local.yaml"} 1`,
		`stackd_config_source_last_poll_timestamp_seconds{source="` + gitSource + `"} 1.7000002e+09`,
		`stackd_config_source_applied_timestamp_seconds{source="` + gitSource + `"} 1.7000001e+09`,
		`stackd_config_source_applied_timestamp_seconds{source="/etc/stackd/local.yaml"} 1.7e+09`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	for _, never := range []string{failingCommit, strings.Repeat("f", 40), "permission denied", "refused",
		`stackd_stack_health{health="Healthy",stack="new"}`,
		`stackd_config_source_last_poll_timestamp_seconds{source="/etc/stackd/local.yaml"}`,
		`stackd_config_source_stacks{source="/etc/stackd/local.yaml"} 7`} {
		if strings.Contains(body, never) {
			t.Errorf("/metrics holds %q", never)
		}
	}

	// A source that leaves the config leaves its series.
	api.mu.Lock()
	api.config.Sources = api.config.Sources[1:2]
	api.mu.Unlock()
	if body = webtest.Scrape(t, url); strings.Contains(body, gitSource) {
		t.Fatalf("a removed source is still reported:\n%s", body)
	}
}

// TestMetricsCluster: a replica reports the per-stack series of the
// stacks it holds only, so that a sum over replicas counts each stack
// once, and the cluster's own metrics; a single node has none.
func TestMetricsCluster(t *testing.T) {
	stacks := metricStacks()
	stacks[0].Holder, stacks[1].Holder, stacks[2].Holder = "node-1", "node-2", "node-1"
	cluster := model.ClusterStatus{Node: "node-1", Session: true, Leader: "node-2", Moves: 4, SessionsLost: 1,
		Members: []model.ClusterMember{{Name: "node-1", Stacks: 2}, {Name: "node-2", Stacks: 1}}}
	api := &fakeState{stacks: stacks, cluster: cluster}
	reg := prometheus.NewRegistry()
	New(reg, api, "test")
	body := webtest.Scrape(t, serve(t, reg, nil))
	for _, want := range []string{
		`stackd_stack_ready{stack="app"} 1`, `stackd_stack_ready{stack="new"} 0`, "stackd_stacks 2",
		"stackd_cluster_members 2", "stackd_cluster_owned_stacks 2", "stackd_cluster_ownership_moves_total 4",
		"stackd_cluster_session_lost_total 1", "stackd_cluster_leader 0", "stackd_cluster_session 1",
	} {
		if !strings.Contains(body, want+"\n") {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if strings.Contains(body, `stack="db"`) {
		t.Error("/metrics reports db, which node-2 holds")
	}

	reg = prometheus.NewRegistry()
	New(reg, &fakeState{stacks: metricStacks()}, "test")
	if body := webtest.Scrape(t, serve(t, reg, nil)); strings.Contains(body, "stackd_cluster_") || !strings.Contains(body, "stackd_stacks 3\n") {
		t.Errorf("a single node's /metrics:\n%s", body)
	}
}

// countingCollector counts the gatherings of the registry it is in.
type countingCollector struct{ n *atomic.Int64 }

func (c countingCollector) Describe(chan<- *prometheus.Desc) {}
func (c countingCollector) Collect(chan<- prometheus.Metric) { c.n.Add(1) }

// TestMetricsServedAgainWhileUnchanged: scrapes of an unchanged state are
// served from one gathering; any change of a stack, a counter or a
// gauge of the daemon is in the very next scrape.
func TestMetricsServedAgainWhileUnchanged(t *testing.T) {
	api := &fakeState{stacks: metricStacks()}
	reg := prometheus.NewRegistry()
	var gathered atomic.Int64
	reg.MustRegister(countingCollector{&gathered})
	m := New(reg, api, "1.2.3")
	url := serve(t, reg, m)
	// A response is served again for maxAge at most: a gathering follows
	// the one before by more than that, so a busy machine that took long
	// for the scrapes may rightly gather more than once.
	start := time.Now()
	for range 5 {
		webtest.Scrape(t, url)
	}
	most := 1 + int64(time.Since(start)/maxAge)
	if n := gathered.Load(); n < 1 || n > most {
		t.Fatalf("5 scrapes of one state gathered %d times, want 1 (at most %d in the time they took)", n, most)
	}
	api.mu.Lock()
	api.stacks[0].Status.LastUpdate.State = model.UpdateFailed
	api.mu.Unlock()
	if body := webtest.Scrape(t, url); !strings.Contains(body, `stackd_stack_failing{stack="app"} 1`) {
		t.Errorf("a stack's change is not in the next scrape:\n%s", body)
	}
	m.Polled(nil, time.Millisecond)
	if body := webtest.Scrape(t, url); !strings.Contains(body, `stackd_git_polls_total{result="success"} 1`) {
		t.Errorf("a new poll is not in the next scrape")
	}
	api.mu.Lock()
	api.stats.Running = 3
	api.mu.Unlock()
	if body := webtest.Scrape(t, url); !strings.Contains(body, "stackd_operations_running 3") {
		t.Errorf("the scheduler's change is not in the next scrape")
	}
	time.Sleep(maxAge + 100*time.Millisecond)
	before := gathered.Load()
	webtest.Scrape(t, url)
	if gathered.Load() != before+1 {
		t.Errorf("a scrape older than %s was served again", maxAge)
	}
}

// gatedCollector counts its gatherings, and holds one while held is set,
// until release.
type gatedCollector struct {
	n       atomic.Int64
	held    atomic.Bool
	entered chan struct{}
	release chan struct{}
}

func (g *gatedCollector) Describe(chan<- *prometheus.Desc) {}
func (g *gatedCollector) Collect(chan<- prometheus.Metric) {
	g.n.Add(1)
	if g.held.Load() {
		g.entered <- struct{}{}
		<-g.release
	}
}

// TestMetricsKeptWhileMadeAgain: while a scrape older than maxAge is made
// again, the scrapes of the same state get the kept one rather than wait;
// the one made again is kept then.
func TestMetricsKeptWhileMadeAgain(t *testing.T) {
	api := &fakeState{stacks: metricStacks()}
	reg := prometheus.NewRegistry()
	g := &gatedCollector{entered: make(chan struct{}), release: make(chan struct{})}
	reg.MustRegister(g)
	url := serve(t, reg, New(reg, api, "1.2.3"))
	first := webtest.Scrape(t, url)
	time.Sleep(maxAge + 100*time.Millisecond)
	g.held.Store(true)
	again := make(chan error, 1)
	go func() {
		resp, err := http.Get(url + "/metrics")
		if err == nil {
			resp.Body.Close()
		}
		again <- err
	}()
	<-g.entered // the aged scrape is made again, and held
	g.held.Store(false)
	released := sync.OnceFunc(func() { close(g.release) })
	t.Cleanup(released)
	client := &http.Client{Timeout: 10 * time.Second}
	resp, err := client.Get(url + "/metrics")
	if err != nil {
		t.Fatalf("a scrape while the aged one is made again waited for it: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != first {
		t.Errorf("a scrape while the aged one is made again is not the kept one:\n%s", body)
	}
	if n := g.n.Load(); n != 2 {
		t.Errorf("gathered %d times, want 2: the first scrape and the one made again", n)
	}
	released()
	if err := <-again; err != nil {
		t.Fatal(err)
	}
	webtest.Scrape(t, url)
	if n := g.n.Load(); n != 2 {
		t.Errorf("gathered %d times, want 2: the scrape made again is not kept", n)
	}
}
