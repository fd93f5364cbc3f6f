package web

import (
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/stackd/stackd/daemon/model"
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
// flight ended, or when its wait ends; resume lifts it. The operation
// ends when the test says, once the pause waits for it: the answer's
// count of running operations shows it came after.
func TestPauseWaitsForOperations(t *testing.T) {
	api := &fakeAPI{stats: statsRunning(1)}
	url := startServer(t, api)
	type answer struct {
		status int
		body   []byte
		err    error
	}
	answered := make(chan answer, 1)
	go func() { // no t.Fatal off the test's goroutine: send's errors come back
		resp, err := http.Post(url+"/api/v1/pause", "", nil)
		if err != nil {
			answered <- answer{err: err}
			return
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		answered <- answer{resp.StatusCode, body, err}
	}()
	for deadline := time.Now().Add(time.Minute); !api.Stats().Paused; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the pause never reached the daemon")
		}
	}
	select {
	case a := <-answered:
		t.Fatalf("pause answered while an operation ran: %d %s %v", a.status, a.body, a.err)
	default:
	}
	api.mu.Lock()
	api.stats.Running = 0
	api.mu.Unlock()
	a := <-answered
	var got struct {
		Paused  bool
		Running int
	}
	if err := json.Unmarshal(a.body, &got); a.err != nil || err != nil || a.status != 200 || !got.Paused || got.Running != 0 {
		t.Fatalf("pause: %d %s %v", a.status, a.body, a.err)
	}
	api.mu.Lock()
	api.stats.Running = 2
	api.mu.Unlock()
	_, body := send(t, "POST", url+"/api/v1/pause?wait=0s", nil, "")
	if err := json.Unmarshal(body, &got); err != nil || got.Running != 2 {
		t.Fatalf("pause without waiting: %s", body)
	}
	send(t, "POST", url+"/api/v1/resume", nil, "")
	if api.Stats().Paused {
		t.Error("still paused after resume")
	}
}

func statsRunning(n int) model.Stats { return model.Stats{Running: n} }
