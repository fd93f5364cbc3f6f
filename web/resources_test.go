package web

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stackd/stackd/daemon/model"
	"github.com/stackd/stackd/web/view"
	"github.com/stackd/stackd/web/webtest"
)

// TestResourcesAPIAndPage: the API serves the resources as the daemon
// gives them, and the stack page shows counts, picture and tree with
// <details> (no script needed); a search is a GET.
func TestResourcesAPIAndPage(t *testing.T) {
	api := newUIFakeAPI()
	api.resources = map[string]model.Resources{"web": webtest.Resources(5)}
	base := startUI(t, api)
	resp, body := fetch(t, http.MethodGet, base+"/api/v1/stacks/web/resources", nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET resources: %d %s", resp.StatusCode, body)
	}
	var got model.Resources
	if err := json.Unmarshal([]byte(body), &got); err != nil || len(got.Resources) != 5 || got.Resources[2].Parent != got.Resources[1].URN {
		t.Errorf("GET resources = %s, %v", body, err)
	}
	if resp, _ := fetch(t, http.MethodGet, base+"/api/v1/stacks/nope/resources", nil); resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET resources of an unknown stack: %d", resp.StatusCode)
	}
	page := getPage(t, base+"/stacks/web", http.StatusOK)
	webtest.WantContains(t, page, `<section id="resources"`, `<svg `, `<details open><summary>`, `id="`+view.AnchorOf(got.Resources[3].URN)+`"`,
		"<code>stackdtest:index:File</code> <strong>3</strong>", ">drifted<", ">deleted<", "changed: content", `name="q"`)
	page = getPage(t, base+"/stacks/web?q=file-1", http.StatusOK)
	webtest.WantContains(t, page, "1 of 5 match", ">file-1<")
	webtest.WantLacks(t, page, ">file-0<")
	api.resources = nil
	page = getPage(t, base+"/stacks/web", http.StatusOK)
	webtest.WantContains(t, page, "No resources recorded yet")
}

// TestUIChromiumResources renders the resources of a stack of 500 in
// Chromium: the folded picture and the tree, with a screenshot.
func TestUIChromiumResources(t *testing.T) {
	if _, err := os.Stat(chromium); err != nil {
		if testing.Short() {
			t.Skip("no Chromium:", err)
		}
		t.Fatal("the browser test needs Chromium:", err)
	}
	api := newUIFakeAPI()
	api.resources = map[string]model.Resources{"web": webtest.Resources(500)}
	base := startUI(t, api)
	t.Cleanup(api.live.Close)
	dom := string(runChromium(t, "--dump-dom", base+"/stacks/web"))
	webtest.WantContains(t, dom, `class="resource-graph"`, "group (+498)", `<ul class="tree">`, "file-497")
	path := filepath.Join(artifactDir(t), "ui-resources.png")
	runChromium(t, "--screenshot="+path, "--window-size=1400,2600", base+"/stacks/web?q=file-49")
	if png, err := os.ReadFile(path); err != nil || len(png) < 10000 {
		t.Fatalf("screenshot %s: %d bytes, %v", path, len(png), err)
	}
	t.Logf("screenshot: %s", path)
}

// TestPreviewNowAPIAndPage: POST starts a preview (202), GET serves the
// last one (404 before any), the page shows it with its commit and a
// button that posts to the UI's route.
func TestPreviewNowAPIAndPage(t *testing.T) {
	api := newUIFakeAPI()
	base := startUI(t, api)
	if resp, body := fetch(t, http.MethodGet, base+"/api/v1/stacks/web/preview", nil); resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET preview before any: %d %s", resp.StatusCode, body)
	}
	if resp, body := fetch(t, http.MethodPost, base+"/api/v1/stacks/web/preview", nil); resp.StatusCode != http.StatusAccepted {
		t.Errorf("POST preview: %d %s", resp.StatusCode, body)
	}
	if resp, _ := fetch(t, http.MethodPost, base+"/api/v1/stacks/nope/preview", nil); resp.StatusCode != http.StatusNotFound {
		t.Errorf("POST preview of an unknown stack: %d", resp.StatusCode)
	}
	resp, _ := fetch(t, http.MethodPost, base+"/stacks/web/preview", http.Header{"Sec-Fetch-Site": {"same-origin"}})
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/stacks/web#preview" {
		t.Errorf("the UI's preview: %d to %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	if got := api.previewed; len(got) != 2 || got[0] != "web" {
		t.Errorf("previews started: %v", got)
	}
	api.preview = &model.StackPreview{Commit: "0123456789abcdef0123456789abcdef01234567", Time: api.now, State: model.UpdateSucceeded,
		Changes: map[string]int{"update": 1, "same": 3}, Diff: "  ~ stackdtest:index:File b update [diff: ~content]\n"}
	var got model.StackPreview
	resp, body := fetch(t, http.MethodGet, base+"/api/v1/stacks/web/preview", nil)
	if err := json.Unmarshal([]byte(body), &got); resp.StatusCode != http.StatusOK || err != nil || got.Commit != api.preview.Commit {
		t.Errorf("GET preview: %d %s", resp.StatusCode, body)
	}
	page := getPage(t, base+"/stacks/web", http.StatusOK)
	webtest.WantContains(t, page, `action="/stacks/web/preview"`, `<section id="preview"`, `<code title="0123456789abcdef0123456789abcdef01234567">0123456</code>`,
		"stackdtest:index:File b update [diff: ~content]", "1 update")
}

// TestCommitsOnListAndPage: a stack whose last update failed at another
// commit than the applied one says "latest ... failed" on the list and
// the page; commits link to the forge with their subject and author.
func TestCommitsOnListAndPage(t *testing.T) {
	applied, latest := strings.Repeat("a", 40), strings.Repeat("b", 40)
	api := &fakeAPI{stacks: []model.StackView{{
		Name: "app", Spec: map[string]any{"stack": "dev"}, CommitURL: "https://github.com/acme/app/commit/{sha}",
		AppliedCommit: &model.Commit{SHA: applied, Subject: "Add the bucket", Author: "Ada"},
		LatestCommit:  &model.Commit{SHA: latest, Subject: "Rename the bucket", Author: "Bob"},
		Status: model.StackStatus{LastUpdate: &model.LastUpdate{Name: "app-2", Type: model.UpdateUp, State: model.UpdateFailed,
			LastAttemptedCommit: latest, LastSuccessfulCommit: applied}},
	}}, updates: []model.Update{{ID: "app-2", Stack: "app", Seq: 2, Type: model.UpdateUp, State: model.UpdateFailed, Commit: latest,
		CommitInfo: &model.Commit{SHA: latest, Subject: "Rename the bucket", Author: "Bob"}}}}
	base := startUI(t, api)
	list := getPage(t, base+"/", http.StatusOK)
	webtest.WantContains(t, list, `<code title="`+applied+`">aaaaaaa</code>`, `latest <code title="`+latest+`">bbbbbbb</code> failed`)
	page := getPage(t, base+"/stacks/app", http.StatusOK)
	webtest.WantContains(t, page, `href="https://github.com/acme/app/commit/`+applied+`"`, "Add the bucket", "Ada",
		"Latest commit", `href="https://github.com/acme/app/commit/`+latest+`"`, "Rename the bucket")
}

// BenchmarkResources500 is the web side of a look at a stack of 500
// resources, without the network: the API's answer and the stack page
// (the daemon's side, with the store, is BenchmarkStackView500 in
// cmd/stackd).
func BenchmarkResources500(b *testing.B) {
	api := newUIFakeAPI()
	api.resources = map[string]model.Resources{"web": webtest.Resources(500)}
	s := New(Options{API: api})
	for _, path := range []string{"/api/v1/stacks/web/resources", "/stacks/web"} {
		b.Run(strings.ReplaceAll(strings.TrimPrefix(path, "/"), "/", "_"), func(b *testing.B) {
			for b.Loop() {
				w := httptest.NewRecorder()
				s.Handler().ServeHTTP(w, httptest.NewRequest(http.MethodGet, "http://127.0.0.1"+path, nil))
				if w.Code != http.StatusOK {
					b.Fatalf("GET %s: %d", path, w.Code)
				}
			}
		})
	}
}
