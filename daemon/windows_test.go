package daemon

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stackd/stackd/daemon/model"
	"github.com/stackd/stackd/daemon/spec"
)

// windowed is oneStack with a change window of app.
func windowed(kind, schedule, duration string) string {
	return oneStack + fmt.Sprintf("changeWindows:\n  - {name: w, kind: %s, schedule: %q, duration: %s, stacks: [app]}\n", kind, schedule, duration)
}

func reconciling(h *harness, name string) *model.Condition {
	v, err := h.d.Stack(name)
	if err != nil {
		return nil
	}
	return v.Status.Condition(model.ConditionReconciling)
}

func TestChangeWindowHoldsUntilOverridden(t *testing.T) {
	h := newHarness(t, windowed("deny", "* * * * *", "1h"), nil)
	h.fetcher.set("https://git.example/app.git", sha1, nil)
	h.start()
	h.eventually("the window to hold the first deploy", func() bool {
		c := reconciling(h, "app")
		return c != nil && c.Reason == model.ReasonChangeWindowClosed
	})
	v, _ := h.d.Stack("app")
	cw := v.Status.ChangeWindow
	if cw == nil || cw.Change != spec.ChangeCommit || !cw.NextOpen.IsZero() || len(cw.Windows) != 1 || cw.Windows[0] != `deny window "w"` {
		t.Fatalf("changeWindow = %+v", cw)
	}
	if msg := reconciling(h, "app").Message; msg != `the change waits for deny window "w"; no window opens within a year` {
		t.Fatalf("message = %q", msg)
	}
	if ws, msg := h.d.SyncWindow("app"); ws == nil || ws.Change != spec.ChangeCommit || msg != `the change waits for deny window "w"; no window opens within a year` {
		t.Fatalf("SyncWindow = %+v, %q", ws, msg)
	}
	time.Sleep(100 * time.Millisecond) // polls and passes come and go
	if ops := h.runner.opsOf("app"); len(ops) != 0 {
		t.Fatalf("ran %d operations in a closed window", len(ops))
	}

	if _, err := h.d.OverrideWindow("app", model.Principal{Kind: model.PrincipalToken, Name: "ops"}, "  "); !errors.Is(err, ErrNoReason) {
		t.Fatalf("an override without a reason: %v", err)
	}
	if _, err := h.d.OverrideWindow("nope", model.Principal{}, "x"); !errors.Is(err, ErrUnknownStack) {
		t.Fatalf("an override of an unknown stack: %v", err)
	}
	token, err := h.d.OverrideWindow("app", model.Principal{Kind: model.PrincipalToken, Name: "ops"}, "hotfix for INC-7")
	if err != nil {
		t.Fatal(err)
	}
	h.eventually("the overridden deploy", func() bool { return h.ready("app") })
	ups := h.store.updatesOf("app")
	if len(ups) != 1 || ups[0].ReconcileRequest != token || ups[0].WindowOverride == nil ||
		ups[0].WindowOverride.By.Name != "ops" || ups[0].WindowOverride.Reason != "hotfix for INC-7" {
		t.Fatalf("updates = %+v", ups)
	}
	if rec, _ := h.store.Stack("app"); rec.WindowOverride != nil || rec.Status.ChangeWindow != nil {
		t.Fatalf("the override was not used up: %+v", rec)
	}

	h.fetcher.set("https://git.example/app.git", sha2, nil)
	h.eventually("the window to hold the next commit", func() bool {
		c := reconciling(h, "app")
		return c != nil && c.Reason == model.ReasonChangeWindowClosed
	})
	if ops := h.runner.opsOf("app"); len(ops) != 1 {
		t.Fatalf("ran %d operations, want the overridden one only", len(ops))
	}
}

// TestChangeWindowManualSync: a deny window with manualSync holds what
// runs by itself (the first deploy, a new commit) and lets a sync asked
// through the API run, once: the update records it, and the next commit
// waits again. Without manualSync the same sync waits.
func TestChangeWindowManualSync(t *testing.T) {
	for _, manual := range []bool{true, false} {
		t.Run(fmt.Sprintf("manualSync %v", manual), func(t *testing.T) {
			cfg := oneStack + fmt.Sprintf("changeWindows:\n  - {name: w, kind: deny, schedule: '* * * * *', duration: 1h, stacks: [app], manualSync: %v}\n", manual)
			h := newHarness(t, cfg, nil)
			h.fetcher.set("https://git.example/app.git", sha1, nil)
			h.start()
			held := func() bool {
				c := reconciling(h, "app")
				return c != nil && c.Reason == model.ReasonChangeWindowClosed
			}
			h.eventually("the window to hold the first deploy", held)
			token, err := h.d.Sync("app")
			if err != nil {
				t.Fatal(err)
			}
			if ws, _ := h.d.SyncWindow("app"); (ws == nil) != manual {
				t.Fatalf("SyncWindow = %+v", ws)
			}
			if !manual {
				time.Sleep(100 * time.Millisecond)
				if rec, _ := h.store.Stack("app"); len(h.runner.opsOf("app")) != 0 || !held() || !rec.ManualSync || rec.SyncRequest != token {
					t.Fatalf("a manual sync ran through a window without manualSync, or was not kept: %+v", rec)
				}
				return
			}
			h.eventually("the manual sync's deploy", func() bool { return h.ready("app") })
			if ups := h.store.updatesOf("app"); len(ups) != 1 || ups[0].ReconcileRequest != token || !ups[0].ManualSync || ups[0].WindowOverride != nil {
				t.Fatalf("updates = %+v", ups)
			}
			if rec, _ := h.store.Stack("app"); rec.ManualSync {
				t.Fatal("the manual sync was not used up")
			}
			h.fetcher.set("https://git.example/app.git", sha2, nil)
			h.eventually("the window to hold the next commit", held)
			if ops := h.runner.opsOf("app"); len(ops) != 1 {
				t.Fatalf("ran %d operations, want the manual sync's only", len(ops))
			}
		})
	}
}

// TestChangeWindowOpensByItself: a deny window that ends in ten seconds
// lets the waiting change run then, without a poll or a sync. The test
// must see the change held before the window ends: ten seconds, not
// three, leave a busy machine the time to start the daemon and poll.
func TestChangeWindowOpensByItself(t *testing.T) {
	now := time.Now().UTC()
	start := now.Truncate(time.Minute).Add(-time.Minute)
	end := now.Add(10 * time.Second).Truncate(time.Second)
	h := newHarness(t, windowed("deny", fmt.Sprintf("%d %d * * *", start.Minute(), start.Hour()), end.Sub(start).String()), func(o *Options) {
		o.pollEvery = time.Hour // only the window's timer can start it
	})
	h.fetcher.set("https://git.example/app.git", sha1, nil)
	h.start()
	h.eventually("the window to hold the deploy", func() bool {
		v, _ := h.d.Stack("app")
		return v.Status.ChangeWindow != nil && v.Status.ChangeWindow.NextOpen.Equal(end)
	})
	h.eventually("the deploy once the window ends", func() bool { return h.ready("app") })
	if ups := h.store.updatesOf("app"); len(ups) != 1 || ups[0].StartTime.Before(end) {
		t.Fatalf("updates = %+v", ups)
	}
	if v, _ := h.d.Stack("app"); v.Status.ChangeWindow != nil {
		t.Fatalf("changeWindow = %+v", v.Status.ChangeWindow)
	}
}

// TestChangeWindowGatesDriftRemediation: a window that gates drift holds
// a remediation back, and says so; one that gates commits only lets it
// run.
func TestChangeWindowGatesDriftRemediation(t *testing.T) {
	const manifest = oneStack + `    driftDetection: {interval: 1ms, remediate: true}
changeWindows:
  - {name: w, kind: deny, schedule: "* * * * *", duration: 1h, stacks: [app], changes: [%s]}
`
	remediated := func(h *harness) bool {
		for _, op := range h.runner.opsOf("app") {
			if op.Type == model.UpdateUp && op.Refresh {
				return true
			}
		}
		return false
	}
	for _, gated := range []string{spec.ChangeDrift, spec.ChangeCommit + ", " + spec.ChangeDestroy} {
		t.Run(gated, func(t *testing.T) {
			// The first deploy is a commit: the stack deploys with a
			// window of another stack, then gets its own.
			h := newHarness(t, fmt.Sprintf(strings.Replace(manifest, "stacks: [app]", "stacks: [other]", 1), gated), nil)
			h.fetcher.set("https://git.example/app.git", sha1, nil)
			h.start()
			h.eventually("the first deploy", func() bool { return h.ready("app") })
			if err := h.d.Apply(h.parse(fmt.Sprintf(manifest, gated))); err != nil {
				t.Fatal(err)
			}
			h.runner.mu.Lock()
			h.runner.drift = []spec.DriftedResource{{URN: "urn:pulumi:dev::p::stackdtest:index:File::note", Type: "stackdtest:index:File", Op: "update", Properties: []string{"content"}}}
			h.runner.mu.Unlock()
			if gated != spec.ChangeDrift {
				h.eventually("the remediation", func() bool { return remediated(h) })
				return
			}
			h.eventually("the remediation to wait", func() bool {
				v, _ := h.d.Stack("app")
				return v.Status.ChangeWindow != nil && v.Status.ChangeWindow.Change == spec.ChangeDrift
			})
			if msg := reconciling(h, "app").Message; !strings.HasPrefix(msg, "the drift remediation waits for") {
				t.Fatalf("message = %q", msg)
			}
			time.Sleep(100 * time.Millisecond)
			if remediated(h) {
				t.Fatal("remediated in a closed window")
			}
		})
	}
}
