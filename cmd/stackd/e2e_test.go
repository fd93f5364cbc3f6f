package main

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stackd/stackd/daemon/model"
)

// pathConfig is the config block pointing a stack's File at path.
func pathConfig(path string) string {
	return "    config:\n      path: " + path + "\n"
}

func TestE2ECommitConfigAndSync(t *testing.T) {
	t.Parallel()
	r := newRepo(t)
	first := r.commit(map[string]string{"Pulumi.yaml": program("v1")})
	out := filepath.Join(outDir(t), "note.txt")
	config := "stacks:\n" + stackYAML("app", r, pathConfig(out))
	in := startDaemon(t, config, "")

	v := in.waitStack("app", "first deploy", time.Minute, isReady)
	if got := readFile(t, out); got != "hello v1" {
		t.Fatalf("file = %q after the first deploy", got)
	}
	if v.Status.LastUpdate.LastSuccessfulCommit != first || output(v, "content") != "hello v1" {
		t.Fatalf("status after the first deploy: %+v outputs %v", v.Status.LastUpdate, v.Status.Outputs)
	}
	if v.Status.Health == nil || v.Status.Health.Status != model.HealthHealthy {
		t.Fatalf("health = %+v", v.Status.Health)
	}

	second := r.commit(map[string]string{"Pulumi.yaml": program("v2")})
	start := time.Now()
	v = in.waitStack("app", "the new commit", time.Minute, func(v model.StackView) bool {
		return isReady(v) && v.Status.LastUpdate.LastSuccessfulCommit == second
	})
	t.Logf("new commit applied %v after it was made", time.Since(start).Round(time.Millisecond))
	if got := readFile(t, out); got != "hello v2" || output(v, "content") != "hello v2" {
		t.Fatalf("file = %q, output %q after the second commit", got, output(v, "content"))
	}

	in.reload("stacks:\n" + stackYAML("app", r, pathConfig(out)+"      greeting: bonjour\n"))
	in.waitStack("app", "the config change", time.Minute, func(v model.StackView) bool {
		return isReady(v) && output(v, "content") == "bonjour v2"
	})
	if got := readFile(t, out); got != "bonjour v2" {
		t.Fatalf("file = %q after the config change", got)
	}

	if err := os.Remove(out); err != nil {
		t.Fatal(err)
	}
	token := in.sync("app")
	v = in.waitStack("app", "the sync", time.Minute, func(v model.StackView) bool {
		return isReady(v) && v.Status.LastUpdate.ReconcileRequest == token
	})
	var updates []model.Update
	updates = in.updates("app")
	if last := updates[len(updates)-1]; !strings.Contains(last.Reason, "Sync request") || last.State != model.UpdateSucceeded {
		t.Fatalf("last update = %+v", last)
	}
}

func TestE2EPreviewChangesNothing(t *testing.T) {
	t.Parallel()
	r := newRepo(t)
	r.commit(map[string]string{"Pulumi.yaml": program("v1")})
	out := filepath.Join(outDir(t), "note.txt")
	in := startDaemon(t, "stacks:\n"+stackYAML("pre", r, pathConfig(out)+"    preview: true\n"), "")
	v := in.waitStack("pre", "the preview", time.Minute, isReady)
	if v.Status.LastUpdate.Type != model.UpdatePreview || v.Status.LastUpdate.State != model.UpdateSucceeded {
		t.Fatalf("last update = %+v", v.Status.LastUpdate)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Fatalf("a preview wrote %s (err %v)", out, err)
	}
	u := in.updates("pre")[0]
	if u.Changes["create"] != 2 { // the stack and the file
		t.Fatalf("preview change summary = %v, want two creates", u.Changes)
	}
}

func TestE2EBrokenCommitStallsThenRecovers(t *testing.T) {
	t.Parallel()
	r := newRepo(t)
	r.commit(map[string]string{"Pulumi.yaml": program("v1")})
	out := filepath.Join(outDir(t), "note.txt")
	in := startDaemon(t, "stacks:\n"+stackYAML("app", r, pathConfig(out)), "")
	in.waitStack("app", "first deploy", time.Minute, isReady)

	broken := strings.Replace(program("v2"), "${path}", "${nowhere}", 1)
	r.commit(map[string]string{"Pulumi.yaml": broken})
	v := in.waitStack("app", "Stalled after the failure limit", 3*time.Minute, stalledFor(model.ReasonUpdateFailed))
	if !strings.Contains(v.Status.LastUpdate.Message, `"nowhere" not found`) {
		t.Fatalf("failure message = %q, want the program's error", v.Status.LastUpdate.Message)
	}
	// Failures count from 1, so the third failure reaches the limit of 3.
	// The n-th failure is followed by a backoff of base·3^(n-1).
	failed := 0
	var prev model.Update
	for _, u := range in.updates("app") {
		if u.State != model.UpdateFailed {
			continue
		}
		if failed > 0 {
			if gap, want := u.StartTime.Sub(prev.EndTime), 300*time.Millisecond*time.Duration(pow3(failed-1)); gap < want {
				t.Errorf("retry %d came %v after the failure, want at least %v", failed, gap, want)
			}
		}
		failed++
		prev = u
	}
	if failed != 3 {
		t.Fatalf("%d failed updates before stalling, want 3", failed)
	}
	if got := readFile(t, out); got != "hello v1" {
		t.Fatalf("file = %q: a failing program changed it", got)
	}

	fixed := r.commit(map[string]string{"Pulumi.yaml": program("v3")})
	in.waitStack("app", "recovery", time.Minute, func(v model.StackView) bool {
		return isReady(v) && v.Status.LastUpdate.LastSuccessfulCommit == fixed
	})
	if got := readFile(t, out); got != "hello v3" {
		t.Fatalf("file = %q after the fix", got)
	}
}

func pow3(n int) int {
	p := 1
	for range n {
		p *= 3
	}
	return p
}

func TestE2EPrerequisiteAndStackOutput(t *testing.T) {
	t.Parallel()
	ra, rb := newRepo(t), newRepo(t)
	ra.commit(map[string]string{"Pulumi.yaml": program("from-a")})
	rb.commit(map[string]string{"Pulumi.yaml": `name: b
runtime: yaml
configuration:
  path:
    type: String
variables:
  fromA:
    fn::invoke:
      function: stackdtest:index:getEnv
      arguments:
        name: A_CONTENT
      return: value
resources:
  note:
    type: stackdtest:index:File
    properties:
      path: ${path}
      content: b sees ${fromA}
`})
	dir := outDir(t)
	config := "stacks:\n" +
		stackYAML("b", rb, pathConfig(filepath.Join(dir, "b.txt"))+
			"    prerequisites:\n      - name: a\n"+
			"    envRefs:\n      A_CONTENT:\n        type: StackOutput\n        stackOutput: {stack: a, output: content}\n") +
		stackYAML("a", ra, pathConfig(filepath.Join(dir, "a.txt")))
	in := startDaemon(t, config, "")
	in.waitStack("b", "b deployed", 2*time.Minute, isReady)
	if got := readFile(t, filepath.Join(dir, "b.txt")); got != "b sees hello from-a" {
		t.Fatalf("b's file = %q", got)
	}
	a, b := in.updates("a")[0], in.updates("b")[0]
	if !b.StartTime.After(a.EndTime) {
		t.Fatalf("b started at %v, before a finished at %v", b.StartTime, a.EndTime)
	}
}

func TestE2ERemoval(t *testing.T) {
	t.Parallel()
	rk, rg := newRepo(t), newRepo(t)
	rk.commit(map[string]string{"Pulumi.yaml": program("k")})
	rg.commit(map[string]string{"Pulumi.yaml": program("g")})
	dir := outDir(t)
	keep, gone := filepath.Join(dir, "keep.txt"), filepath.Join(dir, "gone.txt")
	in := startDaemon(t, "stacks:\n"+stackYAML("keep", rk, pathConfig(keep))+
		stackYAML("gone", rg, pathConfig(gone)+"    destroyOnFinalize: true\n"), "")
	in.waitStack("keep", "deployed", time.Minute, isReady)
	in.waitStack("gone", "deployed", time.Minute, isReady)

	// The repository of the destroyed stack disappears with it.
	if err := os.RemoveAll(rg.dir); err != nil {
		t.Fatal(err)
	}
	in.reload("stacks: []\n")
	deadline := time.Now().Add(time.Minute)
	for {
		code, _ := in.get("/api/v1/stacks/gone", nil)
		if code == 404 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the removed stack is still listed: %v", in.stack("gone").Status.LastUpdate)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if readFile(t, gone) != "" {
		t.Fatal("destroyOnFinalize did not delete the stack's file")
	}
	if readFile(t, keep) != "hello k" {
		t.Fatal("a stack without destroyOnFinalize lost its file")
	}
	if code, _ := in.get("/api/v1/stacks/keep", nil); code != 404 {
		t.Fatalf("the removed stack keep is still listed (%d)", code)
	}
}

func TestE2EUnreachableRepoAndMissingSecret(t *testing.T) {
	t.Parallel()
	r := newRepo(t)
	r.commit(map[string]string{"Pulumi.yaml": program("v1")})
	out := filepath.Join(outDir(t), "note.txt")
	missing := filepath.Join(t.TempDir(), "later")
	config := "stacks:\n" + strings.Replace(stackYAML("app", r, pathConfig(out)+
		"    secretsRef:\n      token: {type: Secret, secret: {name: api, key: token}}\n"), "file://"+r.dir, "file://"+missing, 1)
	in := startDaemon(t, config, "")
	v := in.waitStack("app", "SourceUnavailable", time.Minute, stalledFor(model.ReasonSourceUnavailable))
	if c := v.Status.Condition(model.ConditionStalled); !strings.Contains(c.Message, "later") || !strings.Contains(c.Message, "(tried again every ") {
		t.Fatalf("message %q does not name the repository, or does not say stackd tries again", c.Message)
	}
	// stackd status says Stalled, the docs' word, beside Degraded.
	if code, stdout, stderr := stackd(t, "status", "--data-dir", in.flags.dataDir); code != exitOK || !strings.Contains(stdout, "Degraded") ||
		!strings.Contains(stdout, "Stalled/SourceUnavailable: ") {
		t.Fatalf("stackd status: %d\n%s%s", code, stdout, stderr)
	}

	if err := os.Rename(r.dir, missing); err != nil {
		t.Fatal(err)
	}
	secretFile := filepath.Join(in.flags.secretsDir, "api", "token")
	v = in.waitStack("app", "SpecInvalid", time.Minute, stalledFor(model.ReasonSpecInvalid))
	if c := v.Status.Condition(model.ConditionStalled); !strings.Contains(c.Message, secretFile) {
		t.Fatalf("message %q does not name %s", c.Message, secretFile)
	}
	if readFile(t, out) != "" || len(in.updates("app")) != 0 {
		t.Fatal("something ran without its source and secret")
	}
	if err := os.MkdirAll(filepath.Dir(secretFile), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(secretFile, []byte("tok-e2e-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	v = in.waitStack("app", "recovery", time.Minute, isReady)
	if output(v, "secret") != "[secret]" {
		t.Fatalf("secret output = %q, want [secret]", output(v, "secret"))
	}
}

// updates lists a stack's updates, oldest first.
func (in *instance) updates(name string) []model.Update {
	in.t.Helper()
	recs, err := in.app.d.Updates(name, 0, 1000)
	if err != nil {
		in.t.Fatal(err)
	}
	for i, j := 0, len(recs)-1; i < j; i, j = i+1, j-1 {
		recs[i], recs[j] = recs[j], recs[i]
	}
	return recs
}

// TestE2EStopDrainsThenInterrupts: a stop lets a running update finish
// within the drain deadline; past it, the update is interrupted, recorded
// as aborted, and leaves no lock on the backend. The update is held in
// the provider's create (its gate) when the stop comes: released once the
// stop waits for it, when it is to be drained; never, when it is to be
// interrupted.
func TestE2EStopDrainsThenInterrupts(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		drain time.Duration
		want  string
	}{
		{"drained", 30 * time.Second, model.UpdateSucceeded},
		{"interrupted", time.Second, model.UpdateAborted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRepo(t)
			r.commit(map[string]string{"Pulumi.yaml": program("v1")})
			out := filepath.Join(outDir(t), "note.txt")
			g := newGates(t)
			g.close("create", "note.txt")
			in := startDaemon(t, "stacks:\n"+stackYAML("app", r, pathConfig(out)+"    envRefs:\n"+g.envRef()), "")
			g.waitHeld("create", "note.txt", 2*time.Minute)
			a := in.app
			start := time.Now()
			grace, cancel := context.WithTimeout(context.Background(), tc.drain)
			defer cancel()
			stopped := make(chan error, 1)
			go func() { stopped <- a.stop(grace) }()
			if tc.want == model.UpdateSucceeded {
				// The stop waits for the held update: now it may end.
				waitFor(t, "the stop waiting for the update", time.Minute, func() bool {
					cs := a.d.ConfigStatus()
					return cs.Stopping && slices.Contains(cs.WaitingFor, "app (app-1)")
				})
				select {
				case err := <-stopped:
					t.Fatalf("the stop returned while the update was held: %v", err)
				default:
				}
				g.open("create", "note.txt")
			}
			if err := <-stopped; err != nil {
				t.Fatal(err)
			}
			took := time.Since(start)
			in.app = nil
			t.Logf("stop took %v", took.Round(time.Millisecond))
			dataDir := in.flags.dataDir
			locks, _ := lockFiles(dataDir)
			if len(locks) != 0 {
				t.Fatalf("locks left: %v", locks)
			}
			// Reopen the store read-only to see what was recorded.
			s, err := openReadOnly(dataDir)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			ups, err := s.Updates("app", 0, 10)
			if err != nil || len(ups) != 1 {
				t.Fatalf("updates = %v, %v", ups, err)
			}
			if ups[0].State != tc.want {
				t.Fatalf("update state = %q (%s), want %q", ups[0].State, ups[0].Message, tc.want)
			}
		})
	}
}

// TestE2EClientCommands drives status, sync and logs against a running
// daemon.
func TestE2EClientCommands(t *testing.T) {
	t.Parallel()
	r := newRepo(t)
	r.commit(map[string]string{"Pulumi.yaml": program("v1")})
	out := filepath.Join(outDir(t), "note.txt")
	in := startDaemon(t, "stacks:\n"+stackYAML("app", r, pathConfig(out)), "")
	in.waitStack("app", "first deploy", time.Minute, isReady)
	cli := func(args ...string) string {
		t.Helper()
		var stdout, stderr strings.Builder
		if code := run(context.Background(), in.clientArgs(args...), &stdout, &stderr); code != 0 {
			t.Fatalf("stackd %s: exit %d: %s", strings.Join(args, " "), code, stderr.String())
		}
		return stdout.String()
	}
	table := cli("status")
	if !strings.Contains(table, "NAME") || !strings.Contains(table, "app") || !strings.Contains(table, "Healthy") {
		t.Fatalf("status:\n%s", table)
	}
	var one model.StackView
	if err := json.Unmarshal([]byte(cli("status", "app", "--json")), &one); err != nil || one.Name != "app" {
		t.Fatalf("status --json: %v %+v", err, one)
	}
	if got := cli("sync", "app"); !strings.Contains(got, "sync of app requested") {
		t.Fatalf("sync: %s", got)
	}
	in.waitStack("app", "the sync", time.Minute, func(v model.StackView) bool {
		return isReady(v) && v.Status.LastUpdate.Name == "app-2"
	})
	if got := cli("logs", "app"); !strings.Contains(got, "hello v1") {
		t.Fatalf("logs:\n%s", got)
	}
	var stderr strings.Builder
	if code := run(context.Background(), []string{"status", "nope", "--server", in.url}, io.Discard, &stderr); code != 1 || !strings.Contains(stderr.String(), "404") {
		t.Fatalf("status of an unknown stack: exit %d, %s", code, stderr.String())
	}
}
