package web

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stackd/stackd/daemon"
)

// fakeAPI is a daemon with one stack, "app".
type fakeAPI struct {
	synced []string
	ready  error
}

func (f *fakeAPI) Stacks() []daemon.StackView {
	return []daemon.StackView{{Name: "app", Spec: map[string]any{"stack": "dev"}}}
}

func (f *fakeAPI) Stack(name string) (daemon.StackView, error) {
	if name != "app" {
		return daemon.StackView{}, daemon.ErrUnknownStack
	}
	return f.Stacks()[0], nil
}

func (f *fakeAPI) Sync(name string) (string, error) {
	if name != "app" {
		return "", daemon.ErrUnknownStack
	}
	f.synced = append(f.synced, name)
	return "token-1", nil
}

func (f *fakeAPI) Ready() error { return f.ready }

func startServer(t *testing.T, api API) string {
	t.Helper()
	s := New(Options{Addr: "127.0.0.1:0", API: api})
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Stop(context.Background()) })
	return "http://" + s.Addr()
}

func call(t *testing.T, method, url string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(""))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("%s %s: Content-Type %q", method, url, ct)
	}
	body, _ := io.ReadAll(resp.Body)
	var v map[string]any
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatalf("%s %s: %v\n%s", method, url, err, body)
	}
	return resp.StatusCode, v
}

func TestAPI(t *testing.T) {
	api := &fakeAPI{}
	url := startServer(t, api)
	tests := []struct {
		method, path string
		code         int
		check        func(map[string]any) bool
	}{
		{"GET", "/healthz", 200, func(v map[string]any) bool { return v["status"] == "ok" }},
		{"GET", "/readyz", 200, func(v map[string]any) bool { return v["status"] == "ready" }},
		{"GET", "/api/v1/stacks", 200, func(v map[string]any) bool { return len(v["stacks"].([]any)) == 1 }},
		{"GET", "/api/v1/stacks/app", 200, func(v map[string]any) bool { return v["name"] == "app" }},
		{"GET", "/api/v1/stacks/nope", 404, func(v map[string]any) bool { return v["error"] == "unknown stack" }},
		{"POST", "/api/v1/stacks/app/sync", 202, func(v map[string]any) bool { return v["request"] == "token-1" }},
		{"POST", "/api/v1/stacks/nope/sync", 404, func(v map[string]any) bool { return v["error"] != nil }},
		{"GET", "/api/v1/nothing", 404, func(v map[string]any) bool { return v["error"] != nil }},
	}
	for _, tt := range tests {
		code, v := call(t, tt.method, url+tt.path)
		if code != tt.code || !tt.check(v) {
			t.Errorf("%s %s = %d %v, want %d", tt.method, tt.path, code, v, tt.code)
		}
	}
	if len(api.synced) != 1 {
		t.Fatalf("sync calls = %v", api.synced)
	}
}

func TestNotReady(t *testing.T) {
	url := startServer(t, &fakeAPI{ready: errors.New("starting")})
	if code, v := call(t, "GET", url+"/readyz"); code != 503 || v["error"] != "starting" {
		t.Fatalf("readyz = %d %v", code, v)
	}
}

func (f *fakeAPI) Updates(string, uint64, int) ([]daemon.Update, error) { return nil, nil }
func (f *fakeAPI) Update(string) (daemon.Update, error) {
	return daemon.Update{}, daemon.ErrUnknownUpdate
}
func (f *fakeAPI) Log(string) ([]byte, *daemon.LiveLog, error) {
	return nil, nil, daemon.ErrUnknownUpdate
}
func (f *fakeAPI) Reload() error                     { return nil }
func (f *fakeAPI) ConfigStatus() daemon.ConfigStatus { return daemon.ConfigStatus{Successful: true} }
func (f *fakeAPI) Push([]string, string) []string    { return nil }
func (f *fakeAPI) Stats() daemon.Stats               { return daemon.Stats{} }
