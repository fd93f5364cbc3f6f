package web

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stackd/stackd/daemon"
	"github.com/stackd/stackd/daemon/model"
)

// mapAPI finds a stack in a map, as the daemon does, rather than in a
// copy of every stack, as fakeAPI does.
type mapAPI struct {
	*fakeAPI
	byName map[string]model.StackView
}

func newMapAPI(f *fakeAPI) *mapAPI {
	m := &mapAPI{fakeAPI: f, byName: map[string]model.StackView{}}
	for _, v := range f.stacks {
		m.byName[v.Name] = v
	}
	return m
}

func (m *mapAPI) Stack(name string) (model.StackView, error) {
	if v, ok := m.byName[name]; ok {
		return v, nil
	}
	return model.StackView{}, daemon.ErrUnknownStack
}

func (m *mapAPI) Sync(name string) (string, error) {
	if _, err := m.Stack(name); err != nil {
		return "", err
	}
	return "token-1", nil
}

// BenchmarkGuard measures what identifying, authorizing and recording
// adds to a request, handled without a socket: the API's view of one
// stack and a page of the list of 1,000 stacks, read with the single
// token, and with Access while reads need a role (the list then asks
// Access about each stack); and a sync, recorded in the audit trail.
func BenchmarkGuard(b *testing.B) {
	api := newMapAPI(&fakeAPI{stacks: manyStacks(1000), unchanging: true})
	hosts := []string{"example.com"} // httptest's host
	legacy := New(Options{API: api, Token: adminToken, AllowedHosts: hosts}).Handler()
	roles := New(Options{API: api, Access: newFakeAccess(), Audit: &memAudit{}, ReadRequiresToken: true, AllowedHosts: hosts}).Handler()
	for _, bm := range []struct {
		name   string
		h      http.Handler
		method string
		path   string
		token  string
		want   int
	}{
		{"stack/token", legacy, "GET", "/api/v1/stacks/stack-0500", adminToken, 200},
		{"stack/roles", roles, "GET", "/api/v1/stacks/stack-0500", operatorToken, 200},
		{"list-page/token", legacy, "GET", "/api/v1/stacks?view=summary&limit=100", adminToken, 200},
		{"list-page/roles", roles, "GET", "/api/v1/stacks?view=summary&limit=100", operatorToken, 200},
		{"sync/token", legacy, "POST", "/api/v1/stacks/stack-0500/sync", adminToken, 202},
		{"sync/roles+audit", roles, "POST", "/api/v1/stacks/stack-0500/sync", operatorToken, 202},
	} {
		b.Run(bm.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				r := httptest.NewRequest(bm.method, bm.path, nil)
				r.Header.Set("Authorization", "Bearer "+bm.token)
				w := httptest.NewRecorder()
				bm.h.ServeHTTP(w, r)
				if w.Code != bm.want {
					b.Fatalf("%s %s = %d", bm.method, bm.path, w.Code)
				}
			}
		})
	}
}
