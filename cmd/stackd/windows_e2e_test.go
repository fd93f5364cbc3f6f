package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stackd/stackd/daemon/model"
	"github.com/stackd/stackd/daemon/review"
)

// oncallToken is a named API token whose role may override change
// windows; ciToken (rolesFile's operator) may only sync.
const oncallToken = "oncall-8e7d6c5b4a39281706f5e4d3c2b1a0f9e8d7c6b5a4938271605f4e3d2c1b0a9"

// windowRoles is rolesFile with a token that may override windows.
func windowRoles() string {
	return strings.Replace(rolesFile(false), "roles:\n", "  - name: oncall\n    sha256: "+sha256Hex(oncallToken)+"\n    roles: [oncall]\nroles:\n  oncall: {allow: [read, sync, override], stacks: [\"*\"]}\n", 1)
}

// overrideAs posts a sync with body to app with a bearer token.
func (in *instance) overrideAs(token string, body any) (int, []byte) {
	in.t.Helper()
	data, _ := json.Marshal(body)
	return in.postJSON("/api/v1/stacks/app/sync", data, map[string]string{"Authorization": "Bearer " + token, "Content-Type": "application/json"}, nil)
}

func waitsForWindow(v model.StackView) bool {
	c := v.Status.Condition(model.ConditionReconciling)
	return c != nil && c.Reason == model.ReasonChangeWindowClosed && v.Status.ChangeWindow != nil
}

// TestE2EChangeWindows: a deny window active now holds a commit back
// (ChangeWindowClosed, the file unchanged); an override needs the
// override role and a reason, applies the commit, and the audit trail
// and the update history say who and why. A deny window that ends a
// few seconds later lets the next commit through by itself.
func TestE2EChangeWindows(t *testing.T) {
	t.Parallel()
	r := newRepo(t)
	r.commit(map[string]string{"Pulumi.yaml": program("v1")})
	out := filepath.Join(outDir(t), "note.txt")
	authFile := filepath.Join(t.TempDir(), "roles.yaml")
	if err := os.WriteFile(authFile, []byte(windowRoles()), 0o600); err != nil {
		t.Fatal(err)
	}
	stacks := "stacks:\n" + stackYAML("app", r, pathConfig(out))
	in := startDaemonWith(t, stacks, "", func(f *runFlags) { f.authFile = authFile })
	in.waitStack("app", "first deploy", time.Minute, isReady)

	in.reload(stacks + "changeWindows:\n  - {name: freeze, kind: deny, schedule: '* * * * *', duration: 1h, stacks: [app]}\n")
	second := r.commit(map[string]string{"Pulumi.yaml": program("v2")})
	v := in.waitStack("app", "the commit to wait for the window", time.Minute, waitsForWindow)
	if cw := v.Status.ChangeWindow; cw.Change != "commit" || len(cw.Windows) != 1 || cw.Windows[0] != `deny window "freeze"` {
		t.Fatalf("changeWindow = %+v", cw)
	}
	time.Sleep(2 * time.Second) // polls come and go: still nothing runs
	if got := readFile(t, out); got != "hello v1" || len(in.updates("app")) != 1 {
		t.Fatalf("file = %q with %d updates in a closed window", got, len(in.updates("app")))
	}
	if code, stdout, stderr := stackd(t, in.clientArgs("status", "app")...); code != exitOK ||
		!strings.Contains(stdout, `ChangeWindowClosed: the change waits for deny window "freeze"; no window opens within a year`) {
		t.Fatalf("stackd status: %d\n%s%s", code, stdout, stderr)
	}

	// The operator may sync, not override; an override needs a reason.
	override := map[string]any{"overrideWindow": true, "reason": "INC-7 hotfix"}
	if code, body := in.overrideAs(ciToken, override); code != http.StatusForbidden ||
		!strings.Contains(string(body), "may not override stack app") {
		t.Fatalf("the operator's override: %d %s", code, body)
	}
	if code, body := in.overrideAs(oncallToken, map[string]any{"overrideWindow": true}); code != http.StatusBadRequest {
		t.Fatalf("an override without a reason: %d %s", code, body)
	}
	if code, _, stderr := stackd(t, in.clientArgs("sync", "app", "--override-window")...); code != exitUsage || !strings.Contains(stderr, "--reason") {
		t.Fatalf("stackd sync --override-window without --reason: %d %s", code, stderr)
	}
	time.Sleep(time.Second)
	if got := readFile(t, out); got != "hello v1" {
		t.Fatalf("file = %q after refused overrides", got)
	}

	tokenFile := filepath.Join(t.TempDir(), "oncall-token")
	if err := os.WriteFile(tokenFile, []byte(oncallToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := stackd(t, in.clientArgs("sync", "app", "--override-window", "--reason", "INC-7 hotfix", "--api-token-file", tokenFile)...)
	if code != exitOK || !strings.Contains(stdout, "through its change windows") {
		t.Fatalf("stackd sync --override-window: %d %s%s", code, stdout, stderr)
	}
	v = in.waitStack("app", "the overridden commit", time.Minute, func(v model.StackView) bool {
		return isReady(v) && v.Status.LastUpdate.LastSuccessfulCommit == second
	})
	if got := readFile(t, out); got != "hello v2" || v.Status.ChangeWindow != nil {
		t.Fatalf("file = %q, changeWindow %+v after the override", got, v.Status.ChangeWindow)
	}
	var history struct{ Updates []model.Update }
	if code, body := in.get("/api/v1/stacks/app/updates", &history); code != http.StatusOK || len(history.Updates) != 2 {
		t.Fatalf("history: %d %s", code, body)
	}
	if o := history.Updates[0].WindowOverride; o == nil || o.By.Name != "oncall" || o.By.Kind != model.PrincipalToken || o.Reason != "INC-7 hotfix" {
		t.Fatalf("the update's override: %+v", history.Updates[0])
	}
	entries := in.audit("?stack=app")
	var kinds []string
	for _, e := range entries {
		kinds = append(kinds, fmt.Sprintf("%s:%s:%s", e.Principal.Name, e.Action, e.Outcome))
	}
	if want := "oncall:override:allowed oncall:override:failed ci:override:denied"; strings.Join(kinds, " ") != want {
		t.Fatalf("the trail of app: %v, want %s", kinds, want)
	}
	if e := entries[0]; e.Reason != "INC-7 hotfix" || e.Status != http.StatusAccepted {
		t.Fatalf("the override's record: %+v", e)
	}

	// A window that ends soon: the commit waits, then runs by itself.
	now := time.Now().UTC()
	start := now.Truncate(time.Minute).Add(-time.Minute)
	end := now.Add(20 * time.Second).Truncate(time.Second)
	in.reload(stacks + fmt.Sprintf("changeWindows:\n  - {name: brief, kind: deny, schedule: '%d %d * * *', duration: %s, stacks: [app]}\n",
		start.Minute(), start.Hour(), end.Sub(start)))
	third := r.commit(map[string]string{"Pulumi.yaml": program("v3")})
	v = in.waitStack("app", "the next commit to wait", time.Until(end), waitsForWindow)
	if !v.Status.ChangeWindow.NextOpen.Equal(end) {
		t.Fatalf("nextOpen = %v, want %v", v.Status.ChangeWindow.NextOpen, end)
	}
	v = in.waitStack("app", "the window to open", time.Until(end)+time.Minute, func(v model.StackView) bool {
		return isReady(v) && v.Status.LastUpdate.LastSuccessfulCommit == third
	})
	ups := in.updates("app")
	if last := ups[len(ups)-1]; len(ups) != 3 || last.StartTime.Before(end) || last.WindowOverride != nil || !strings.Contains(last.Reason, "New commit") {
		t.Fatalf("updates: %+v", ups)
	}
	if got := readFile(t, out); got != "hello v3" {
		t.Fatalf("file = %q once the window opened", got)
	}
}

// TestE2EChangeWindowSkipsOtherPaths: in a monorepo under a closed
// change window, a commit that changes no file of a stack's paths is
// skipped by that stack, as in an open window, not held back; the stack
// whose files it changes waits for the window, and so does the first
// stack at a commit of its own.
func TestE2EChangeWindowSkipsOtherPaths(t *testing.T) {
	t.Parallel()
	toolchainBin(t)
	r := newRepo(t)
	project := func(name, v string) map[string]string {
		return map[string]string{"infra/" + name + "/Pulumi.yaml": fmt.Sprintf("name: %s\nruntime: yaml\noutputs:\n  v: %s\n", name, v)}
	}
	r.commit(project("net", "v1"))
	r.commit(project("app", "v1"))
	stacks := "stacks:\n" + stackYAML("net", r, "    repoDir: infra/net\n") + stackYAML("app", r, "    repoDir: infra/app\n")
	in := startDaemon(t, stacks, "")
	for _, name := range []string{"net", "app"} {
		in.waitStack(name, "deployed", 2*time.Minute, isReady)
	}
	in.reload(stacks + "changeWindows:\n  - {name: freeze, kind: deny, schedule: '* * * * *', duration: 1h, stacks: [net, app]}\n")

	netCommit := r.commit(project("net", "v2"))
	in.waitStack("net", "net's commit to wait for the window", time.Minute, waitsForWindow)
	v := in.waitStack("app", "net's commit skipped", time.Minute, func(v model.StackView) bool {
		sc := v.Status.SkippedCommit
		return sc != nil && sc.Commit == netCommit
	})
	if !isReady(v) || v.Status.ChangeWindow != nil {
		t.Fatalf("app after a commit outside its paths: ready %t, changeWindow %+v, conditions %+v", isReady(v), v.Status.ChangeWindow, v.Status.Conditions)
	}

	r.commit(project("app", "v2"))
	in.waitStack("app", "app's commit to wait for the window", time.Minute, waitsForWindow)
	if n, a := len(in.updates("net")), len(in.updates("app")); n != 1 || a != 1 {
		t.Fatalf("updates in a closed window: net %d, app %d; want 1 and 1", n, a)
	}
}

// TestE2ESyncInClosedWindow: stackd sync of a stack that change windows
// hold back says that it waits, until when, and how to override, with
// exit code 3; the request stays, and nothing runs.
func TestE2ESyncInClosedWindow(t *testing.T) {
	t.Parallel()
	r := newRepo(t)
	r.commit(map[string]string{"Pulumi.yaml": program("v1")})
	out := filepath.Join(outDir(t), "note.txt")
	stacks := "stacks:\n" + stackYAML("app", r, pathConfig(out))
	in := startDaemon(t, stacks, "")
	in.waitStack("app", "first deploy", time.Minute, isReady)
	if code, stdout, stderr := stackd(t, in.clientArgs("sync", "app")...); code != exitOK || stderr != "" {
		t.Fatalf("stackd sync in an open window: %d %s%s", code, stdout, stderr)
	}
	in.waitStack("app", "the sync", time.Minute, func(v model.StackView) bool { return isReady(v) && len(in.updates("app")) == 2 })

	start := time.Now().UTC().Truncate(time.Minute).Add(-time.Minute)
	in.reload(stacks + fmt.Sprintf("changeWindows:\n  - {name: freeze, kind: deny, schedule: '%d %d * * *', duration: 2h, stacks: [app]}\n",
		start.Minute(), start.Hour()))
	code, stdout, stderr := stackd(t, in.clientArgs("sync", "app")...)
	want := fmt.Sprintf(`the change waits until %s for deny window "freeze"`, start.Add(2*time.Hour).Format("2006-01-02 15:04 MST"))
	if code != exitWaits || !strings.Contains(stdout, "sync of app requested") || !strings.Contains(stderr, "change windows are closed: "+want) ||
		!strings.Contains(stderr, "--override-window --reason") {
		t.Fatalf("stackd sync in a closed window: %d\n%s%s", code, stdout, stderr)
	}
	in.waitStack("app", "the sync to wait for the window", time.Minute, waitsForWindow)
	if n := len(in.updates("app")); n != 2 {
		t.Fatalf("%d updates after a sync in a closed window, want 2", n)
	}
}

// TestE2EManualSync: a new commit waits for a deny window with
// manualSync; stackd sync applies it at once (exit 0, the update says
// manualSync) and the next commit waits again. Under a window without
// manualSync the same sync waits (exit 3) and nothing runs.
func TestE2EManualSync(t *testing.T) {
	t.Parallel()
	r := newRepo(t)
	r.commit(map[string]string{"Pulumi.yaml": program("v1")})
	out := filepath.Join(outDir(t), "note.txt")
	stacks := "stacks:\n" + stackYAML("app", r, pathConfig(out))
	in := startDaemon(t, stacks, "")
	in.waitStack("app", "first deploy", time.Minute, isReady)

	in.reload(stacks + "changeWindows:\n  - {name: nightly, kind: deny, schedule: '* * * * SUN-SAT', duration: 1h, stacks: [app], manualSync: true}\n")
	second := r.commit(map[string]string{"Pulumi.yaml": program("v2")})
	in.waitStack("app", "the commit to wait for the window", time.Minute, waitsForWindow)
	time.Sleep(2 * time.Second) // polls come and go: still nothing runs
	if got := readFile(t, out); got != "hello v1" || len(in.updates("app")) != 1 {
		t.Fatalf("file = %q with %d updates in a closed window", got, len(in.updates("app")))
	}
	if code, stdout, stderr := stackd(t, in.clientArgs("sync", "app")...); code != exitOK || stderr != "" {
		t.Fatalf("stackd sync through a manualSync window: %d %s%s", code, stdout, stderr)
	}
	in.waitStack("app", "the manual sync's deploy", time.Minute, func(v model.StackView) bool { return isReady(v) && len(in.updates("app")) == 2 })
	if got, u := readFile(t, out), in.updates("app")[1]; got != "hello v2" || u.Commit != second || !u.ManualSync || u.WindowOverride != nil {
		t.Fatalf("file = %q, update %+v", got, u)
	}
	r.commit(map[string]string{"Pulumi.yaml": program("v3")})
	in.waitStack("app", "the next commit to wait for the window", time.Minute, waitsForWindow)

	in.reload(stacks + "changeWindows:\n  - {name: freeze, kind: deny, schedule: '* * * * *', duration: 1h, stacks: [app]}\n")
	code, stdout, stderr := stackd(t, in.clientArgs("sync", "app")...)
	if code != exitWaits || !strings.Contains(stderr, `deny window "freeze"`) {
		t.Fatalf("stackd sync through a window without manualSync: %d\n%s%s", code, stdout, stderr)
	}
	in.waitStack("app", "the sync to wait for the window", time.Minute, waitsForWindow)
	time.Sleep(2 * time.Second)
	if got := readFile(t, out); got != "hello v2" || len(in.updates("app")) != 2 {
		t.Fatalf("file = %q with %d updates after a sync in a window without manualSync", got, len(in.updates("app")))
	}
}

// TestE2EPullRequestPreviewSaysWindowsWait: the comment of a pull
// request's preview names the stacks that change windows would hold
// back after a merge, and until when.
func TestE2EPullRequestPreviewSaysWindowsWait(t *testing.T) {
	t.Parallel()
	toolchainBin(t)
	g := newForgeRig(t, review.GitHub)
	programs := g.repo("infra")
	programs.commit(map[string]string{"app/Pulumi.yaml": program("v1")})
	out := outDir(t)
	config := manifest("app", g.url("infra"), out, "hello")
	g.start(config, nil)
	g.in.waitStack("app", "first deploy", 2*time.Minute, isReady)

	start := time.Now().UTC().Truncate(time.Minute).Add(-time.Minute)
	g.in.reload(config + fmt.Sprintf("changeWindows:\n  - {name: freeze, kind: deny, schedule: '%d %d * * *', duration: 2h, stacks: [app]}\n",
		start.Minute(), start.Hour()))
	pr := &pullRequest{repo: "acme/infra", name: "infra", number: 3}
	g.push(programs, pr, map[string]string{"app/Pulumi.yaml": program("v2")})
	g.hook(pr, "opened")
	c := g.waitComment(pr)
	want := fmt.Sprintf("Merged now, `app` waits for change windows until %s: deny window \"freeze\".", start.Add(2*time.Hour).Format("2006-01-02 15:04 MST"))
	if !strings.Contains(c.Body, want) {
		t.Fatalf("the comment lacks %q:\n%s", want, c.Body)
	}
	if got := readFile(t, filepath.Join(out, "app.txt")); got != "hello v1" {
		t.Fatalf("file = %q after a preview", got)
	}
}
