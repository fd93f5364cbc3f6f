package web

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/stackd/stackd/daemon/access"
	"github.com/stackd/stackd/daemon/model"
	"github.com/stackd/stackd/web/metrics"
)

func bearer(token string) http.Header {
	return http.Header{"Authorization": {"Bearer " + token}}
}

// TestAuthNoToken: without a configured token everything is open.
func TestAuthNoToken(t *testing.T) {
	api := &fakeAPI{}
	_, url := startWith(t, Options{API: api})
	if code, v := call(t, "POST", url+"/api/v1/stacks/app/sync"); code != 202 {
		t.Fatalf("sync = %d %v", code, v)
	}
	if code, v := callWith(t, "POST", url+"/api/v1/reload", bearer("anything"), ""); code != 200 {
		t.Fatalf("reload = %d %v", code, v)
	}
}

// TestAuthMutations: with a token, a POST without it or with a wrong one
// gets 401 and changes nothing; with it, 202. Reads stay open.
func TestAuthMutations(t *testing.T) {
	api := &fakeAPI{}
	_, url := startWith(t, Options{API: api, Token: "s3cret-token"})
	for name, h := range map[string]http.Header{
		"none":         nil,
		"wrong":        bearer("s3cret-tokex"),
		"prefix":       bearer("s3cret"),
		"longer":       bearer("s3cret-token-and-more"),
		"empty":        bearer(""),
		"basic scheme": {"Authorization": {"Basic s3cret-token"}},
		"no scheme":    {"Authorization": {"s3cret-token"}},
	} {
		for _, path := range []string{"/api/v1/stacks/app/sync", "/api/v1/reload", "/api/v1/stacks/nope/sync"} {
			resp, body := send(t, "POST", url+path, h, "")
			if resp.StatusCode != 401 || resp.Header.Get("WWW-Authenticate") == "" || resp.Header.Get("Content-Type") != "application/json" {
				t.Errorf("%s POST %s = %d %q %s", name, path, resp.StatusCode, resp.Header.Get("WWW-Authenticate"), body)
			}
		}
	}
	if synced, reloads, _ := api.calls(); synced != 0 || reloads != 0 {
		t.Fatalf("unauthorized requests changed something: %d syncs, %d reloads", synced, reloads)
	}
	if code, v := callWith(t, "POST", url+"/api/v1/stacks/app/sync", bearer("s3cret-token"), ""); code != 202 {
		t.Fatalf("sync with token = %d %v", code, v)
	}
	h := http.Header{"Authorization": {"bearer  s3cret-token "}}
	if code, v := callWith(t, "POST", url+"/api/v1/reload", h, ""); code != 200 {
		t.Fatalf("reload with token = %d %v", code, v)
	}
	for _, path := range []string{"/healthz", "/readyz", "/api/v1/stacks", "/api/v1/stacks/app", "/api/v1/config", "/api/v1/config/revisions"} {
		if code, v := call(t, "GET", url+path); code != 200 {
			t.Errorf("GET %s without token = %d %v", path, code, v)
		}
	}
}

// TestAuthReads: ReadRequiresToken closes reads too, except the probes.
func TestAuthReads(t *testing.T) {
	reg := prometheus.NewRegistry()
	api := &fakeAPI{}
	metrics.New(reg, api, "test")
	_, url := startWith(t, Options{API: api, Token: "s3cret-token", ReadRequiresToken: true, Registry: reg})
	for _, path := range []string{"/api/v1/stacks", "/api/v1/stacks/app", "/api/v1/stacks/nope", "/metrics", "/api/v1/nothing",
		"/api/v1/config", "/api/v1/config/revisions", "/config"} {
		if resp, body := send(t, "GET", url+path, nil, ""); resp.StatusCode != 401 {
			t.Errorf("GET %s without token = %d %s", path, resp.StatusCode, body)
		}
		if resp, body := send(t, "HEAD", url+path, bearer("wrong"), ""); resp.StatusCode != 401 {
			t.Errorf("HEAD %s with a wrong token = %d %s", path, resp.StatusCode, body)
		}
		if resp, body := send(t, "GET", url+path, bearer("s3cret-token"), ""); resp.StatusCode == 401 {
			t.Errorf("GET %s with token = %d %s", path, resp.StatusCode, body)
		}
	}
	for _, path := range []string{"/healthz", "/readyz"} {
		if code, v := call(t, "GET", url+path); code != 200 {
			t.Errorf("GET %s without token = %d %v", path, code, v)
		}
	}
}

// TestIdentifyToken: without Access, the single token identifies the
// admin and anything else is anonymous.
func TestIdentifyToken(t *testing.T) {
	open := New(Options{API: &fakeAPI{}})
	closed := New(Options{API: &fakeAPI{}, Token: "tok"})
	req := func(auth string) *http.Request {
		r := httptest.NewRequest("POST", "/stacks/app/sync", nil)
		if auth != "" {
			r.Header.Set("Authorization", auth)
		}
		return r
	}
	for _, c := range []struct {
		s    *Server
		auth string
		want string
	}{
		{open, "", model.PrincipalAnonymous},
		{open, "Bearer tok", model.PrincipalAnonymous},
		{closed, "", model.PrincipalAnonymous},
		{closed, "Bearer tok2", model.PrincipalAnonymous},
		{closed, "Basic tok", model.PrincipalAnonymous},
		{closed, "Bearer tok", model.PrincipalAdmin},
		{closed, "bearer  tok ", model.PrincipalAdmin},
	} {
		if id := c.s.identify(req(c.auth)); id.p.Kind != c.want || id.err != nil {
			t.Errorf("token %q, Authorization %q: %+v, want %s", c.s.opts.Token, c.auth, id, c.want)
		}
	}
	if ok, _ := open.allowed(anonymous, access.ActionSync, &access.StackRef{Name: "app"}); !ok {
		t.Error("without a token, an anonymous sync is refused")
	}
	if ok, _ := closed.allowed(anonymous, access.ActionSync, &access.StackRef{Name: "app"}); ok {
		t.Error("with a token, an anonymous sync is allowed")
	}
	if ok, _ := closed.allowed(anonymous, access.ActionRead, &access.StackRef{Name: "app"}); !ok {
		t.Error("with a token, an anonymous read is refused")
	}
}

// TestCrossOrigin: a browser's cross-site POST is refused and changes
// nothing, even without a token; same-origin and non-browser ones pass.
func TestCrossOrigin(t *testing.T) {
	api := &fakeAPI{}
	_, url := startWith(t, Options{API: api})
	for _, h := range []http.Header{
		{"Sec-Fetch-Site": {"cross-site"}},
		{"Origin": {"https://evil.example"}},
	} {
		if code, v := callWith(t, "POST", url+"/api/v1/reload", h, ""); code != 403 {
			t.Errorf("cross-origin reload with %v = %d %v", h, code, v)
		}
	}
	if _, reloads, _ := api.calls(); reloads != 0 {
		t.Fatalf("cross-origin requests reloaded %d times", reloads)
	}
	if code, v := callWith(t, "POST", url+"/api/v1/reload", http.Header{"Sec-Fetch-Site": {"same-origin"}}, ""); code != 200 {
		t.Errorf("same-origin reload = %d %v", code, v)
	}
	if code, v := callWith(t, "GET", url+"/api/v1/stacks", http.Header{"Sec-Fetch-Site": {"cross-site"}}, ""); code != 200 {
		t.Errorf("cross-origin read = %d %v", code, v)
	}
}
