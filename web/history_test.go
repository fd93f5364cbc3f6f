package web

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stackd/stackd/daemon/model"
	"github.com/stackd/stackd/web/webtest"
)

// historyStart is when the first update of historyAPI's stack started.
var historyStart = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)

// historyAPI is stack app with 150 updates: an up (1), a failed preview
// (60), a refresh (120), and else drift checks, each of the newest 30
// drifting in its own way, the newest a fold of 40 unchanged checks.
func historyAPI() *fakeAPI {
	api := &fakeAPI{logs: map[string][]byte{}}
	for seq := uint64(150); seq >= 1; seq-- {
		u := model.Update{ID: fmt.Sprintf("app-%d", seq), Stack: "app", Seq: seq, Type: model.UpdateDrift,
			StartTime: historyStart.Add(time.Duration(seq) * time.Minute), State: model.UpdateSucceeded,
			Changes: map[string]int{"same": 2}}
		switch {
		case seq == 1:
			u.Type, u.Changes = model.UpdateUp, map[string]int{"create": 2}
		case seq == 60:
			u.Type, u.State = model.UpdatePreview, model.UpdateFailed
		case seq == 120:
			u.Type = model.UpdateRefresh
		case seq == 150:
			u.Checks, u.FirstStartTime = 40, historyStart.Add(100*time.Minute)
		case seq > 120:
			u.Changes = map[string]int{"same": 1, "update": int(seq)}
		}
		api.updates = append(api.updates, u)
		api.logs[u.ID] = []byte("log of " + u.ID + "\n")
	}
	return api
}

// seqsOf lists the seqs of a page of the updates API.
func seqsOf(v map[string]any) []float64 {
	var out []float64
	for _, u := range v["updates"].([]any) {
		out = append(out, u.(map[string]any)["seq"].(float64))
	}
	return out
}

// TestUpdatesByType: ?type keeps the updates of the types named, a full
// page of them however far back they are, paged with "next" as ever; an
// unknown type is a 400 naming the known ones.
func TestUpdatesByType(t *testing.T) {
	url := startServer(t, historyAPI()) + "/api/v1/stacks/app/updates"
	for _, c := range []struct {
		query, next string
		want        []float64
	}{
		{"?type=up", "", []float64{1}},
		{"?type=up,refresh", "", []float64{120, 1}},
		{"?type=up&type=preview", "", []float64{60, 1}},
		{"?type=refresh,preview,up&limit=2", "60", []float64{120, 60}},
		{"?type=refresh,preview,up&limit=2&before=60", "", []float64{1}},
		{"?type=destroy", "", nil},
		{"?type=drift&limit=3&before=121", "117", []float64{119, 118, 117}},
	} {
		code, v := call(t, "GET", url+c.query)
		next, _ := v["next"].(string)
		if got := seqsOf(v); code != 200 || fmt.Sprint(got) != fmt.Sprint(c.want) || next != c.next {
			t.Errorf("GET %s = %d, seqs %v, next %q; want %v, next %q", c.query, code, got, next, c.want, c.next)
		}
	}
	code, v := call(t, "GET", url+"?type=up,deploy")
	if msg, _ := v["error"].(string); code != 400 || !strings.Contains(msg, `"deploy"`) || !strings.Contains(msg, "up, preview, refresh, destroy, drift") {
		t.Errorf("unknown type = %d %v", code, v)
	}
	// A folded drift check shows how many checks it stands for, and since when.
	code, v = call(t, "GET", url+"?limit=1")
	u := v["updates"].([]any)[0].(map[string]any)
	if code != 200 || u["checks"] != 40.0 || u["firstStartTime"] != "2025-01-02T04:44:05Z" {
		t.Errorf("folded check = %d %v", code, u)
	}
	code, v = call(t, "GET", url+"?type=up")
	if u := v["updates"].([]any)[0].(map[string]any); code != 200 || u["checks"] != nil || u["firstStartTime"] != nil {
		t.Errorf("an up = %d %v; want no checks nor firstStartTime", code, u)
	}
}

// TestUIStackHistoryTypes: the stack page's history shows a folded drift
// check as one row, and lists one type when asked with ?history=, by
// plain links.
func TestUIStackHistoryTypes(t *testing.T) {
	base := startUI(t, historyAPI()) + "/stacks/app"
	page := getPage(t, base, http.StatusOK)
	webtest.WantContains(t, page, `<tr id="update-app-150">`, "drift ×40", "first <time", "last <time",
		`<a href="/stacks/app#history" aria-current="true">all</a>`, `<a href="/stacks/app?history=up#history">up</a>`,
		`<a href="/stacks/app?history=drift#history">drift</a>`)
	if n := strings.Count(page, `<tr id="update-`); n != historyLimit {
		t.Errorf("%d rows, want %d", n, historyLimit)
	}
	page = getPage(t, base+"?history=refresh", http.StatusOK)
	webtest.WantContains(t, page, `<tr id="update-app-120">`, `<a href="/stacks/app?history=refresh#history" aria-current="true">refresh</a>`)
	if n := strings.Count(page, `<tr id="update-`); n != 1 {
		t.Errorf("?history=refresh: %d rows, want 1", n)
	}
	page = getPage(t, base+"?history=destroy", http.StatusOK)
	webtest.WantContains(t, page, "No destroy updates in the history.")
	page = getPage(t, base+"?history=deploy", http.StatusBadRequest)
	webtest.WantContains(t, page, "unknown update type &#34;deploy&#34;")
}

// TestUIStackLogOfLastChange: the Log card shows the last update that
// changed the stack, found beyond the listed history when need be, and
// points at the newer drift check; with no such update, the newest.
func TestUIStackLogOfLastChange(t *testing.T) {
	api := historyAPI()
	url := startUI(t, api)
	page := getPage(t, url+"/stacks/app", http.StatusOK)
	webtest.WantContains(t, page, `<h2>Log <code>app-120</code> refresh`, "log of app-120",
		`Newer: drift check <a href="/api/v1/updates/app-150/log"><code>app-150</code></a> ×40`,
		`<a href="/stacks/app#update-app-150">in the history</a>`,
		// The script swaps the card when a newer check comes.
		`<section id="log" class="card" data-live="app-120 succeeded app-150 succeeded">`)
	webtest.WantLacks(t, page, "log of app-150")

	// The refresh gone, the last change is the up, 148 updates back.
	api.mu.Lock()
	api.updates = append(api.updates[:30], api.updates[31:]...)
	api.mu.Unlock()
	page = getPage(t, url+"/stacks/app", http.StatusOK)
	webtest.WantContains(t, page, `<h2>Log <code>app-1</code> up`, "log of app-1", "Newer: drift check")

	// A change held by a gate (a policy denied it, or it awaits
	// approval): its preview, what the stack waits on, not the last up.
	api.mu.Lock()
	api.stacks = []model.StackView{{Name: "app", Spec: map[string]any{"stack": "dev"},
		Status: model.StackStatus{Gate: &model.Gate{State: model.GatePolicyDenied, Update: "app-60"}}}}
	api.mu.Unlock()
	page = getPage(t, url+"/stacks/app", http.StatusOK)
	webtest.WantContains(t, page, `<h2>Log <code>app-60</code> preview`, "log of app-60", "Newer: drift check")
	api.mu.Lock()
	api.stacks = nil
	api.mu.Unlock()

	// With only drift checks, the newest one.
	api.mu.Lock()
	api.updates = api.updates[:10]
	api.mu.Unlock()
	page = getPage(t, url+"/stacks/app", http.StatusOK)
	webtest.WantContains(t, page, `<h2>Log <code>app-150</code> drift`, "log of app-150")
	webtest.WantLacks(t, page, "Newer:")
}
