package web

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stackd/stackd/model"
)

// TestBackupNeedsToken: the state's copy needs the token whenever one is
// set, even when reads do not.
func TestBackupNeedsToken(t *testing.T) {
	_, url := startWith(t, Options{API: &fakeAPI{}, Token: "tok"})
	if resp, _ := send(t, "GET", url+"/api/v1/backup", nil, ""); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("without the token: %d", resp.StatusCode)
	}
	resp, body := send(t, "GET", url+"/api/v1/backup", http.Header{"Authorization": {"Bearer tok"}}, "")
	if resp.StatusCode != 200 || string(body) != "bolt file" || resp.Header.Get("Content-Type") != "application/octet-stream" {
		t.Fatalf("with the token: %d %q %v", resp.StatusCode, body, resp.Header)
	}
}

// TestPauseWaitsForOperations: pause answers once the operations in
// flight ended, or when its wait ends; resume lifts it.
func TestPauseWaitsForOperations(t *testing.T) {
	api := &fakeAPI{stats: statsRunning(1)}
	url := startServer(t, api)
	go func() {
		time.Sleep(300 * time.Millisecond)
		api.mu.Lock()
		api.stats.Running = 0
		api.mu.Unlock()
	}()
	start := time.Now()
	resp, body := send(t, "POST", url+"/api/v1/pause", nil, "")
	var got struct {
		Paused  bool
		Running int
	}
	if err := json.Unmarshal(body, &got); err != nil || resp.StatusCode != 200 || !got.Paused || got.Running != 0 {
		t.Fatalf("pause: %d %s", resp.StatusCode, body)
	}
	if time.Since(start) < 300*time.Millisecond {
		t.Errorf("pause answered before the operation ended")
	}
	api.mu.Lock()
	api.stats.Running = 2
	api.mu.Unlock()
	_, body = send(t, "POST", url+"/api/v1/pause?wait=0s", nil, "")
	if err := json.Unmarshal(body, &got); err != nil || got.Running != 2 {
		t.Fatalf("pause without waiting: %s", body)
	}
	send(t, "POST", url+"/api/v1/resume", nil, "")
	if api.Stats().Paused {
		t.Error("still paused after resume")
	}
}

func statsRunning(n int) model.Stats { return model.Stats{Running: n} }
