package web

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/stackd/stackd/daemon/model"
	"github.com/stackd/stackd/web/view"
	"github.com/stackd/stackd/web/webtest"
)

// fleet is 250 stacks: every fifth Degraded, from two config sources.
func fleet() *fakeAPI {
	views := manyStacks(250)
	for i := range views {
		if i%5 == 0 {
			views[i].Status.Health = &model.Health{Status: model.HealthDegraded, Message: "up failed 3 times"}
		}
		views[i].Source = []string{"/etc/stackd/a.yaml", "/etc/stackd/b.yaml"}[i%2]
	}
	return &fakeAPI{stacks: views}
}

type stackList struct {
	Stacks []json.RawMessage
	Total  int
	Next   string
}

func getList(t *testing.T, s *Server, query string) (stackList, []string) {
	t.Helper()
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/api/v1/stacks"+query, nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("GET /api/v1/stacks%s: %d %s", query, rec.Code, rec.Body)
	}
	if n := rec.Header().Get("Content-Length"); n != strconv.Itoa(rec.Body.Len()) {
		t.Fatalf("GET /api/v1/stacks%s: Content-Length %s, body of %d bytes", query, n, rec.Body.Len())
	}
	var l stackList
	if err := json.Unmarshal(rec.Body.Bytes(), &l); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, raw := range l.Stacks {
		var v struct{ Name string }
		_ = json.Unmarshal(raw, &v)
		names = append(names, v.Name)
	}
	return l, names
}

func TestStackListFiltersAndPages(t *testing.T) {
	api := fleet()
	s := New(Options{API: api, AllowedHosts: []string{"example.com"}})

	all, names := getList(t, s, "")
	if all.Total != 250 || len(names) != 250 || all.Next != "" {
		t.Fatalf("the whole list: %d of %d, next %q", len(names), all.Total, all.Next)
	}
	first, names := getList(t, s, "?view=summary&limit=100")
	if first.Total != 250 || len(names) != 100 || names[0] != "stack-0000" || first.Next != "stack-0099" {
		t.Fatalf("first page: %d of %d, from %s, next %q", len(names), first.Total, names[0], first.Next)
	}
	var sum view.StackSummary
	if err := json.Unmarshal(first.Stacks[0], &sum); err != nil || sum.Health != "Degraded" || sum.LastUpdate == nil || sum.LastUpdate.State != "succeeded" {
		t.Fatalf("a summary: %+v %v", sum, err)
	}
	if len(first.Stacks[1]) > 600 {
		t.Errorf("a summary takes %d bytes: %s", len(first.Stacks[1]), first.Stacks[1])
	}
	last, names := getList(t, s, "?view=summary&limit=100&after=stack-0199")
	if len(names) != 50 || names[0] != "stack-0200" || last.Next != "" {
		t.Fatalf("last page: %d from %s, next %q", len(names), names[0], last.Next)
	}
	degraded, names := getList(t, s, "?view=summary&health=degraded&source=/etc/stackd/a.yaml")
	if degraded.Total != 25 || len(names) != 25 || names[1] != "stack-0010" {
		t.Fatalf("Degraded of a.yaml: %d (%v)", degraded.Total, names)
	}
	if named, names := getList(t, s, "?q=STACK-012"); named.Total != 10 || names[0] != "stack-0120" {
		t.Fatalf("?q=STACK-012: %v", names)
	}
	for _, bad := range []string{"?limit=0", "?limit=x", "?view=tiny"} {
		rec := httptest.NewRecorder()
		s.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/api/v1/stacks"+bad, nil))
		if rec.Code != http.StatusBadRequest {
			t.Errorf("GET /api/v1/stacks%s: %d", bad, rec.Code)
		}
	}

	// The UI pages by 100 and filters without JavaScript: plain links and
	// a GET form.
	page := getPage(t, startUI(t, api)+"/?health=Degraded", http.StatusOK)
	webtest.WantContains(t, page, `<form class="filters" method="get" action="/"`, "<option selected>Degraded</option>",
		"50 of 250 match · 50 shown", `href="/stacks/stack-0245"`)
	page = getPage(t, startUI(t, api)+"/", http.StatusOK)
	webtest.WantContains(t, page, "250 stacks", "100 shown", `<a href="/?after=stack-0099" rel="next">Next page</a>`)
	webtest.WantLacks(t, page, `href="/stacks/stack-0100"`)
	page = getPage(t, startUI(t, api)+"/?after=stack-0099", http.StatusOK)
	webtest.WantContains(t, page, `href="/stacks/stack-0100"`, `<a href="/?">First page</a>`)
}

// TestStackListRendersOncePerChange: a stack's view is read again only
// when its version changed, and for a full list that shows it first.
func TestStackListRendersOncePerChange(t *testing.T) {
	api := &recordingAPI{API: &fakeAPI{stacks: manyStacks(20)}}
	s := New(Options{API: api, AllowedHosts: []string{"example.com"}})
	counted := &countingAPI{recordingAPI: api}
	s.api = counted
	for range 3 {
		getList(t, s, "?view=summary")
	}
	if counted.reads != 20 {
		t.Fatalf("%d reads of stack views for 3 lists of 20 unchanged stacks, want 20", counted.reads)
	}
	f := api.API.(*fakeAPI)
	f.mu.Lock()
	f.stacks[7].Status.LastUpdate.State = model.UpdateFailed
	f.mu.Unlock()
	l, _ := getList(t, s, "?view=summary&q=0007")
	var sum view.StackSummary
	_ = json.Unmarshal(l.Stacks[0], &sum)
	if counted.reads != 21 || sum.LastUpdate.State != model.UpdateFailed {
		t.Fatalf("after one change: %d reads, state %s", counted.reads, sum.LastUpdate.State)
	}

	// A full view is read when a full list first shows its stack (a page
	// of them only), then at each change of the stack, whichever list
	// sees the change.
	stateOf := func(raw json.RawMessage) string {
		var v model.StackView
		_ = json.Unmarshal(raw, &v)
		return v.Status.LastUpdate.State
	}
	if l, names := getList(t, s, "?limit=5"); counted.reads != 26 || len(names) != 5 || l.Total != 20 {
		t.Fatalf("a page of 5 full views: %d reads, %d of %d", counted.reads, len(names), l.Total)
	}
	l, names := getList(t, s, "?view=full")
	if counted.reads != 41 || len(names) != 20 || names[7] != "stack-0007" || stateOf(l.Stacks[7]) != model.UpdateFailed {
		t.Fatalf("every full view: %d reads, %d stacks", counted.reads, len(names))
	}
	f.mu.Lock()
	f.stacks[3].Status.LastUpdate.State = model.UpdateFailed
	f.mu.Unlock()
	getList(t, s, "?view=summary")
	if l, _ = getList(t, s, ""); counted.reads != 42 || stateOf(l.Stacks[3]) != model.UpdateFailed || stateOf(l.Stacks[4]) != model.UpdateSucceeded {
		t.Fatalf("after a change seen by a summary list: %d reads, states %s, %s", counted.reads, stateOf(l.Stacks[3]), stateOf(l.Stacks[4]))
	}
}

type countingAPI struct {
	*recordingAPI
	reads int
}

func (c *countingAPI) Stack(name string) (model.StackView, error) {
	c.reads++
	return c.recordingAPI.Stack(name)
}
