package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stackd/stackd/daemon"
)

// TestE2EReloadAllowRemoval: the mass-removal guard refuses a config that
// removes a source's only stack; stackd reload --allow-removal 1 applies
// it once, the stack is destroyed (destroyOnFinalize), and the audit trail
// and the config's history say who allowed it.
func TestE2EReloadAllowRemoval(t *testing.T) {
	r := newRepo(t)
	r.commit(map[string]string{"Pulumi.yaml": program("v1")})
	out := filepath.Join(t.TempDir(), "note.txt")
	in := startDaemon(t, "stacks:\n"+stackYAML("only", r, pathConfig(out)+"    destroyOnFinalize: true\n"), "")
	in.waitStack("only", "deployed", time.Minute, isReady)
	cli := func(args ...string) (int, string) {
		t.Helper()
		var stdout, stderr strings.Builder
		code := run(context.Background(), in.clientArgs(args...), &stdout, &stderr)
		return code, stdout.String() + stderr.String()
	}
	if err := os.WriteFile(in.cfgPath, []byte("stacks: []\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, msg := cli("reload"); code == 0 || !strings.Contains(msg, "--allow-removal 1") {
		t.Fatalf("reload without the override: exit %d: %s", code, msg)
	}
	var cs daemon.ConfigStatus
	if in.get("/api/v1/config", &cs); cs.Removes != 1 {
		t.Fatalf("the config status does not say the refused config removes 1 stack: %+v", cs)
	}
	if code, msg := cli("reload", "--allow-removal", "1"); code != 0 || !strings.Contains(msg, "config reloaded") {
		t.Fatalf("reload --allow-removal 1: exit %d: %s", code, msg)
	}
	deadline := time.Now().Add(time.Minute)
	for code, _ := in.get("/api/v1/stacks/only", nil); code != 404; code, _ = in.get("/api/v1/stacks/only", nil) {
		if time.Now().After(deadline) {
			t.Fatal("the stack allowed to go is still there")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if readFile(t, out) != "" {
		t.Fatal("the removed stack was not destroyed")
	}
	if code, msg := cli("audit", "--json"); code != 0 || !strings.Contains(msg, "allowed this reload to remove up to 1 stack(s)") {
		t.Fatalf("the audit trail does not record the override: exit %d: %s", code, msg)
	}
	revs, err := in.app.d.ConfigRevisions(0, 10)
	if err != nil || len(revs) == 0 || revs[0].AllowedRemoval != 1 || strings.Join(revs[0].Removed, ",") != "only" {
		t.Fatalf("the config history does not record the override: %+v %v", revs, err)
	}
}
