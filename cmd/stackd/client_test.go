package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stackd/stackd/daemon/model"
	"github.com/stackd/stackd/daemon/spec"
	"github.com/stackd/stackd/web/view"
)

// Commits of the fake daemon's config sources.
const (
	clientCommitA = "aaaaaaaaaaaa1111111111111111111111111111"
	clientCommitB = "bbbbbbbbbbbb2222222222222222222222222222"
)

// fakeDaemon serves the read endpoints "stackd status" uses, with one
// stack (full or summary view) and the given config, and records the
// paths asked for.
type fakeDaemon struct {
	mu     sync.Mutex
	paths  []string
	config model.ConfigStatus
}

func (f *fakeDaemon) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.paths = append(f.paths, r.URL.Path)
	f.mu.Unlock()
	app := model.StackView{Name: "app", Source: "/etc/stackd/stacks.yaml", Status: model.StackStatus{
		Health:     &model.Health{Status: model.HealthHealthy},
		Conditions: []model.Condition{{Type: model.ConditionReady, Status: "True", Reason: "ProcessingCompleted"}},
		LastUpdate: &model.LastUpdate{Type: model.UpdateUp, State: model.UpdateSucceeded,
			LastSuccessfulCommit: clientCommitA, LastResyncTime: time.Now().Add(-time.Hour)}}}
	var v any
	switch r.URL.Path {
	case "/api/v1/stacks":
		v = map[string]any{"stacks": []model.StackView{app}, "total": 1}
		if r.URL.Query().Get("view") == "summary" {
			v = map[string]any{"stacks": summaries(app), "total": 1}
		}
	case "/api/v1/stacks/app":
		v = app
	case "/api/v1/config":
		v = f.config
	default:
		w.WriteHeader(http.StatusNotFound)
		v = map[string]string{"error": "unknown stack"}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// startFakeDaemon serves a fakeDaemon with config on a loopback port.
func startFakeDaemon(t *testing.T, config model.ConfigStatus) (*fakeDaemon, string) {
	t.Helper()
	f := &fakeDaemon{config: config}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return f, srv.URL
}

// clientSources are a healthy Git source, a Git source whose latest
// commit is refused, and a local file.
var clientSources = []model.SourceStatus{
	{Source: "git+https://github.com/acme/infra.git//stacks?ref=main", Git: &spec.GitDir{URL: "https://github.com/acme/infra.git", Path: "stacks", Ref: "main"},
		Commit: clientCommitA, LatestCommit: clientCommitA, Stacks: 2, Health: model.Health{Status: model.HealthHealthy}},
	{Source: "git+git@github.com:acme/db.git", Git: &spec.GitDir{URL: "git@github.com:acme/db.git"},
		Commit: clientCommitA, LatestCommit: clientCommitB, Error: "db.yaml:3:5: spec.stack is required\ndb.yaml:9:1: unknown field", Stacks: 1,
		Health: model.Health{Status: model.HealthDegraded}},
	{Source: "/etc/stackd/stacks.yaml", Stacks: 1, Health: model.Health{Status: model.HealthProgressing}},
}

// TestClientStatusSources: "stackd status" prints a line per config
// source before the stack table.
func TestClientStatusSources(t *testing.T) {
	f, url := startFakeDaemon(t, model.ConfigStatus{Successful: true, Sources: clientSources})
	code, stdout, stderr := stackd(t, "status", "--server", url)
	if code != exitOK {
		t.Fatalf("status: exit %d: %s", code, stderr)
	}
	lines := strings.Split(stdout, "\n")
	if len(lines) < 7 {
		t.Fatalf("status:\n%s", stdout)
	}
	for i, want := range [][]string{
		{"HEALTH", "CONFIG SOURCE", "COMMIT", "ERROR"},
		{"Healthy", "git+https://github.com/acme/infra.git//stacks?ref=main", "aaaaaaaaaaaa"},
		{"Degraded", "git+git@github.com:acme/db.git", "aaaaaaaaaaaa → bbbbbbbbbbbb", "2 problems: db.yaml:3:5: spec.stack is required"},
		{"Progressing", "/etc/stackd/stacks.yaml", " -"},
		{""},
		{"NAME", "HEALTH", "COMMIT"},
		{"app", "Healthy", "aaaaaaa"},
	} {
		for _, w := range want {
			if !strings.Contains(lines[i], w) {
				t.Errorf("line %d %q lacks %q", i+1, lines[i], w)
			}
		}
	}
	if strings.Contains(stdout, "unknown field") || strings.Contains(stdout, clientCommitA) {
		t.Errorf("status shows more than an error's first line or a short commit:\n%s", stdout)
	}
	if strings.Contains(lines[1], "→") || strings.HasSuffix(lines[1], " ") {
		t.Errorf("an up-to-date source's line: %q", lines[1])
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if strings.Join(f.paths, " ") != "/api/v1/stacks /api/v1/cluster /api/v1/config" {
		t.Errorf("asked for %v", f.paths)
	}
}

// TestClientStatusNoSources: without config sources the output is the
// stack table alone, as before.
func TestClientStatusNoSources(t *testing.T) {
	_, url := startFakeDaemon(t, model.ConfigStatus{Successful: true})
	code, stdout, stderr := stackd(t, "status", "--server", url)
	if code != exitOK || !strings.HasPrefix(stdout, "NAME ") || !strings.Contains(stdout, "app ") {
		t.Fatalf("status: exit %d: %s\n%s", code, stderr, stdout)
	}
}

// TestClientStatusOneStack: "stackd status NAME" and --json print what
// they did and do not read the config.
func TestClientStatusOneStack(t *testing.T) {
	f, url := startFakeDaemon(t, model.ConfigStatus{Sources: clientSources})
	code, stdout, stderr := stackd(t, "status", "app", "--server", url)
	if code != exitOK || !strings.HasPrefix(stdout, "NAME ") || strings.Contains(stdout, "Degraded") {
		t.Fatalf("status app: exit %d: %s\n%s", code, stderr, stdout)
	}
	code, stdout, stderr = stackd(t, "status", "--json", "--server", url)
	var list struct{ Stacks []model.StackView } // the API's shape
	if err := json.Unmarshal([]byte(stdout), &list); code != exitOK || err != nil || len(list.Stacks) != 1 || list.Stacks[0].Source != "/etc/stackd/stacks.yaml" {
		t.Fatalf("status --json: exit %d, %v: %s\n%s", code, err, stderr, stdout)
	}
	if code, _, stderr = stackd(t, "status", "nope", "--server", url); code != 1 || !strings.Contains(stderr, "404") {
		t.Fatalf("status nope: exit %d: %s", code, stderr)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, p := range f.paths {
		if p == "/api/v1/config" {
			t.Errorf("asked for the config: %v", f.paths)
		}
	}
}

// TestPrintCluster: in a cluster, status heads its output with the
// replica, the leader and the members, and names each stack's holder.
func TestPrintCluster(t *testing.T) {
	var sb strings.Builder
	cs := model.ClusterStatus{Node: "node-1", Leader: "node-2", Session: true, LeaseTTL: model.Duration(15 * time.Second),
		Members: []model.ClusterMember{{Name: "node-1", Stacks: 2, URL: "http://10.0.0.1:8080"}, {Name: "node-2", Stacks: 1}}}
	printCluster(&sb, cs)
	printStacks(&sb, summaries(model.StackView{Name: "app", Holder: "node-2"}), time.Now(), true)
	out := sb.String()
	for _, want := range []string{"cluster: this replica node-1, leader node-2, session ok, lease 15s",
		"node-1  2       http://10.0.0.1:8080", "node-2  1       -", "HOLDER", "node-2\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	sb.Reset()
	printCluster(&sb, model.ClusterStatus{})
	if sb.Len() != 0 {
		t.Errorf("a single node printed %q", sb.String())
	}
	cs.Session = false
	printCluster(&sb, cs)
	if !strings.Contains(sb.String(), "NO SESSION") {
		t.Errorf("a replica without a session: %q", sb.String())
	}
}

// TestStatusReasonShowsTheError: REASON gives the condition's reason and
// the first line of its message, cut short.
func TestStatusReasonShowsTheError(t *testing.T) {
	var sb strings.Builder
	v := model.StackView{Name: "app", Status: model.StackStatus{Conditions: []model.Condition{
		{Type: model.ConditionStalled, Status: "True", Reason: "UpdateFailed", Message: "up failed 3 times; not retrying: error: boom\nsecond line"},
	}}}
	printStacks(&sb, summaries(v), time.Now(), false)
	if out := sb.String(); !strings.Contains(out, "UpdateFailed: up failed 3 times; not retrying: error: boom") || strings.Contains(out, "second line") {
		t.Fatalf("status:\n%s", out)
	}
}

// TestStatusNamesTheCondition: the REASON column names the PKO condition
// behind the health, as kubectl's columns of a PKO Stack do, so that a
// Degraded stack reads Stalled (the docs' word) and a retrying one
// Reconciling, whatever its last finished update says.
func TestStatusNamesTheCondition(t *testing.T) {
	succeeded := &model.LastUpdate{Type: model.UpdateUp, State: model.UpdateSucceeded}
	for _, c := range []struct {
		name string
		cond model.Condition
		want string
	}{
		{"retries left", model.Condition{Type: model.ConditionReconciling, Status: "True", Reason: "RetryingAfterFailure", Message: "1 update failure(s)"},
			"Reconciling/RetryingAfterFailure: 1 update failure(s)"},
		{"retries spent", model.Condition{Type: model.ConditionStalled, Status: "True", Reason: "UpdateFailed", Message: "up failed 3 times"},
			"Stalled/UpdateFailed: up failed 3 times"},
		{"policy", model.Condition{Type: model.ConditionStalled, Status: "True", Reason: "PolicyDenied", Message: "denied by policy: stackd.destroy"},
			"Stalled/PolicyDenied: denied by policy: stackd.destroy"},
		{"approval", model.Condition{Type: model.ConditionAwaitingApproval, Status: "True", Reason: "AwaitingApproval", Message: "plan p-1 waits"},
			"AwaitingApproval: plan p-1 waits"},
		{"running", model.Condition{Type: model.ConditionReconciling, Status: "True", Reason: model.ReasonStackProcessing, Message: "running"},
			"Reconciling/StackProcessing"}, // its message says nothing the columns do not
	} {
		t.Run(c.name, func(t *testing.T) {
			v := model.StackView{Name: "app", Status: model.StackStatus{LastUpdate: succeeded, Conditions: []model.Condition{c.cond}}}
			var sb strings.Builder
			printStacks(&sb, summaries(v), time.Now(), false)
			line := strings.Split(strings.TrimSpace(sb.String()), "\n")[1]
			if !strings.HasSuffix(strings.TrimSpace(line), c.want) {
				t.Fatalf("status, want REASON %q:\n%s", c.want, sb.String())
			}
		})
	}
}

// TestStatusProgramHash: a Program stack's applied revision is shown as
// a program hash, never as if it were a commit.
func TestStatusProgramHash(t *testing.T) {
	var sb strings.Builder
	v := model.StackView{Name: "hello", Tracking: "program hello", Status: model.StackStatus{
		LastUpdate: &model.LastUpdate{Type: model.UpdateUp, State: model.UpdateSucceeded, LastSuccessfulCommit: "9f86d081884c7d65"}}}
	printStacks(&sb, summaries(v), time.Now(), false)
	if !strings.Contains(sb.String(), "program:9f86d08") {
		t.Fatalf("status:\n%s", sb.String())
	}
}

// summaries are the views as the list's summary view gives them.
func summaries(views ...model.StackView) []view.StackSummary {
	out := make([]view.StackSummary, len(views))
	for i := range views {
		out[i] = view.SummaryOf(&views[i])
	}
	return out
}

// TestStatusSaysWhenAFailingStackRetries: STATE reads "failing, retry 2
// of 3 at <time>" rather than the failed update's state alone.
func TestStatusSaysWhenAFailingStackRetries(t *testing.T) {
	var sb strings.Builder
	at := time.Date(2026, 5, 4, 13, 14, 15, 0, time.Local)
	v := model.StackView{Name: "app", Status: model.StackStatus{
		LastUpdate: &model.LastUpdate{Type: model.UpdateUp, State: model.UpdateFailed, Failures: 1},
		Retry:      &model.Retry{Attempt: 2, Of: 3, At: at}}}
	printStacks(&sb, summaries(v), time.Now(), false)
	if !strings.Contains(sb.String(), "failing, retry 2 of 3 at 13:14:15") {
		t.Fatalf("status:\n%s", sb.String())
	}
}

// TestContinued: the lines after a cell's first are behind the empty
// cells before it.
func TestContinued(t *testing.T) {
	for _, c := range []struct{ text, prefix, want string }{
		{"one line", "\t", "one line"},
		{"error: boom\non line 3\n", "\t", "error: boom\n\ton line 3"},
		{"a\nb\nc", "  \t\t\t", "a\n  \t\t\tb\n  \t\t\tc"},
	} {
		if got := continued(c.text, c.prefix); got != c.want {
			t.Errorf("continued(%q, %q) = %q, want %q", c.text, c.prefix, got, c.want)
		}
	}
}

// TestDescribeIndentsMultiLineErrors: stackd describe prints each line of
// a multi-line error under the first, in its field's column (the health's
// message, the last update's, the condition's).
func TestDescribeIndentsMultiLineErrors(t *testing.T) {
	msg := "up failed: error: boom\non Pulumi.yaml line 16:\n16:   path: ${nowhere}"
	v := model.StackView{Name: "app", Status: model.StackStatus{
		LastUpdate: &model.LastUpdate{Name: "app-3", Type: model.UpdateUp, State: model.UpdateFailed, Message: msg},
		Conditions: []model.Condition{{Type: model.ConditionStalled, Status: "True", Reason: "UpdateFailed", Message: msg}},
	}}
	var sb strings.Builder
	printDescription(&sb, v, model.Resources{}, time.Now())
	lines := strings.Split(sb.String(), "\n")
	column := func(prefix, of string) int {
		for _, l := range lines {
			if strings.HasPrefix(l, prefix) {
				return strings.Index(l, of)
			}
		}
		t.Fatalf("no line starts with %q:\n%s", prefix, sb.String())
		return 0
	}
	var at []int
	for _, l := range lines {
		if i := strings.Index(l, "on Pulumi.yaml line 16:"); i >= 0 {
			at = append(at, i)
		}
	}
	value := column("Last update:", "app-3")
	if len(at) != 3 || at[0] != value || at[1] != value || at[2] != column("  TYPE", "MESSAGE") {
		t.Errorf("continuation lines at columns %v, want under their fields:\n%s", at, sb.String())
	}
}
