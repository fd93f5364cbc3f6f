package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stackd/stackd/daemon/model"
)

// Commits of the rollout fixture.
const (
	rolloutOld = "0123456789abcdef0123456789abcdef01234567"
	rolloutNew = "fedcba9876543210fedcba9876543210fedcba98"
)

// rolloutFixture is the set "web": its rollout halted at its second
// step, where web-prod failed on the new commit; its generator's last
// evaluation failed.
func rolloutFixture() model.StackSetView {
	return model.StackSetView{Name: "web", Stacks: []string{"web-dev", "web-prod", "web-qa"},
		Generators: []model.GeneratorStatus{{Path: "spec.generators[0]", Kind: "git directories", Items: 3,
			Error: "git fetch: connection reset\nmore detail"}},
		Rollout: &model.RolloutStatus{Set: "web", State: model.RolloutHalted, Step: 2, HaltedBy: []string{"web-prod"},
			Message: "web-prod failed on fedcba9",
			Steps: []model.RolloutStepStatus{
				{Selector: "env=dev", Stacks: []model.RolloutStack{{Name: "web-dev", State: model.MemberSucceeded, Commit: rolloutNew, AppliedCommit: rolloutNew}}},
				{Selector: "env=prod", MaxUpdate: 1, Stacks: []model.RolloutStack{
					{Name: "web-prod", State: model.MemberFailed, Commit: rolloutNew, AppliedCommit: rolloutOld},
					{Name: "web-qa", State: model.MemberWaiting, Commit: rolloutNew}}},
				{Stacks: []model.RolloutStack{}},
			}}}
}

// wantLines fails t unless out's lines hold, each, the fields of want
// in order, separated by blanks.
func wantLines(t *testing.T, out string, want [][]string) {
	t.Helper()
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), len(want), out)
	}
	for i, fields := range want {
		if got := strings.Fields(lines[i]); strings.Join(got, " ") != strings.Join(fields, " ") {
			t.Errorf("line %d = %q, want the fields %q", i+1, lines[i], fields)
		}
	}
}

// TestPrintRollout: the state line, the failing generator's first line,
// what to run next, and a row per stack of each step, the current step
// starred, commits short.
func TestPrintRollout(t *testing.T) {
	var sb strings.Builder
	printRollout(&sb, rolloutFixture())
	out := sb.String()
	head := strings.SplitN(out, "\n", 4)
	if head[0] != "generator spec.generators[0] (git directories) failing: git fetch: connection reset" ||
		head[1] != "stack set web: rollout Halted at step 2 of 3, halted by web-prod: web-prod failed on fedcba9" ||
		head[2] != "  stackd rollout resume web, or stackd rollout abort web" {
		t.Fatalf("head:\n%s", out)
	}
	wantLines(t, strings.SplitN(out, "\n\n", 2)[1], [][]string{
		{"STEP", "SELECTOR", "MAXUPDATE", "STACK", "STATE", "COMMIT", "APPLIED"},
		{"1", "env=dev", "-", "web-dev", "Succeeded", "fedcba9", "fedcba9"},
		{"2*", "env=prod", "1", "web-prod", "Failed", "fedcba9", "0123456"},
		{"2*", "env=prod", "1", "web-qa", "Waiting", "fedcba9", "-"},
		{"3", "(the rest)", "-", "-", "-", "-", "-"},
	})
	// The columns line up.
	lines := strings.Split(out, "\n")
	if i, j := strings.Index(lines[4], "STACK"), strings.Index(lines[6], "web-prod"); i != j || i < 0 {
		t.Errorf("STACK at %d, web-prod at %d:\n%s", i, j, out)
	}
}

func TestPrintRolloutWithout(t *testing.T) {
	var sb strings.Builder
	printRollout(&sb, model.StackSetView{Name: "db", Stacks: []string{"db-a", "db-b"}})
	if got := sb.String(); got != "stack set db: no rollout (no rollingSync strategy); 2 stacks: db-a, db-b\n" {
		t.Errorf("%q", got)
	}
	ro := &model.RolloutStatus{State: model.RolloutComplete, Steps: make([]model.RolloutStepStatus, 2)}
	if got := rolloutLine("db", ro); got != "stack set db: rollout Complete, 2 of 2 steps done" {
		t.Errorf("complete: %q", got)
	}
}

func TestPrintStackSets(t *testing.T) {
	var sb strings.Builder
	printStackSets(&sb, []model.StackSetView{{Name: "db", Stacks: []string{"db-a"}}, rolloutFixture()})
	wantLines(t, sb.String(), [][]string{
		{"NAME", "STACKS", "ROLLOUT", "STEP", "MESSAGE"},
		{"db", "1", "-", "-", "-"},
		{"web", "3", "Halted", "2/3", "web-prod", "failed", "on", "fedcba9"},
	})
}

// TestStatusOwnerColumn: the stack table has an OWNER column when a
// stack has an owner, and none otherwise.
func TestStatusOwnerColumn(t *testing.T) {
	var sb strings.Builder
	printStacks(&sb, summaries(model.StackView{Name: "web-dev", Owner: "StackSet/web"}, model.StackView{Name: "app"}), time.Now(), false)
	lines := strings.Split(sb.String(), "\n")
	if !strings.HasSuffix(lines[0], "OWNER") || !strings.HasSuffix(lines[1], "StackSet/web") || !strings.HasSuffix(lines[2], "-") {
		t.Errorf("status:\n%s", sb.String())
	}
	sb.Reset()
	printStacks(&sb, summaries(model.StackView{Name: "app"}), time.Now(), false)
	if strings.Contains(sb.String(), "OWNER") {
		t.Errorf("an OWNER column without owners:\n%s", sb.String())
	}
}

// fakeSetsDaemon serves the StackSet routes of the API: web is the
// rollout fixture, anything else unknown; a request without the bearer
// token is refused.
type fakeSetsDaemon struct {
	mu    sync.Mutex
	posts []string
}

func (f *fakeSetsDaemon) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	write := func(code int, v any) {
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(v)
	}
	if r.Header.Get("Authorization") != "Bearer sets-token" {
		write(http.StatusForbidden, map[string]string{"error": `token "viewer" may not sync stack web-dev`})
		return
	}
	web := rolloutFixture()
	switch {
	case r.Method == "GET" && r.URL.Path == "/api/v1/stacksets":
		write(http.StatusOK, map[string]any{"stackSets": []model.StackSetView{web}})
	case r.Method == "GET" && r.URL.Path == "/api/v1/stacksets/web":
		write(http.StatusOK, web)
	case r.Method == "POST" && (r.URL.Path == "/api/v1/stacksets/web/resume" || r.URL.Path == "/api/v1/stacksets/web/abort"):
		f.mu.Lock()
		f.posts = append(f.posts, r.URL.Path)
		f.mu.Unlock()
		web.Rollout.State, web.Rollout.HaltedBy, web.Rollout.Message = model.RolloutProgressing, nil, ""
		write(http.StatusOK, map[string]any{"name": "web", "action": "resume", "rollout": web.Rollout})
	default:
		write(http.StatusNotFound, map[string]string{"error": `stack set "nope": not found`})
	}
}

// TestRolloutCommands: the commands against a daemon, with their exit
// codes: 0 done, 1 refused or unknown, 2 a wrong command line.
func TestRolloutCommands(t *testing.T) {
	f := &fakeSetsDaemon{}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	token := t.TempDir() + "/token"
	if err := os.WriteFile(token, []byte("sets-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	flags := []string{"--server", srv.URL, "--api-token-file", token}

	code, out, stderr := stackd(t, append([]string{"rollout", "status", "web"}, flags...)...)
	if code != exitOK || !strings.Contains(out, "rollout Halted at step 2 of 3") || !strings.Contains(out, "web-prod  Failed") {
		t.Errorf("status: %d %s%s", code, out, stderr)
	}
	code, out, _ = stackd(t, append([]string{"rollout", "status", "web", "--json"}, flags...)...)
	var v model.StackSetView
	if err := json.Unmarshal([]byte(out), &v); code != exitOK || err != nil || v.Rollout == nil || v.Rollout.Step != 2 {
		t.Errorf("status --json: %d %v\n%s", code, err, out)
	}
	if code, out, _ := stackd(t, append([]string{"rollout", "list"}, flags...)...); code != exitOK || !strings.Contains(out, "2/3") {
		t.Errorf("list: %d %s", code, out)
	}
	code, out, _ = stackd(t, append([]string{"rollout", "resume", "web"}, flags...)...)
	if code != exitOK || out != "rollout of stack set web resumed\nstack set web: rollout Progressing at step 2 of 3\n" {
		t.Errorf("resume: %d %q", code, out)
	}
	if code, _, stderr := stackd(t, append([]string{"rollout", "abort", "nope"}, flags...)...); code != exitFail || !strings.Contains(stderr, "404 Not Found") {
		t.Errorf("abort nope: %d %s", code, stderr)
	}
	if code, _, stderr := stackd(t, "rollout", "abort", "web", "--server", srv.URL, "--data-dir", t.TempDir()); code != exitFail || !strings.Contains(stderr, "may not sync") {
		t.Errorf("abort without the token: %d %s", code, stderr)
	}
	for _, args := range [][]string{{"rollout"}, {"rollout", "frob"}, {"rollout", "resume"}, {"rollout", "status", "a", "b"}, {"rollout", "list", "x"}, {"rollout", "abort", "web", "--json"}} {
		if code, _, stderr := stackd(t, args...); code != exitUsage || stderr == "" {
			t.Errorf("stackd %v: exit %d %q", args, code, stderr)
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if strings.Join(f.posts, " ") != "/api/v1/stacksets/web/resume" {
		t.Errorf("posted %v", f.posts)
	}
}
