package main

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stackd/stackd/daemon/model"
	"github.com/stackd/stackd/store"
)

// TestE2EBackupAndPause: stackd backup --server copies the state of a
// running daemon (a file that store check accepts and that holds the same
// history); stackd pause waits for the running update, and no update
// starts until stackd resume. The update pause waits for is held in the
// provider's update of the file (its gate) until the pause is seen
// waiting.
func TestE2EBackupAndPause(t *testing.T) {
	t.Parallel()
	r := newRepo(t)
	r.commit(map[string]string{"Pulumi.yaml": program("v1")})
	out := filepath.Join(outDir(t), "note.txt")
	g := newGates(t)
	in := startDaemon(t, "stacks:\n"+stackYAML("app", r, pathConfig(out)+"    envRefs:\n"+g.envRef()), "")
	in.waitStack("app", "deployed", time.Minute, isReady)

	file := filepath.Join(t.TempDir(), "copy.db")
	if code, stdout, stderr := stackd(t, in.clientArgs("backup", file)...); code != exitOK || !strings.Contains(stdout, "wrote") {
		t.Fatalf("backup --server: exit %d\n%s%s", code, stdout, stderr)
	}
	copied, err := store.Open(file, store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	us, err := copied.Updates("app", 0, 0)
	copied.Close()
	if err != nil || len(us) != len(in.updates("app")) || us[0].State != model.UpdateSucceeded {
		t.Fatalf("the copy's history: %+v %v", us, err)
	}

	// A new commit starts an update; pause waits for it to end.
	g.close("update", "note.txt")
	r.commit(map[string]string{"Pulumi.yaml": program("v2")})
	g.waitHeld("update", "note.txt", 2*time.Minute)
	type result struct {
		code           int
		stdout, stderr string
	}
	paused := make(chan result, 1)
	go func() {
		code, stdout, stderr := stackd(t, in.clientArgs("pause")...)
		paused <- result{code, stdout, stderr}
	}()
	waitFor(t, "the daemon paused", time.Minute, func() bool { return in.app.d.ConfigStatus().Paused })
	// Paused, the held update still runs: pause waits on. Once the
	// update may end, pause returns.
	time.Sleep(500 * time.Millisecond)
	select {
	case res := <-paused:
		t.Fatalf("pause returned while the update was held: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	default:
	}
	g.open("update", "note.txt")
	if res := <-paused; res.code != exitOK || !strings.Contains(res.stdout, "paused") {
		t.Fatalf("pause: exit %d\n%s%s", res.code, res.stdout, res.stderr)
	}
	if v := in.stack("app"); v.Status.CurrentUpdate != nil || output(v, "content") != "hello v2" {
		t.Fatalf("pause returned with an update running or not done: %+v, content %q", v.Status.CurrentUpdate, output(v, "content"))
	}
	r.commit(map[string]string{"Pulumi.yaml": program("v3")})
	in.sync("app")
	time.Sleep(3 * time.Second)
	if v := in.stack("app"); v.Status.CurrentUpdate != nil || output(v, "content") != "hello v2" {
		t.Fatalf("an update ran while paused: %s", output(v, "content"))
	}
	// A paused daemon says so everywhere.
	checkPaused(t, in, true)
	if code, stdout, _ := stackd(t, in.clientArgs("resume")...); code != exitOK || !strings.Contains(stdout, "resumed") {
		t.Fatalf("resume: exit %d %s", code, stdout)
	}
	checkPaused(t, in, false)
	in.waitStack("app", "v3 after resume", time.Minute, func(v model.StackView) bool { return isReady(v) && output(v, "content") == "hello v3" })
}

// checkPaused: GET /api/v1/config, /metrics, the UI's banner and stackd
// status say whether the daemon is paused.
func checkPaused(t *testing.T, in *instance, paused bool) {
	t.Helper()
	_, body := in.get("/api/v1/config", nil)
	var cfg model.ConfigStatus
	if err := json.Unmarshal(body, &cfg); err != nil || cfg.Paused != paused {
		t.Errorf("paused=%v: GET /api/v1/config says %s (%v)", paused, body, err)
	}
	_, metrics := in.get("/metrics", nil)
	if want := "stackd_paused " + map[bool]string{true: "1", false: "0"}[paused]; !strings.Contains(string(metrics), want+"\n") {
		t.Errorf("paused=%v: /metrics lacks %q", paused, want)
	}
	_, page := in.get("/", nil)
	if got := strings.Contains(string(page), "Paused: no operation starts"); got != paused {
		t.Errorf("paused=%v: the UI's banner shown=%v", paused, got)
	}
	_, stdout, _ := stackd(t, in.clientArgs("status")...)
	if got := strings.Contains(stdout, "PAUSED"); got != paused {
		t.Errorf("paused=%v: stackd status says:\n%s", paused, stdout)
	}
}
