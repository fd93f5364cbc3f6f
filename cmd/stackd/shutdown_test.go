package main

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stackd/stackd/auth"
	"github.com/stackd/stackd/daemon/model"
)

// TestE2ESIGTERMKeepsServingReads: after SIGTERM, while an update runs to
// its end, the process answers reads (/healthz "stopping", the config
// naming the update it waits for, the stack) and refuses writes with 503;
// once the update ends, it exits 0 with the update recorded. The update
// is held in the provider's create (its gate) until the reads are done.
func TestE2ESIGTERMKeepsServingReads(t *testing.T) {
	t.Parallel()
	bin := toolchainBin(t)
	exe := buildStackd(t)
	ps := newHeldStack(t)
	ps.gates.close("create", "note.txt")
	cmd := startProcess(t, exe, bin, ps.config, ps.dataDir, ps.addr, ps.log, "--shutdown-grace", "1m")
	ps.gates.waitHeld("create", "note.txt", 2*time.Minute)
	v := ps.in.stack("app")
	if v.Status.CurrentUpdate == nil {
		t.Fatal("the provider's create is held, but the stack has no current update")
	}
	update := v.Status.CurrentUpdate.Name
	token, err := auth.ReadAdminToken(filepath.Join(ps.dataDir, apiTokenFile))
	if err != nil {
		t.Fatal(err)
	}
	call := func(method, path string, out any) int {
		t.Helper()
		req, _ := http.NewRequest(method, ps.in.url+path, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			logs, _ := os.ReadFile(ps.log.Name())
			t.Fatalf("%s %s while stopping: %v\n%s", method, path, err, logs)
		}
		defer resp.Body.Close()
		if out != nil {
			_ = json.NewDecoder(resp.Body).Decode(out)
		}
		return resp.StatusCode
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	deadline := time.Now().Add(10 * time.Second)
	var health struct {
		Status     string
		Operations int
	}
	for call(http.MethodGet, "/healthz", &health); health.Status != "stopping"; call(http.MethodGet, "/healthz", &health) {
		if time.Now().After(deadline) {
			t.Fatalf("/healthz never said stopping: %+v", health)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if health.Operations != 1 {
		t.Fatalf("/healthz while stopping: %+v, want 1 operation", health)
	}
	var cs model.ConfigStatus
	if code := call(http.MethodGet, "/api/v1/config", &cs); code != http.StatusOK || !cs.Stopping ||
		!slices.Contains(cs.WaitingFor, "app ("+update+")") {
		t.Fatalf("GET /api/v1/config while stopping: %d %+v", code, cs)
	}
	if code := call(http.MethodGet, "/api/v1/stacks/app", nil); code != http.StatusOK {
		t.Fatalf("GET a stack while stopping: %d", code)
	}
	if code := call(http.MethodGet, "/readyz", nil); code != http.StatusServiceUnavailable {
		t.Fatalf("/readyz while stopping: %d", code)
	}
	var refusal struct{ Error string }
	if code := call(http.MethodPost, "/api/v1/stacks/app/sync", &refusal); code != http.StatusServiceUnavailable ||
		!strings.Contains(refusal.Error, "stopping") {
		t.Fatalf("a sync while stopping: %d %+v", code, refusal)
	}
	select {
	case err := <-exited:
		t.Fatalf("the process exited while its update ran: %v", err)
	default:
	}
	ps.gates.open("create", "note.txt")
	if err := <-exited; err != nil {
		logs, _ := os.ReadFile(ps.log.Name())
		t.Fatalf("exit after SIGTERM: %v\n%s", err, logs)
	}
	s, err := openReadOnly(ps.dataDir)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if u, err := s.Update(update); err != nil || u.State != model.UpdateSucceeded {
		t.Fatalf("the update waited for: %+v %v", u, err)
	}
}
