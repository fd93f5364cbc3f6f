package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stackd/stackd/daemon/model"
)

// TestE2EReloadAllowRemoval: the mass-removal guard refuses a config that
// removes a source's only stack; stackd reload --allow-removal 1 applies
// it once, the stack is destroyed (destroyOnFinalize), and the audit trail
// and the config's history say who allowed it.
func TestE2EReloadAllowRemoval(t *testing.T) {
	t.Parallel()
	r := newRepo(t)
	r.commit(map[string]string{"Pulumi.yaml": program("v1")})
	out := filepath.Join(outDir(t), "note.txt")
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
	var cs model.ConfigStatus
	if in.get("/api/v1/config", &cs); cs.Removes != 1 {
		t.Fatalf("the config status does not say the refused config removes 1 stack: %+v", cs)
	}
	if code, msg := cli("reload", "--allow-removal", "1"); code != 0 || !strings.Contains(msg, "config reloaded") {
		t.Fatalf("reload --allow-removal 1: exit %d: %s", code, msg)
	}
	in.waitGone("only")
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

// TestE2ESourceDroppedKeepsStacks: restarted without one of its two
// --config sources, stackd keeps that source's stack (destroyOnFinalize
// and all), shows it orphaned and runs nothing for it; the operator's
// confirmation (stackd reload --allow-removal 1) removes it, destroying
// it.
func TestE2ESourceDroppedKeepsStacks(t *testing.T) {
	t.Parallel()
	ra, rb := newRepo(t), newRepo(t)
	ra.commit(map[string]string{"Pulumi.yaml": program("a")})
	rb.commit(map[string]string{"Pulumi.yaml": program("b")})
	dir := t.TempDir()
	outA, outB := filepath.Join(outDir(t), "a.txt"), filepath.Join(outDir(t), "b.txt")
	cfgB := filepath.Join(dir, "b.yaml")
	if err := os.WriteFile(cfgB, []byte("stacks:\n"+stackYAML("b", rb, pathConfig(outB)+"    destroyOnFinalize: true\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "data")
	configA := "stacks:\n" + stackYAML("a", ra, pathConfig(outA))
	in := startDaemonWith(t, configA, data, func(f *runFlags) { f.config = append(f.config, cfgB) })
	in.waitStack("a", "deployed", time.Minute, isReady)
	in.waitStack("b", "deployed", time.Minute, isReady)
	in.stop()

	// The unit file lost the second --config.
	in = startDaemon(t, configA, data)
	in.waitStack("a", "deployed", time.Minute, isReady)
	v := in.stack("b")
	if v.Orphaned == "" || !strings.Contains(v.Orphaned, cfgB+" is no longer configured; kept until confirmed") || v.Removed {
		t.Fatalf("the stack of the dropped source: orphaned %q, removed %v", v.Orphaned, v.Removed)
	}
	time.Sleep(2 * time.Second) // a few passes of the loop: nothing may run for b
	if readFile(t, outB) != "hello b" || len(in.updates("b")) != 1 {
		t.Fatalf("the orphaned stack was touched: file %q, updates %+v", readFile(t, outB), in.updates("b"))
	}
	var stdout, stderr strings.Builder
	if code := run(context.Background(), in.clientArgs("status"), &stdout, &stderr); code != 0 ||
		!strings.Contains(stdout.String(), "ORPHANED: b") || !strings.Contains(stdout.String(), "Orphaned: source") {
		t.Fatalf("stackd status: exit %d:\n%s%s", code, stdout.String(), stderr.String())
	}
	if _, page := in.get("/config", nil); !strings.Contains(string(page), "Orphaned stacks") {
		t.Fatal("the config page does not list the orphaned stack")
	}

	stdout.Reset()
	if code := run(context.Background(), in.clientArgs("reload", "--allow-removal", "1"), &stdout, &stderr); code != 0 {
		t.Fatalf("reload --allow-removal 1: exit %d: %s", code, stderr.String())
	}
	in.waitGone("b")
	if readFile(t, outB) != "" || readFile(t, outA) != "hello a" {
		t.Fatalf("after the confirmation: a %q, b %q", readFile(t, outA), readFile(t, outB))
	}
}

// waitGone waits up to a minute for the stack to be finalized: the API
// no longer knows it.
func (in *instance) waitGone(name string) {
	in.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for code, _ := in.get("/api/v1/stacks/"+name, nil); code != 404; code, _ = in.get("/api/v1/stacks/"+name, nil) {
		if time.Now().After(deadline) {
			in.t.Fatalf("stack %s is still there: %+v", name, in.stack(name).Status.LastUpdate)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
