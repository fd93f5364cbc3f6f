package main

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stackd/stackd/daemon/review"
	"github.com/stackd/stackd/web"
)

// previewsDaemon is a web.API for a server that is asked for previews
// only: any other call panics.
type previewsDaemon struct{ web.API }

// previewsFake is a web.PreviewAPI listing prs.
type previewsFake struct{ prs []review.PullRequest }

func (f previewsFake) PullRequest(review.Event) review.Accepted {
	return review.Accepted{Stacks: []string{}}
}
func (f previewsFake) PullRequests() []review.PullRequest { return slices.Clone(f.prs) }

// startPreviewsServer serves a real web.Server with previews on a
// loopback port and returns its URL.
func startPreviewsServer(t *testing.T, opts web.Options) string {
	t.Helper()
	opts.Addr, opts.API = "127.0.0.1:0", previewsDaemon{}
	srv := web.New(opts)
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Stop(ctx)
	})
	return "http://" + srv.Addr()
}

// cliPullRequests are #12 on GitHub with three previews and a removed
// stack, and a Gitea fork's #7 whose manifests do not load.
func cliPullRequests(now time.Time) []review.PullRequest {
	return []review.PullRequest{
		{Key: "github:acme/infra#12", Forge: review.GitHub, Repo: "acme/infra", Number: 12, Title: "Add an assets bucket\nand more",
			BaseBranch: "main", HeadSHA: "6dcb09b5b57875f334f61aebed695e2e4193db5e", UpdatedAt: now.Add(-5 * time.Minute),
			Previews: []review.Preview{
				{Stack: "web", Update: "web-4", Result: review.Succeeded, Changes: map[string]int{"create": 1, "update": 2, "same": 9}, Duration: 42 * time.Second},
				{Stack: "database", Update: "database-8", Result: review.Failed, Duration: 3400 * time.Millisecond,
					Error: "error: missing required configuration key \"aws:region\"\n    at main.ts:3"},
				{Stack: "cache", Result: review.Queued, New: true},
			},
			Removed: []string{"legacy"}},
		{Key: "gitea:acme/infra#7", Forge: review.Gitea, Repo: "acme/infra", Number: 7, Title: "Move the queue", BaseBranch: "release",
			HeadSHA: "1d2e3f4a5b6c7d8e9f0a1b2c3d4e5f6a7b8c9d0e", Fork: true, UpdatedAt: now.Add(-3 * time.Hour),
			Error: "stacks.yaml:3:5: spec.stack is required\nstacks.yaml:9:1: unknown field"},
	}
}

func TestPreviewsTable(t *testing.T) {
	url := startPreviewsServer(t, web.Options{Previews: previewsFake{cliPullRequests(time.Now())}})
	code, stdout, stderr := stackd(t, "previews", "--server", url)
	if code != exitOK {
		t.Fatalf("previews: exit %d: %s", code, stderr)
	}
	lines := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
	want := [][]string{
		{"github acme/infra#12  Add an assets bucket  main←6dcb09b  5m ago"},
		{"    web ", "succeeded", "+1 ~2 -0 ±0", "42s"},
		{"    database ", "failed", "+0 ~0 -0 ±0", "3s", `error: missing required configuration key "aws:region"`},
		{"    cache (new) ", "queued", "+0 ~0 -0 ±0  -"},
		{"    would remove: legacy"},
		{""},
		{"gitea acme/infra#7  Move the queue  release←1d2e3f4 (fork)  3h ago"},
		{"    error: stacks.yaml:3:5: spec.stack is required"},
	}
	if len(lines) != len(want) {
		t.Fatalf("previews printed %d lines, want %d:\n%s", len(lines), len(want), stdout)
	}
	for i, parts := range want {
		for _, p := range parts {
			if !strings.Contains(lines[i], p) {
				t.Errorf("line %d %q lacks %q", i+1, lines[i], p)
			}
		}
	}
	if strings.Contains(stdout, "and more") || strings.Contains(stdout, "main.ts") || strings.Contains(stdout, "unknown field") {
		t.Errorf("previews shows more than first lines:\n%s", stdout)
	}
	if i, j := strings.Index(lines[1], "succeeded"), strings.Index(lines[2], "failed"); i != j {
		t.Errorf("the previews' columns are not aligned:\n%s", stdout)
	}
}

func TestPreviewsJSON(t *testing.T) {
	url := startPreviewsServer(t, web.Options{Previews: previewsFake{cliPullRequests(time.Now())}})
	code, stdout, stderr := stackd(t, "previews", "--json", "--server", url)
	var list struct {
		PullRequests []review.PullRequest `json:"pullRequests"`
	}
	if err := json.Unmarshal([]byte(stdout), &list); code != exitOK || err != nil || len(list.PullRequests) != 2 {
		t.Fatalf("previews --json: exit %d, %v: %s\n%s", code, err, stderr, stdout)
	}
	if got := list.PullRequests[0]; got.Previews[1].Stack != "database" || got.Previews[0].Changes["update"] != 2 || got.Removed[0] != "legacy" {
		t.Errorf("previews --json: %+v", got)
	}
	if !strings.Contains(stdout, "\n  \"pullRequests\": [\n    {\n") {
		t.Errorf("previews --json is not indented:\n%s", stdout)
	}
}

// TestPreviewsNone: no open pull request, or previews not configured.
func TestPreviewsNone(t *testing.T) {
	for name, opts := range map[string]web.Options{
		"none open":      {Previews: previewsFake{}},
		"not configured": {},
	} {
		url := startPreviewsServer(t, opts)
		if code, stdout, stderr := stackd(t, "previews", "--server", url); code != exitOK || stdout != "no open pull requests\n" {
			t.Errorf("%s: exit %d: %q %s", name, code, stdout, stderr)
		}
		if code, stdout, _ := stackd(t, "previews", "--json", "--server", url); code != exitOK || !strings.Contains(stdout, `"pullRequests": []`) {
			t.Errorf("%s --json: exit %d: %q", name, code, stdout)
		}
	}
	if code, _, stderr := stackd(t, "previews", "extra"); code != exitUsage {
		t.Errorf("previews extra: exit %d: %s", code, stderr)
	}
}

// TestPreviewsToken: with reads behind the token, previews sends it from
// --api-token-file; without it the API's 401 is the error.
func TestPreviewsToken(t *testing.T) {
	url := startPreviewsServer(t, web.Options{Previews: previewsFake{cliPullRequests(time.Now())}, Token: "s3cret-token", ReadRequiresToken: true})
	code, _, stderr := stackd(t, "previews", "--server", url)
	if code != exitFail || !strings.Contains(stderr, "401") {
		t.Fatalf("without the token: exit %d: %s", code, stderr)
	}
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("s3cret-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := stackd(t, "previews", "--server", url, "--api-token-file", tokenFile)
	if code != exitOK || !strings.Contains(stdout, "acme/infra#12") || strings.Contains(stdout+stderr, "s3cret") {
		t.Fatalf("with the token: exit %d: %s\n%s", code, stderr, stdout)
	}
}
