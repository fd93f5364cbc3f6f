// Package webtest holds what the tests of package web and of its own
// packages share: a scrape of GET /metrics that promtool checks, forges'
// webhook payloads with the events they describe, a stack's resources
// with drift, and checks of what a page holds.
package webtest

import (
	"embed"
	"encoding/json"
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"

	"github.com/stackd/stackd/daemon/model"
	"github.com/stackd/stackd/daemon/review"
	"github.com/stackd/stackd/daemon/storetest"
)

// Scrape gets url's /metrics, failing unless promtool accepts it.
func Scrape(t testing.TB, url string) string {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("/metrics = %d %s (%v)", resp.StatusCode, body, err)
	}
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		if testing.Short() {
			t.Logf("promtool not installed; not checking the exposition format")
			return string(body)
		}
		t.Fatalf("promtool not installed: %v", err)
	}
	check := exec.Command(promtool, "check", "metrics")
	check.Stdin = strings.NewReader(string(body))
	if out, err := check.CombinedOutput(); err != nil {
		t.Fatalf("promtool check metrics: %v\n%s", err, out)
	}
	return string(body)
}

// payloads are pull-request payloads as each forge sends them.
//
//go:embed testdata/*.json
var payloads embed.FS

// Payload reads testdata/name (github-pull-request.json,
// gitea-pull-request.json or gitlab-merge-request.json) and applies edits
// to its JSON: each key is a path of object keys split by "." and its
// value the new value (nil deletes the key).
func Payload(t testing.TB, name string, edits map[string]any) string {
	t.Helper()
	data, err := payloads.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	for path, v := range edits {
		keys := strings.Split(path, ".")
		m := doc
		for _, k := range keys[:len(keys)-1] {
			m = m[k].(map[string]any)
		}
		if v == nil {
			delete(m, keys[len(keys)-1])
		} else {
			m[keys[len(keys)-1]] = v
		}
	}
	out, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// The events the payloads describe.
var (
	GitHubEvent = review.Event{Forge: review.GitHub, Action: review.Opened, Repo: "acme/infra",
		URLs:   []string{"https://github.com/acme/infra.git", "git@github.com:acme/infra.git", "https://github.com/acme/infra", "git://github.com/acme/infra.git"},
		Number: 12, BaseBranch: "main", HeadSHA: "6dcb09b5b57875f334f61aebed695e2e4193db5e", HeadBranch: "feature/assets",
		Author: "octocat", Title: "Add an assets bucket", WebURL: "https://github.com/acme/infra/pull/12"}
	GiteaEvent = review.Event{Forge: review.Gitea, Action: review.Pushed, Repo: "acme/infra",
		URLs:   []string{"https://gitea.example/acme/infra.git", "git@gitea.example:acme/infra.git", "https://gitea.example/acme/infra"},
		Number: 7, BaseBranch: "main", HeadSHA: "1d2e3f4a5b6c7d8e9f0a1b2c3d4e5f6a7b8c9d0e", HeadBranch: "queue-region", Fork: true,
		Author: "alice", Title: "Move the queue to eu-west-1", WebURL: "https://gitea.example/acme/infra/pulls/7"}
	GitLabEvent = review.Event{Forge: review.GitLab, Action: review.Pushed, Repo: "platform/team/infra",
		URLs: []string{"git@gitlab.example:platform/team/infra.git", "https://gitlab.example/platform/team/infra.git",
			"https://gitlab.example/platform/team/infra"},
		Number: 3, BaseBranch: "main", HeadSHA: "da1560886d4f094c3e6c9ef40349f7d38b5d27d7", HeadBranch: "db-size",
		Author: "root", Title: "Grow the database", WebURL: "https://gitlab.example/platform/team/infra/-/merge_requests/3"}
)

// Resources are n resources of "app" (a stack, a component and files
// under it), the first file drifted and the second deleted.
func Resources(n int) model.Resources {
	rs := storetest.Resources("app", n)
	for i := range rs.Resources {
		rs.Resources[i].Drift = model.ResourceInSync
	}
	if n > 3 {
		rs.Resources[2].Drift, rs.Resources[2].DriftProperties = model.ResourceDrifted, []string{"content"}
		rs.Resources[3].Drift = model.ResourceDeleted
	}
	return rs
}

// WantContains fails t unless page holds every one of wants.
func WantContains(t testing.TB, page string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(page, w) {
			t.Errorf("page lacks %q", w)
		}
	}
}

// WantLacks fails t if page holds any of unwanted.
func WantLacks(t testing.TB, page string, unwanted ...string) {
	t.Helper()
	for _, u := range unwanted {
		if strings.Contains(page, u) {
			t.Errorf("page shows %q", u)
		}
	}
}
