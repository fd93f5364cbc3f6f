package main

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stackd/stackd/daemon"
	"github.com/stackd/stackd/daemon/model"
	"github.com/stackd/stackd/daemon/notify"
	"github.com/stackd/stackd/daemon/spec"
)

func driftState(state string) func(v model.StackView) bool {
	return func(v model.StackView) bool { return v.Status.Drift != nil && v.Status.Drift.State == state }
}

// TestE2EDrift edits a deployed file out of band: the next check reports
// the stack Drifted naming that resource, and /metrics says so; putting
// the file back makes it InSync. With remediate, stackd puts it back
// itself; with an ignore rule, the drift is only counted.
func TestE2EDrift(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, extra string }{
		{"detect", ""},
		{"remediate", "      remediate: true\n"},
		{"ignore", "      ignore:\n        - {type: \"stackdtest:index:File\"}\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRepo(t)
			r.commit(map[string]string{"Pulumi.yaml": program("v1")})
			out := filepath.Join(outDir(t), "note.txt")
			receiver, events := notifyReceiver(t)
			in := startDaemonWith(t, "stacks:\n"+stackYAML("app", r, pathConfig(out)+
				"    driftDetection:\n      interval: 1s\n"+tc.extra), "", func(f *runFlags) {
				_ = f.notifyURLs.Set(receiver.URL)
			})
			in.waitStack("app", "in sync", time.Minute, driftState(spec.DriftInSync))
			if err := os.WriteFile(out, []byte("edited by hand"), 0o644); err != nil {
				t.Fatal(err)
			}
			switch tc.name {
			case "detect":
				v := in.waitStack("app", "drifted", time.Minute, driftState(spec.DriftDrifted))
				d := v.Status.Drift
				if len(d.Resources) != 1 || !strings.HasSuffix(d.Resources[0].URN, "File::note") ||
					d.Resources[0].Op != "update" || strings.Join(d.Resources[0].Properties, ",") != "content" {
					t.Fatalf("drift = %+v", d)
				}
				if !isReady(v) {
					t.Fatal("drift made the stack un-Ready")
				}
				prom := startPrometheus(t, tool(t, "prometheus"), in)
				prom.waitFor(`stackd_stack_drifted{stack="app"}`, "1")
				waitEvent(t, events, notify.DriftDetected)
				_, page := in.get("/stacks/app", nil)
				for _, want := range []string{"Drifted resources", "File::note", "<code>content</code>"} {
					if !strings.Contains(string(page), want) {
						t.Fatalf("the stack page lacks %q", want)
					}
				}
				if _, list := in.get("/", nil); !strings.Contains(string(list), "Drifted (1)") {
					t.Fatal("the stack list does not show the drift")
				}
				if readFile(t, out) != "edited by hand" {
					t.Fatal("a drift check changed the file")
				}
				if err := os.WriteFile(out, []byte("hello v1"), 0o644); err != nil {
					t.Fatal(err)
				}
				in.waitStack("app", "in sync after the fix", time.Minute, driftState(spec.DriftInSync))
				prom.waitFor(`stackd_stack_drifted{stack="app"}`, "0")
				waitEvent(t, events, notify.DriftResolved)
			case "remediate":
				deadline := time.Now().Add(time.Minute)
				for readFile(t, out) != "hello v1" {
					if time.Now().After(deadline) {
						t.Fatalf("stackd did not put the file back: %q", readFile(t, out))
					}
					time.Sleep(100 * time.Millisecond)
				}
				found := false
				for _, u := range in.updates("app") {
					found = found || (u.Type == model.UpdateUp && strings.HasPrefix(u.Reason, "Drift remediation after check"))
				}
				if !found {
					t.Fatalf("no update records the remediation: %+v", in.updates("app"))
				}
			case "ignore":
				v := in.waitStack("app", "the drift ignored", time.Minute, func(v model.StackView) bool {
					return v.Status.Drift != nil && v.Status.Drift.Ignored == 1
				})
				if v.Status.Drift.State != spec.DriftInSync {
					t.Fatalf("ignored drift reported: %+v", v.Status.Drift)
				}
				_, body := in.get("/metrics", nil)
				for _, want := range []string{`stackd_stack_drifted{stack="app"} 0`, `stackd_stack_drift_resources{op="ignored",stack="app"} 1`} {
					if !strings.Contains(string(body), want) {
						t.Fatalf("/metrics lacks %s", want)
					}
				}
			}
		})
	}
}

// TestE2EDriftCheckFailed: a check that cannot run is CheckFailed, never
// InSync.
func TestE2EDriftCheckFailed(t *testing.T) {
	t.Parallel()
	r := newRepo(t)
	r.commit(map[string]string{"Pulumi.yaml": program("v1")})
	dir := t.TempDir()
	out := filepath.Join(outDir(t), "note.txt")
	in := startDaemon(t, "stacks:\n"+stackYAML("app", r, pathConfig(out)+"    driftDetection:\n      interval: 1s\n"), filepath.Join(dir, "data"))
	in.waitStack("app", "in sync", time.Minute, driftState(spec.DriftInSync))
	// The stack's state disappears from its backend: checks fail.
	states, _ := filepath.Glob(filepath.Join(dir, "data", "backends", "*", ".pulumi"))
	if len(states) != 1 {
		t.Fatalf("the stack's own backend: %v", states)
	}
	if err := os.RemoveAll(states[0]); err != nil {
		t.Fatal(err)
	}
	v := in.waitStack("app", "check failed", time.Minute, driftState(spec.DriftCheckFailed))
	if v.Status.Drift.Message == "" {
		t.Fatal("a failed check without a message")
	}
	if _, body := in.get("/metrics", nil); !strings.Contains(string(body), `stackd_drift_checks_total{result="CheckFailed"}`) {
		t.Fatal("/metrics does not count the failed check")
	}
}

// waitEvent waits for a notification of kind about the stack app at the
// loopback receiver.
func waitEvent(t *testing.T, events <-chan notify.Event, kind string) notify.Event {
	t.Helper()
	return waitEventOf(t, events, kind, "app")
}

// waitEventOf waits for a notification of kind about stack at the
// loopback receiver.
func waitEventOf(t *testing.T, events <-chan notify.Event, kind, stack string) notify.Event {
	t.Helper()
	deadline := time.After(time.Minute)
	for {
		select {
		case e := <-events:
			if e.Kind == kind {
				if e.Stack != stack {
					t.Fatalf("event %+v", e)
				}
				return e
			}
		case <-deadline:
			t.Fatalf("no %s notification", kind)
		}
	}
}

// TestE2ESyncHealsDrift: a sync of a drifted stack refreshes first, so
// that the hand-edited file is put back, as Argo CD's Sync heals; the UI
// offers it as "Sync with refresh", the history says which sync ran, and
// the drift is cleared by that up at once (drift_resolved names it), not
// by the next check.
func TestE2ESyncHealsDrift(t *testing.T) {
	t.Parallel()
	r := newRepo(t)
	r.commit(map[string]string{"Pulumi.yaml": program("v1")})
	out := filepath.Join(outDir(t), "note.txt")
	receiver, events := notifyReceiver(t)
	in := startDaemonWith(t, "stacks:\n"+stackYAML("app", r, pathConfig(out)+"    driftDetection:\n      interval: 5s\n"), "",
		func(f *runFlags) { _ = f.notifyURLs.Set(receiver.URL) })
	in.waitStack("app", "in sync", time.Minute, driftState(spec.DriftInSync))
	if _, page := in.get("/stacks/app", nil); strings.Contains(string(page), "Sync with refresh") {
		t.Fatal("a stack in sync offers a sync with refresh")
	}
	if err := os.WriteFile(out, []byte("edited by hand"), 0o644); err != nil {
		t.Fatal(err)
	}
	in.waitStack("app", "drifted", time.Minute, driftState(spec.DriftDrifted))
	waitEvent(t, events, notify.DriftDetected)
	if _, page := in.get("/stacks/app", nil); !strings.Contains(string(page), "Sync with refresh") {
		t.Fatal("the page of a drifted stack does not offer a sync with refresh")
	}
	var stdout, stderr strings.Builder
	if code := run(context.Background(), in.clientArgs("sync", "app"), &stdout, &stderr); code != 0 ||
		!strings.Contains(stdout.String(), "with refresh") {
		t.Fatalf("stackd sync: exit %d: %s%s", code, stdout.String(), stderr.String())
	}
	v := in.waitStack("app", "the sync's up", time.Minute, func(v model.StackView) bool {
		lu := v.Status.LastUpdate
		return lu != nil && lu.State == model.UpdateSucceeded && lu.Type == model.UpdateUp && lu.ReconcileRequest != "" &&
			v.Status.CurrentUpdate == nil
	})
	var up model.Update
	for _, u := range in.updates("app") {
		if u.ID == v.Status.LastUpdate.Name {
			up = u
		}
	}
	if !strings.HasPrefix(up.Reason, daemon.SyncWithRefresh) {
		t.Fatalf("the sync's up does not say it refreshed: %+v", up)
	}
	if got := readFile(t, out); got != "hello v1" {
		t.Fatalf("the sync did not put the file back: %q", got)
	}
	if d := v.Status.Drift; d == nil || d.State != spec.DriftInSync || d.Check != up.ID {
		t.Fatalf("the drift was not cleared by the sync's up %s: %+v", up.ID, d)
	}
	if e := waitEvent(t, events, notify.DriftResolved); e.Update != up.ID {
		t.Fatalf("drift_resolved came from %s, not from the sync's up %s", e.Update, up.ID)
	}
}

// notifyReceiver is a loopback receiver of --notify-url events.
func notifyReceiver(t *testing.T) (*httptest.Server, <-chan notify.Event) {
	t.Helper()
	events := make(chan notify.Event, 16)
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var e notify.Event
		if json.NewDecoder(r.Body).Decode(&e) == nil {
			events <- e
		}
	}))
	t.Cleanup(receiver.Close)
	return receiver, events
}
