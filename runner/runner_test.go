package runner

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stackd/stackd/daemon"
	"github.com/stackd/stackd/daemon/model"
)

// Sentinel secrets: they must never reach an argv, the log, an error or a
// file of the runner's in clear.
const (
	secretOne = "SENTINEL-one-7d1e4f0a"
	secretTwo = "SENTINEL-two-93b2c6d8"
)

// TestRunLifecycle drives one stack through up, a no-change up, config
// changes, preview, refresh and destroy with the real CLI, and checks the
// secrets on the way.
func TestRunLifecycle(t *testing.T) {
	h := newHarness(t, testProgram)
	ctx := context.Background()
	ws := h.workspace("one", secretOne)
	up := model.Operation{Workspace: ws, Type: model.UpdateUp}

	// First up: the stack is created, its config set, the file created.
	res := h.run(up)
	if got := h.onDisk(); got != "one" {
		t.Fatalf("after the first up the file holds %q", got)
	}
	if res.Changes["create"] != 2 {
		t.Errorf("first up changes %v, want 2 creates (stack and file)", res.Changes)
	}
	wantOutputs(t, res, `"one"`)
	calls := h.processes()
	t.Logf("first up ran %d pulumi processes: %q", len(calls), calls)

	outs, err := h.r.Outputs(ctx, ws)
	if err != nil {
		t.Fatal(err)
	}
	if outs["token"] != secretOne || outs["content"] != "one" {
		t.Fatalf("Outputs() = %v, want the secret in clear", outs)
	}
	h.processes()

	// A no-change up runs exactly one pulumi process.
	res = h.run(up)
	calls = h.processes()
	if len(calls) != 1 || !strings.HasPrefix(calls[0], "--non-interactive up ") {
		t.Fatalf("a no-change up ran %d processes, want 1: %q", len(calls), calls)
	}
	if res.Changes["same"] != 2 || len(res.Changes) != 1 {
		t.Errorf("no-change up changes %v, want 2 same", res.Changes)
	}
	wantOutputs(t, res, `"one"`)

	// A plain config change: no config command, an update.
	ws = h.workspace("two", secretOne)
	up.Workspace = ws
	res = h.run(up)
	if got := h.onDisk(); got != "two" {
		t.Fatalf("after a config change the file holds %q", got)
	}
	if res.Changes["update"] != 1 {
		t.Errorf("config change changes %v, want 1 update", res.Changes)
	}
	wantOutputs(t, res, `"two"`)
	if calls = h.processes(); len(calls) != 1 {
		t.Errorf("a plain config change ran %q, want up alone (the secret keeps its ciphertext)", calls)
	}

	// A secret change goes through stdin: one config set, then up.
	ws = h.workspace("two", secretTwo)
	up.Workspace = ws
	h.run(up)
	calls = h.processes()
	if len(calls) != 2 || !strings.Contains(calls[0], "config set --secret --raw") {
		t.Errorf("a secret change ran %q, want config set and up", calls)
	}
	if outs, err = h.r.Outputs(ctx, ws); err != nil || outs["token"] != secretTwo {
		t.Fatalf("Outputs() after a secret change = %v, %v", outs, err)
	}
	h.processes()

	// Preview shows an update and changes nothing.
	ws = h.workspace("three", secretTwo)
	res = h.run(model.Operation{Workspace: ws, Type: model.UpdatePreview})
	if got := h.onDisk(); got != "two" {
		t.Fatalf("a preview changed the file to %q", got)
	}
	if res.Changes["update"] != 1 || res.Outputs != nil {
		t.Errorf("preview result %+v, want 1 update and no outputs", res)
	}

	// A drift check names a hand edit, and changes neither the file nor
	// the state: a second check sees the same.
	if err := os.WriteFile(h.file, []byte("by hand"), 0o600); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		res = h.run(model.Operation{Workspace: ws, Type: model.UpdateDrift})
		if len(res.Drift) != 1 || !strings.HasSuffix(res.Drift[0].URN, "stackdtest:index:File::note") ||
			res.Drift[0].Op != "update" || strings.Join(res.Drift[0].Properties, ",") != "content" {
			t.Fatalf("drift = %+v, want the note's content", res.Drift)
		}
		if got := h.onDisk(); got != "by hand" {
			t.Fatalf("a drift check changed the file to %q", got)
		}
	}

	// Refresh takes a hand edit into the state; up repairs it.
	res = h.run(model.Operation{Workspace: ws, Type: model.UpdateRefresh})
	if res.Changes["update"] != 1 {
		t.Errorf("refresh of a hand edit changes %v, want 1 update", res.Changes)
	}
	res = h.run(model.Operation{Workspace: ws, Type: model.UpdateUp})
	if got := h.onDisk(); got != "three" {
		t.Fatalf("after up the file holds %q", got)
	}

	// Destroy with Remove deletes the file and the stack, with the
	// config the runner holds.
	kept := ws
	kept.Config, kept.KeepConfig, kept.UseLocalStackOnly = nil, true, true
	res = h.run(model.Operation{Workspace: kept, Type: model.UpdateDestroy, Remove: true})
	if _, err := os.Stat(h.file); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("after destroy the file is still there (%v)", err)
	}
	if res.Changes["delete"] != 2 {
		t.Errorf("destroy changes %v, want 2 deletes", res.Changes)
	}
	if _, err := h.r.Outputs(ctx, ws); err == nil || !strings.Contains(err.Error(), "no stack named") {
		t.Errorf("Outputs() of a removed stack: %v, want no stack", err)
	}
	if _, err := os.Stat(filepath.Join(h.dataDir, "workspaces", "test", "stack.json")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the marker of a removed stack is still there (%v)", err)
	}

	noSecretsLeft(t, h)
}

// wantOutputs checks an up's outputs: the content, and the secret token
// masked.
func wantOutputs(t *testing.T, res model.Result, content string) {
	t.Helper()
	if got := string(res.Outputs["content"]); got != content {
		t.Errorf("output content = %s, want %s", got, content)
	}
	if got := string(res.Outputs["token"]); got != `"[secret]"` {
		t.Errorf("output token = %s, want \"[secret]\"", got)
	}
}

// noSecretsLeft checks that the sentinels are in no argv, not in the log
// and in no file under the data directory, in clear or in base64.
func noSecretsLeft(t *testing.T, h *harness) {
	t.Helper()
	for _, s := range []string{secretOne, secretTwo} {
		for _, form := range []string{s, base64.StdEncoding.EncodeToString([]byte(s))} {
			if strings.Contains(h.allCalls(), form) {
				t.Errorf("a secret is on a pulumi command line")
			}
			if strings.Contains(h.log.String(), form) {
				t.Errorf("a secret is in the operation log")
			}
			if files := filesContaining(t, h.dataDir, form); len(files) > 0 {
				t.Errorf("a secret is in clear in %v", files)
			}
		}
	}
	if !strings.Contains(h.log.String(), "Updating (dev)") {
		t.Errorf("the log did not receive the CLI's output:\n%s", h.log.String())
	}
}

// TestRunProgramError: a failing program's error text is the error's
// message.
func TestRunProgramError(t *testing.T) {
	h := newHarness(t, strings.Replace(testProgram, "content: ${content}", "content: ${nosuchvalue}", 1))
	res, err := h.try(model.Operation{Workspace: h.workspace("x", secretOne), Type: model.UpdateUp})
	if err == nil {
		t.Fatal("up of a broken program succeeded")
	}
	msg := err.Error()
	if !strings.Contains(msg, `resource, variable, or config value "nosuchvalue" not found`) {
		t.Errorf("error %q does not hold the program's error", msg)
	}
	if strings.Contains(msg, "Warning") || strings.Contains(msg, secretOne) {
		t.Errorf("error %q holds more than the error", msg)
	}
	var e *Error
	if !errors.As(err, &e) || e.Op != model.UpdateUp || e.ExitCode == 0 {
		t.Errorf("error %#v is not an *Error of up", err)
	}
	if res.Changes == nil {
		t.Errorf("a failed up has no change summary")
	}
}

// TestRunResourceError: a provider's failure names the resource.
func TestRunResourceError(t *testing.T) {
	h := newHarness(t, testProgram)
	ws := h.workspace("x", secretOne)
	ws.Config[0].Value = "/proc/no/such/dir/file"
	_, err := h.try(model.Operation{Workspace: ws, Type: model.UpdateUp})
	if err == nil || !strings.HasPrefix(err.Error(), "stackdtest:index:File note: mkdir /proc/no") {
		t.Fatalf("error %v, want the provider's error on the resource", err)
	}
}

// TestRunStaleLock: a lock left by a dead process of this host is broken
// and the operation succeeds; a lock of another host or of a live pulumi
// process stays.
func TestRunStaleLock(t *testing.T) {
	h := newHarness(t, testProgram)
	ctx := context.Background()
	ws := h.workspace("one", secretOne)
	up := model.Operation{Workspace: ws, Type: model.UpdateUp}
	h.run(up)
	host, _ := os.Hostname()

	stale := writeLock(t, h, deadPid(t), host)
	h.processes()
	h.run(up)
	if _, err := os.Stat(stale); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the stale lock is still there (%v)", err)
	}
	calls := h.processes()
	if len(calls) != 3 || !strings.Contains(calls[1], "cancel --yes --stack dev") {
		t.Errorf("with a stale lock up ran %q, want up, cancel, up", calls)
	}

	foreign := writeLock(t, h, deadPid(t), "another-host")
	_, err := h.try(up)
	if err == nil || !strings.Contains(err.Error(), "currently locked") {
		t.Fatalf("up with another host's lock: %v", err)
	}
	if err := h.r.Unlock(ctx, ws); !errors.Is(err, ErrLockHeld) {
		t.Fatalf("Unlock with another host's lock: %v", err)
	}
	if _, err := os.Stat(foreign); err != nil {
		t.Fatalf("another host's lock was broken: %v", err)
	}
	if err := os.Remove(foreign); err != nil {
		t.Fatal(err)
	}

	live := writeLock(t, h, livePulumi(t), host)
	if err := h.r.Unlock(ctx, ws); !errors.Is(err, ErrLockHeld) {
		t.Fatalf("Unlock with a live process's lock: %v", err)
	}
	if _, err := os.Stat(live); err != nil {
		t.Fatalf("a live process's lock was broken: %v", err)
	}
	if err := os.Remove(live); err != nil {
		t.Fatal(err)
	}
	if err := h.r.Unlock(ctx, ws); err != nil {
		t.Fatalf("Unlock without locks: %v", err)
	}
}

// writeLock writes a lock file of the test stack in the format of
// Pulumi's file backend, as observed with CLI v3.250.0.
// The stack has run once, so its own file backend exists.
func writeLock(t *testing.T, h *harness, pid int, host string) string {
	t.Helper()
	backends, _ := filepath.Glob(filepath.Join(h.dataDir, "backends", "*"))
	if len(backends) != 1 {
		t.Fatalf("backends of the data dir: %v, want the stack's own", backends)
	}
	dir := filepath.Join(backends[0], ".pulumi", "locks", "organization", "runnertest", "dev")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	data, _ := json.Marshal(map[string]any{"pid": pid, "username": "stackd", "hostname": host, "timestamp": time.Now().UTC()})
	path := filepath.Join(dir, "03c4b4d8-9e87-4dd9-a2f8-"+strconv.Itoa(pid)+".json")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// deadPid is the pid of a process that has exited.
func deadPid(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	return cmd.Process.Pid
}

// livePulumi starts a process named pulumi that sleeps until the test
// ends, and returns its pid.
func livePulumi(t *testing.T) int {
	t.Helper()
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("no sleep command")
	}
	link := filepath.Join(t.TempDir(), "pulumi")
	if err := os.Symlink(sleep, link); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(link, "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd.Process.Pid
}

// TestRunEnvironmentNeedsCloud: ESC environments on a file backend are
// refused before anything runs.
func TestRunEnvironmentNeedsCloud(t *testing.T) {
	h := newHarness(t, testProgram)
	ws := h.workspace("x", secretOne)
	ws.Environments = []string{"org/project/env"}
	ws.Backend = "file://user:hunter2@" + filepath.Join(h.dataDir, "backend")
	started := h.allCalls() // the runner's start: the CLI's version, the provider on PATH
	_, err := h.try(model.Operation{Workspace: ws, Type: model.UpdateUp})
	if err == nil || !strings.Contains(err.Error(), "spec.environment needs a Pulumi Cloud backend; this stack's backend is file://") {
		t.Fatalf("error %v, want a clear refusal", err)
	}
	if strings.Contains(err.Error(), "hunter2") {
		t.Errorf("error %q shows the backend's credentials", err)
	}
	if calls := h.allCalls(); calls != started {
		t.Errorf("pulumi ran for a refused workspace: %q", calls)
	}
}

// TestRunUseLocalStackOnly: a missing stack is not created.
func TestRunUseLocalStackOnly(t *testing.T) {
	h := newHarness(t, testProgram)
	ws := h.workspace("x", secretOne)
	ws.UseLocalStackOnly = true
	_, err := h.try(model.Operation{Workspace: ws, Type: model.UpdateUp})
	if err == nil || !strings.Contains(err.Error(), "the Pulumi stack dev does not exist") || !errors.Is(err, daemon.ErrStackNotFound) {
		t.Fatalf("error %v, want a missing stack", err)
	}
	ws.UseLocalStackOnly = false
	h.run(model.Operation{Workspace: ws, Type: model.UpdateUp})
	ws.UseLocalStackOnly = true
	h.run(model.Operation{Workspace: ws, Type: model.UpdateUp})
	// Another stackd stack of the same Pulumi stack and project keeps
	// its state apart on the data dir's backend: it finds none.
	ws.Name = "other"
	if _, err := h.try(model.Operation{Workspace: ws, Type: model.UpdateUp}); !errors.Is(err, daemon.ErrStackNotFound) {
		t.Fatalf("another stackd stack: %v, want a missing stack", err)
	}
}

// TestRunTimeout: an operation past its timeout is interrupted and says
// so.
func TestRunTimeout(t *testing.T) {
	h := newHarness(t, testProgram)
	ws := h.workspace("x", secretOne)
	h.run(model.Operation{Workspace: ws, Type: model.UpdateUp})
	_, err := h.try(model.Operation{Workspace: ws, Type: model.UpdateUp, Timeout: time.Millisecond})
	if !errors.Is(err, context.DeadlineExceeded) || !strings.HasPrefix(err.Error(), "up timed out") {
		t.Fatalf("error %v, want a deadline", err)
	}
	t.Logf("error after the timeout: %v", err)
}

// TestRunBreakLock: with BreakLock, a lock of another host (a replica
// whose lease expired) is broken before anything else, also for a stack
// this runner has never seen, whose creation the lock would block.
func TestRunBreakLock(t *testing.T) {
	h := newHarness(t, testProgram)
	ws := h.workspace("one", secretOne)
	h.run(model.Operation{Workspace: ws, Type: model.UpdateUp})
	foreign := writeLock(t, h, deadPid(t), "another-host")
	if err := os.RemoveAll(filepath.Join(h.dataDir, "workspaces")); err != nil { // as on another replica
		t.Fatal(err)
	}
	h.processes()
	h.run(model.Operation{Workspace: ws, Type: model.UpdateUp, BreakLock: true})
	if _, err := os.Stat(foreign); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the other host's lock is still there (%v)", err)
	}
	if calls := h.processes(); len(calls) == 0 || !strings.Contains(calls[0], "cancel --yes --stack dev") {
		t.Errorf("with BreakLock up ran %q, want cancel first", calls)
	}
}
