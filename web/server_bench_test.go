package web

import (
	"encoding/json"
	"fmt"
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

	"github.com/stackd/stackd/daemon/livelog"
	"github.com/stackd/stackd/daemon/model"
	"github.com/stackd/stackd/web/metrics"
)

// recordingAPI wraps an API and knows whether one of its calls is in
// flight, so that a test can tell whether a handler writes its response
// while it still holds the daemon (and, through it, a store transaction).
type recordingAPI struct {
	API
	inCall atomic.Int32
	calls  atomic.Int64
}

// enter marks a call in flight until the returned func is called.
func (r *recordingAPI) enter() func() {
	r.inCall.Add(1)
	r.calls.Add(1)
	return func() { r.inCall.Add(-1) }
}

func (r *recordingAPI) Stacks() []model.StackView { defer r.enter()(); return r.API.Stacks() }
func (r *recordingAPI) StackVersions() []model.StackVersion {
	defer r.enter()()
	return r.API.StackVersions()
}
func (r *recordingAPI) Stack(name string) (model.StackView, error) {
	defer r.enter()()
	return r.API.Stack(name)
}
func (r *recordingAPI) Sync(name string) (string, error) { defer r.enter()(); return r.API.Sync(name) }
func (r *recordingAPI) Ready() error                     { defer r.enter()(); return r.API.Ready() }
func (r *recordingAPI) Updates(stack string, before uint64, limit int) ([]model.Update, error) {
	defer r.enter()()
	return r.API.Updates(stack, before, limit)
}
func (r *recordingAPI) Update(id string) (model.Update, error) {
	defer r.enter()()
	return r.API.Update(id)
}
func (r *recordingAPI) Log(id string) ([]byte, *livelog.Log, error) {
	defer r.enter()()
	return r.API.Log(id)
}
func (r *recordingAPI) Reload() error { defer r.enter()(); return r.API.Reload() }
func (r *recordingAPI) ReloadAllowingRemoval(n int) error {
	defer r.enter()()
	return r.API.ReloadAllowingRemoval(n)
}
func (r *recordingAPI) ConfigStatus() model.ConfigStatus {
	defer r.enter()()
	return r.API.ConfigStatus()
}
func (r *recordingAPI) Push(urls []string, branch string) model.PushResult {
	defer r.enter()()
	return r.API.Push(urls, branch)
}
func (r *recordingAPI) ConfigRevisions(before uint64, limit int) ([]model.ConfigRevision, error) {
	defer r.enter()()
	return r.API.ConfigRevisions(before, limit)
}
func (r *recordingAPI) Stats() model.Stats         { defer r.enter()(); return r.API.Stats() }
func (r *recordingAPI) RemoteLog(id string) string { defer r.enter()(); return r.API.RemoteLog(id) }
func (r *recordingAPI) Backup(w io.Writer) (int64, error) {
	defer r.enter()()
	return r.API.Backup(w)
}
func (r *recordingAPI) Pause() int { defer r.enter()(); return r.API.Pause() }
func (r *recordingAPI) Resume()    { defer r.enter()(); r.API.Resume() }
func (r *recordingAPI) ClusterStatus() (model.ClusterStatus, bool) {
	defer r.enter()()
	return r.API.ClusterStatus()
}

// checkWriter counts the writes made while an API call is in flight.
type checkWriter struct {
	http.ResponseWriter
	api        *recordingAPI
	violations *atomic.Int64
}

func (w *checkWriter) check() {
	if w.api.inCall.Load() > 0 {
		w.violations.Add(1)
	}
}

func (w *checkWriter) WriteHeader(code int) { w.check(); w.ResponseWriter.WriteHeader(code) }

func (w *checkWriter) Write(p []byte) (int, error) { w.check(); return w.ResponseWriter.Write(p) }

func (w *checkWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// gatherCheck serves each request in turn, one at a time (so an API call
// in flight can only be the request's own), through a handler whose
// ResponseWriter counts writes made during an API call. It fails if any
// request wrote during a call or made no call at all.
func gatherCheck(tb testing.TB, s *Server, api *recordingAPI, reqs []*http.Request) {
	tb.Helper()
	var violations atomic.Int64
	h := s.Handler()
	for _, r := range reqs {
		before := api.calls.Load()
		rec := httptest.NewRecorder()
		h.ServeHTTP(&checkWriter{ResponseWriter: rec, api: api, violations: &violations}, r)
		if api.calls.Load() == before || rec.Body.Len() == 0 {
			tb.Fatalf("%s %s made no API call or wrote nothing (%d)", r.Method, r.URL, rec.Code)
		}
		if n := violations.Load(); n > 0 {
			tb.Fatalf("%s %s wrote %d times while an API call was in flight", r.Method, r.URL, n)
		}
	}
}

// gatherRequests are a request to each endpoint that reads the API.
func gatherRequests(stack string) []*http.Request {
	return []*http.Request{
		httptest.NewRequest("GET", "/readyz", nil),
		httptest.NewRequest("GET", "/api/v1/stacks", nil),
		httptest.NewRequest("GET", "/api/v1/stacks/"+stack, nil),
		httptest.NewRequest("GET", "/api/v1/stacks/nope", nil),
		httptest.NewRequest("GET", "/api/v1/stacks/"+stack+"/updates", nil),
		httptest.NewRequest("GET", "/api/v1/updates/"+stack+"-1/log", nil),
		httptest.NewRequest("GET", "/api/v1/config", nil),
		httptest.NewRequest("GET", "/api/v1/config/revisions", nil),
		httptest.NewRequest("GET", "/", nil),
		httptest.NewRequest("GET", "/config", nil),
		httptest.NewRequest("GET", "/metrics", nil),
		httptest.NewRequest("POST", "/api/v1/stacks/"+stack+"/sync", nil),
		httptest.NewRequest("POST", "/api/v1/reload", nil),
	}
}

// TestHandlersGatherBeforeWriting: every handler has the data it needs
// from the API before it writes a byte of its response.
func TestHandlersGatherBeforeWriting(t *testing.T) {
	api := &recordingAPI{API: &fakeAPI{stacks: manyStacks(50), logs: map[string][]byte{"stack-0001-1": []byte("log\n")}}}
	reg := prometheus.NewRegistry()
	metrics.New(reg, api, "test")
	gatherCheck(t, New(Options{API: api, Registry: reg, AllowedHosts: []string{"example.com"}}), api, gatherRequests("stack-0001")) // httptest's host

	// The check itself catches a write during a call.
	var violations atomic.Int64
	w := &checkWriter{ResponseWriter: httptest.NewRecorder(), api: api, violations: &violations}
	done := api.enter()
	_, _ = w.Write([]byte("x"))
	done()
	if violations.Load() != 1 {
		t.Fatal("a write during an API call went unnoticed")
	}
}

// manyStacks are n stacks shaped like the daemon's: a spec, conditions,
// outputs, a last update and a health.
func manyStacks(n int) []model.StackView {
	now := time.Now().UTC()
	out := make([]model.StackView, n)
	for i := range out {
		name := fmt.Sprintf("stack-%04d", i)
		out[i] = model.StackView{
			Name: name,
			Spec: map[string]any{"stack": "acme/infra/" + name, "projectRepo": "https://github.com/acme/infra",
				"branch": "main", "repoDir": "stacks/" + name, "refresh": true, "resyncFrequencySeconds": 60,
				"envRefs": map[string]any{"AWS_REGION": map[string]any{"type": "Literal", "literal": map[string]any{"value": "[secret]"}}}},
			Tracking:    "https://github.com/acme/infra@main",
			LastSuccess: now,
			Status: model.StackStatus{
				ObservedGeneration: 3,
				Conditions: []model.Condition{{Type: model.ConditionReady, Status: "True", Reason: "ProcessingCompleted",
					Message: "the stack has been processed and is up to date", ObservedGeneration: 3, LastTransitionTime: now}},
				Outputs: map[string]json.RawMessage{"url": json.RawMessage(`"https://` + name + `.example"`), "replicas": json.RawMessage("3")},
				LastUpdate: &model.LastUpdate{Generation: 3, Name: name + "-42", Type: model.UpdateUp, State: model.UpdateSucceeded,
					Message: "update succeeded", LastAttemptedCommit: strings.Repeat("a", 40), LastSuccessfulCommit: strings.Repeat("a", 40),
					LastResyncTime: now},
				Health: &model.Health{Status: "Healthy"},
			},
		}
	}
	return out
}

// BenchmarkServe1000Stacks and BenchmarkServe10000Stacks serve the
// stack list (full and summary views, and a page of 100 summaries), a
// stack's API view and its UI page, the UI's list, and GET /metrics to 8
// concurrent clients over loopback, and report the p50 and p99 latency
// of each. Before the load, they check that no handler writes while an
// API call is in flight.
func BenchmarkServe1000Stacks(b *testing.B)  { benchServe(b, 1000) }
func BenchmarkServe10000Stacks(b *testing.B) { benchServe(b, 10000) }

func benchServe(b *testing.B, n int) {
	api := &recordingAPI{API: &fakeAPI{stacks: manyStacks(n), logs: map[string][]byte{"stack-0001-1": []byte("log\n")}, unchanging: true}}
	reg := prometheus.NewRegistry()
	s := New(Options{Addr: "127.0.0.1:0", API: api, Registry: reg, Metrics: metrics.New(reg, api, "bench"), AllowedHosts: []string{"example.com"}}) // httptest's host
	gatherCheck(b, s, api, gatherRequests("stack-0001"))
	if err := s.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Stop(b.Context()) })
	url := "http://" + s.Addr()
	for _, bm := range []struct {
		name  string
		paths []string
	}{
		{"list-full", []string{"/api/v1/stacks"}},
		{"list-summary", []string{"/api/v1/stacks?view=summary"}},
		{"list-summary-page", []string{"/api/v1/stacks?view=summary&limit=100&after=stack-0500"}},
		{"stack-api", []string{"/api/v1/stacks/stack-0500"}},
		{"stack-page", []string{"/stacks/stack-0500"}},
		{"ui-list", []string{"/"}},
		{"metrics", []string{"/metrics"}},
	} {
		b.Run(bm.name, func(b *testing.B) { loadTest(b, url, bm.paths) })
	}
}

// loadTest GETs paths in turn from concurrent clients and reports each
// path's p50 and p99 latency in milliseconds.
func loadTest(b *testing.B, url string, paths []string) {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}}
	defer client.CloseIdleConnections()
	var mu sync.Mutex
	took := map[string][]time.Duration{}
	var worker atomic.Int64
	b.SetParallelism(4)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		local := map[string][]time.Duration{}
		for i := int(worker.Add(1)); pb.Next(); i++ {
			path := paths[i%len(paths)]
			start := time.Now()
			if err := get(client, url+path); err != nil {
				b.Error(err)
				return
			}
			local[path] = append(local[path], time.Since(start))
		}
		mu.Lock()
		defer mu.Unlock()
		for p, d := range local {
			took[p] = append(took[p], d...)
		}
	})
	b.StopTimer()
	for _, path := range paths {
		prefix := ""
		if len(paths) > 1 {
			prefix = strings.Trim(strings.ReplaceAll(path, "/", "_"), "_") + "-"
		}
		p50, p99 := percentiles(took[path])
		b.ReportMetric(p50, prefix+"p50-ms")
		b.ReportMetric(p99, prefix+"p99-ms")
	}
}

func get(client *http.Client, url string) error {
	resp, err := client.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return nil
}

// percentiles returns the 50th and 99th percentiles of d in milliseconds.
func percentiles(d []time.Duration) (p50, p99 float64) {
	if len(d) == 0 {
		return 0, 0
	}
	slices.Sort(d)
	at := func(q int) float64 { return float64(d[min(len(d)*q/100, len(d)-1)]) / float64(time.Millisecond) }
	return at(50), at(99)
}
