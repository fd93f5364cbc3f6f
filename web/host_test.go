package web

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestHostCheck: a request naming a host the server does not answer for
// (a DNS rebinding page) is refused before it reaches the API, whatever
// the method; IP literals, localhost names, the listen host and allowed
// hosts pass.
func TestHostCheck(t *testing.T) {
	api := &fakeAPI{}
	h := New(Options{API: api, Addr: "stackd.internal:8080", AllowedHosts: []string{"*.example.com", "ci.example.org"}}).Handler()
	for host, want := range map[string]int{
		"127.0.0.1:8080": 200, "[::1]:8080": 200, "10.1.2.3": 200, "localhost:8080": 200, "app.localhost": 200,
		"stackd.internal:8080": 200, "stackd.example.com": 200, "CI.example.org": 200,
		"attacker.test": 421, "attacker.test:8080": 421, "example.com": 421, "stackd.internal.attacker.test": 421, "": 421,
	} {
		req := httptest.NewRequest("GET", "/api/v1/stacks", nil)
		req.Host = host
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != want {
			t.Errorf("Host %q: %d, want %d", host, rec.Code, want)
		}
	}
	req := httptest.NewRequest("POST", "/api/v1/stacks/app/sync", nil)
	req.Host = "attacker.test"
	h.ServeHTTP(httptest.NewRecorder(), req)
	if len(api.synced) != 0 {
		t.Errorf("a request for a foreign host synced %v", api.synced)
	}
}

// TestReadyzDetailNeedsToken: without the token /readyz says only that
// the daemon is not ready; the reason stays behind the token.
func TestReadyzDetailNeedsToken(t *testing.T) {
	_, url := startWith(t, Options{API: &fakeAPI{ready: errors.New("no config applied yet: stacks.yaml:3:1: secret-ish detail")}, Token: "tok"})
	resp, body := send(t, "GET", url+"/readyz", nil, "")
	if resp.StatusCode != 503 || strings.Contains(string(body), "detail") || !strings.Contains(string(body), "not ready") {
		t.Errorf("/readyz without the token: %d %s", resp.StatusCode, body)
	}
	resp, body = send(t, "GET", url+"/readyz", http.Header{"Authorization": {"Bearer tok"}}, "")
	if resp.StatusCode != 503 || !strings.Contains(string(body), "detail") {
		t.Errorf("/readyz with the token: %d %s", resp.StatusCode, body)
	}
}

// TestOpenListenWarns: listening beyond loopback without a token shows in
// /api/v1/config.
func TestOpenListenWarns(t *testing.T) {
	for addr, warn := range map[string]bool{"0.0.0.0:8080": true, "10.0.0.5:80": true, "127.0.0.1:8080": false, "localhost:80": false, "[::1]:80": false} {
		s := New(Options{API: &fakeAPI{}, Addr: addr})
		if got := len(s.Warnings()) > 0; got != warn {
			t.Errorf("%s: warnings %v", addr, s.Warnings())
		}
	}
	if w := New(Options{API: &fakeAPI{}, Addr: "0.0.0.0:8080", Token: "tok"}).Warnings(); len(w) != 0 {
		t.Errorf("with a token: %v", w)
	}
	h := New(Options{API: &fakeAPI{}, Addr: "0.0.0.0:8080"}).Handler()
	req := httptest.NewRequest("GET", "/api/v1/config", nil)
	req.Host = "127.0.0.1"
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	var got struct{ Warnings []string }
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil || len(got.Warnings) != 1 || rec.Code != http.StatusOK {
		t.Errorf("/api/v1/config: %d %s", rec.Code, rec.Body)
	}
}
