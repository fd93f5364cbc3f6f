package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stackd/stackd/daemon/decide"
	"github.com/stackd/stackd/daemon/model"
)

// fakeOwnership is a cluster as one replica ("me") sees it, driven by the
// test. The real one is tested with etcd in cluster and cmd/stackd.
type fakeOwnership struct {
	mu       sync.Mutex
	held     map[string]bool
	released []string
	requests map[string]string
	events   chan model.OwnershipEvent
}

func newFakeOwnership() *fakeOwnership {
	return &fakeOwnership{held: map[string]bool{}, requests: map[string]string{}, events: make(chan model.OwnershipEvent, 16)}
}

func (o *fakeOwnership) SetStacks([]string) {}

func (o *fakeOwnership) Holds(name string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.held[name]
}

func (o *fakeOwnership) Holder(name string) string {
	if o.Holds(name) {
		return "me"
	}
	return "other"
}

func (o *fakeOwnership) Release(name string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.held, name)
	o.released = append(o.released, name)
}

func (o *fakeOwnership) Events() <-chan model.OwnershipEvent { return o.events }

func (o *fakeOwnership) RequestSync(name, token string) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.requests[name] = token
	return nil
}

func (o *fakeOwnership) Push([]string, string) error { return nil }

func (o *fakeOwnership) Status() model.ClusterStatus {
	return model.ClusterStatus{Node: "me", Leader: "me", Session: true}
}

func (o *fakeOwnership) set(name string, held bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.held[name] = held
}

// gain makes this replica hold name, as the cluster does: the key first,
// then the event.
func (o *fakeOwnership) gain(name string) {
	o.set(name, true)
	o.events <- model.OwnershipEvent{Kind: model.OwnerGained, Stack: name}
}

func (o *fakeOwnership) wasReleased(name string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Contains(o.released, name)
}

const twoStacks = oneStack + `  - name: db
    stack: db
    projectRepo: https://git.example/app.git
    branch: main
`

func clusterHarness(t *testing.T, o *fakeOwnership) *harness {
	h := newHarness(t, twoStacks, func(opts *Options) {
		opts.Ownership, opts.Node, opts.HandoverGrace = o, "me", 300*time.Millisecond
	})
	h.fetcher.set("https://git.example/app.git", sha1, nil)
	return h
}

// TestClusterActsOnHeldStacksOnly: a stack held elsewhere is neither run
// nor written; once gained, it is.
func TestClusterActsOnHeldStacksOnly(t *testing.T) {
	o := newFakeOwnership()
	h := clusterHarness(t, o)
	h.start()
	o.gain("app")
	h.eventually("app deployed", func() bool { return h.ready("app") })
	time.Sleep(100 * time.Millisecond)
	if ops := h.runner.opsOf("db"); len(ops) != 0 {
		t.Fatalf("db, held elsewhere, ran %d operations", len(ops))
	}
	h.store.mu.Lock()
	_, written := h.store.stacks["db"]
	h.store.mu.Unlock()
	if written {
		t.Fatal("db, held elsewhere, was written")
	}
	if u := h.store.updatesOf("app"); len(u) != 1 || u[0].Node != "me" {
		t.Fatalf("app's updates = %+v", u)
	}
	o.gain("db")
	h.eventually("db deployed once gained", func() bool { return h.ready("db") })
}

// TestClusterHandoverWaitsForTheOperation: a stack to hand over is
// released only once its running operation ended, however long past the
// handover grace (it is not interrupted: the member that should hold the
// stack, one that joined or came back, waits), and starts nothing more.
func TestClusterHandoverWaitsForTheOperation(t *testing.T) {
	o, h := gainedRunning(t, false)
	o.events <- model.OwnershipEvent{Kind: model.OwnerHandover, Stack: "app"}
	// The daemon took the handover in (it may take a while on a busy
	// machine); from then on, well past the grace, the stack stays.
	h.eventually("the handover taken in", func() bool {
		h.d.mu.Lock()
		defer h.d.mu.Unlock()
		return h.d.stacks["app"].releasing
	})
	time.Sleep(3 * h.d.opts.HandoverGrace)
	if o.wasReleased("app") {
		t.Fatal("released while its operation runs")
	}
	h.runner.gate <- struct{}{}
	h.eventually("released once idle", func() bool { return o.wasReleased("app") })
	time.Sleep(100 * time.Millisecond)
	if n := len(h.runner.opsOf("app")); n != 1 {
		t.Fatalf("%d operations after the handover", n)
	}
	if u := h.store.updatesOf("app"); len(u) != 1 || u[0].State != model.UpdateSucceeded {
		t.Fatalf("updates = %+v, want the one succeeded", u)
	}
}

// gainedRunning starts a replica's daemon that gains "app" and runs its
// first operation, held at the runner's gate (deaf: cancellation does not
// end it either).
func gainedRunning(t *testing.T, deaf bool) (*fakeOwnership, *harness) {
	t.Helper()
	o := newFakeOwnership()
	h := clusterHarness(t, o)
	h.runner.gate, h.runner.deaf = make(chan struct{}), deaf
	h.start()
	o.gain("app")
	h.eventually("app running", func() bool { return len(h.runner.opsOf("app")) == 1 })
	return o, h
}

// TestClusterLostInterrupts: a lost stack's operation is interrupted at
// once, and its outcome is not written by this replica. The loss is
// acknowledged (released) only once that operation ended, so that the
// replica cannot take the stack again while it may still write.
func TestClusterLostInterrupts(t *testing.T) {
	o, h := gainedRunning(t, false)
	o.set("app", false)
	o.events <- model.OwnershipEvent{Kind: model.OwnerLost, Stack: "app"}
	h.eventually("operation interrupted", func() bool {
		h.runner.mu.Lock()
		defer h.runner.mu.Unlock()
		return h.runner.running == 0
	})
	h.eventually("loss acknowledged", func() bool { return o.wasReleased("app") })
	time.Sleep(100 * time.Millisecond)
	if n := len(h.runner.opsOf("app")); n != 1 {
		t.Fatalf("%d operations after losing the stack", n)
	}
}

// TestClusterLossAcknowledgedAfterOperation: an operation that does not
// stop at once when its stack is lost delays the acknowledgement.
func TestClusterLossAcknowledgedAfterOperation(t *testing.T) {
	o, h := gainedRunning(t, true)
	o.set("app", false)
	o.events <- model.OwnershipEvent{Kind: model.OwnerLost, Stack: "app"}
	// The daemon took the loss in (it may take a while on a busy
	// machine); then a few passes come and go.
	h.eventually("the loss taken in", func() bool {
		h.d.mu.Lock()
		defer h.d.mu.Unlock()
		return !h.d.stacks["app"].held
	})
	time.Sleep(200 * time.Millisecond)
	if o.wasReleased("app") {
		t.Fatal("loss acknowledged while the operation of that holding runs")
	}
	h.runner.gate <- struct{}{}
	h.eventually("loss acknowledged", func() bool { return o.wasReleased("app") })
	if u := h.store.updatesOf("app"); len(u) != 1 || u[0].State != model.UpdateRunning {
		t.Errorf("updates after a lost operation ended = %+v, want its record untouched", u)
	}
}

// TestClusterGainedFromDeadHolder: a stack gained from a holder that died
// during an update has that update marked aborted, and its next
// operation waits for the grace and breaks the lock.
func TestClusterGainedFromDeadHolder(t *testing.T) {
	o := newFakeOwnership()
	h := clusterHarness(t, o)
	left, err := h.store.BeginUpdate(model.Update{Stack: "app", Type: model.UpdateUp, State: model.UpdateRunning, Node: "node-9", StartTime: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	h.start()
	gained := time.Now()
	o.gain("app")
	h.eventually("app deployed", func() bool { return h.ready("app") })
	u, _ := h.store.Update(left.ID)
	if u.State != model.UpdateAborted || !strings.Contains(u.Message, "node-9") {
		t.Fatalf("update left running = %+v", u)
	}
	ops := h.runner.opsOf("app")
	if len(ops) != 1 || !ops[0].BreakLock {
		t.Fatalf("operations = %+v, want one that breaks the lock", ops)
	}
	next := h.store.updatesOf("app")[1]
	if wait := next.StartTime.Sub(gained); wait < 300*time.Millisecond {
		t.Fatalf("the next update started %s after the stack was gained, within the grace", wait)
	}
}

// TestClusterGainedAfterInterruption: a stack whose last holder
// interrupted its update at the end of a handover grace may still be
// locked: the new holder breaks the lock, after the grace.
func TestClusterGainedAfterInterruption(t *testing.T) {
	o := newFakeOwnership()
	h := clusterHarness(t, o)
	u, err := h.store.BeginUpdate(model.Update{Stack: "app", Type: model.UpdateUp, State: model.UpdateRunning, Node: "node-9", StartTime: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	u.State, u.EndTime = model.UpdateAborted, time.Now()
	if err := h.store.PutUpdate(u); err != nil {
		t.Fatal(err)
	}
	h.start()
	o.gain("app")
	h.eventually("app deployed", func() bool { return h.ready("app") })
	if ops := h.runner.opsOf("app"); len(ops) != 1 || !ops[0].BreakLock {
		t.Fatalf("operations = %+v, want one that breaks the lock", ops)
	}
}

// TestClusterSyncGoesToTheHolder: a sync request for a stack held
// elsewhere is passed to its holder, not applied here.
func TestClusterSyncGoesToTheHolder(t *testing.T) {
	o := newFakeOwnership()
	h := clusterHarness(t, o)
	h.start()
	o.gain("app")
	token, err := h.d.Sync("db")
	if err != nil {
		t.Fatal(err)
	}
	o.mu.Lock()
	got := o.requests["db"]
	o.mu.Unlock()
	if got != decide.ManualToken(token) { // a person's sync: manualSync windows let it through
		t.Fatalf("request passed on = %q, want %q", got, decide.ManualToken(token))
	}
	if v, _ := h.d.Stack("db"); v.Holder != "other" {
		t.Fatalf("db's holder = %q", v.Holder)
	}
	// The holder takes the mark off, and keeps that a person asked.
	h.eventually("app taken over", func() bool { return h.ready("app") })
	h.d.syncRequested("app", decide.ManualToken("t1"))
	h.eventually("the update of a person's sync passed on", func() bool {
		ups := h.store.updatesOf("app")
		return len(ups) > 0 && strings.HasSuffix(ups[len(ups)-1].ReconcileRequest, "t1") && ups[len(ups)-1].ManualSync
	})
}

// TestStopAbortsWithoutFailing: an update interrupted by a stop is
// recorded as aborted and counts as no failure: three restarts during
// updates do not stall a stack.
func TestStopAbortsWithoutFailing(t *testing.T) {
	store := newMemStore()
	for i := range 3 {
		h := newHarness(t, oneStack, func(o *Options) { o.Store = store })
		h.fetcher.set("https://git.example/app.git", sha1, nil)
		h.runner.gate = make(chan struct{})
		h.start()
		h.eventually("running", func() bool { return len(h.runner.opsOf("app")) == 1 })
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
		_ = h.d.Stop(ctx)
		cancel()
		us := store.updatesOf("app")
		if len(us) != i+1 || us[i].State != model.UpdateAborted {
			t.Fatalf("restart %d: updates %+v", i+1, us)
		}
		rec, _ := store.Stack("app")
		if rec.Status.LastUpdate != nil || rec.Status.CurrentUpdate != nil {
			t.Fatalf("restart %d: last update %+v, current %+v; want neither", i+1, rec.Status.LastUpdate, rec.Status.CurrentUpdate)
		}
	}
	h := newHarness(t, oneStack, func(o *Options) { o.Store = store })
	h.fetcher.set("https://git.example/app.git", sha1, nil)
	h.start()
	h.eventually("deployed after three interrupted starts", func() bool { return h.ready("app") })
}

// TestConditionMessagesInPKOWording: Argo CD users read PKO's wording
// first ("stack is being processed", "N update failure(s)"), then ours.
func TestConditionMessagesInPKOWording(t *testing.T) {
	h := newHarness(t, oneStack, func(o *Options) { o.BackoffBase = time.Hour })
	h.fetcher.set("https://git.example/app.git", sha1, nil)
	h.runner.setFail("app", errors.New("program failed: boom"))
	h.runner.gate = make(chan struct{})
	h.start()
	h.eventually("running", func() bool { return len(h.runner.opsOf("app")) == 1 })
	v, _ := h.d.Stack("app")
	if c := v.Status.Condition(model.ConditionReconciling); c == nil || c.Message != "stack is being processed: Initial stack update" {
		t.Errorf("while running: %+v", c)
	}
	h.runner.gate <- struct{}{}
	h.eventually("failed once", func() bool { l := h.last("app"); return l != nil && l.Failures == 1 })
	v, _ = h.d.Stack("app")
	if c := v.Status.Condition(model.ConditionReconciling); c == nil || c.Reason != model.ReasonRetryingAfterFailure || c.Message != "1 update failure(s): program failed: boom" {
		t.Errorf("after a failure: %+v", c)
	}
}

// TestPrerequisiteZeroDurationAlwaysStale: succeededWithinDuration: 0s
// makes a prerequisite always stale, as in PKO: each check of the
// dependent asks the prerequisite to run again, and the dependent waits.
func TestPrerequisiteZeroDurationAlwaysStale(t *testing.T) {
	h := newHarness(t, strings.Replace(chain, "      - name: a\n", "      - name: a\n        requirement: {succeededWithinDuration: 0s}\n", 1), nil)
	h.fetcher.set("https://git.example/a.git", sha1, nil)
	h.fetcher.set("https://git.example/b.git", sha1, nil)
	h.start()
	h.eventually("a asked to run again", func() bool { return len(h.runner.opsOf("a")) >= 3 })
	if n := len(h.runner.opsOf("b")); n != 0 {
		t.Fatalf("b ran %d times on an always stale prerequisite", n)
	}
	v, _ := h.d.Stack("b")
	if c := v.Status.Condition(model.ConditionReconciling); c == nil || c.Reason != model.ReasonPrerequisiteNotSatisfied || !strings.Contains(c.Message, `prerequisite "a"`) {
		t.Errorf("b's condition: %+v", c)
	}
}

// TestConditionsRecomputedOnEveryEvaluation: as PKO recomputes them on
// every reconcile, a stack whose source failed once is Ready again when
// it recovers on the same commit, without an update; and a stack blocked
// after a spec change shows the new generation observed (Degraded, not
// Progressing, for Argo CD's health check).
func TestConditionsRecomputedOnEveryEvaluation(t *testing.T) {
	h := newHarness(t, oneStack, nil)
	h.fetcher.set("https://git.example/app.git", sha1, nil)
	h.start()
	h.eventually("deployed", func() bool { return h.ready("app") })
	h.fetcher.set("https://git.example/app.git", sha1, errors.New("connection refused"))
	h.eventually("source unavailable", func() bool {
		v, _ := h.d.Stack("app")
		c := v.Status.Condition(model.ConditionStalled)
		return c != nil && c.Reason == model.ReasonSourceUnavailable
	})
	h.fetcher.set("https://git.example/app.git", sha1, nil)
	h.eventually("Ready again on the same commit", func() bool { return h.ready("app") })
	if n := len(h.runner.opsOf("app")); n != 1 {
		t.Fatalf("%d operations; the recovery needs none", n)
	}

	h.fetcher.set("https://git.example/app.git", sha1, errors.New("connection refused"))
	if err := h.d.Apply(h.parse(strings.Replace(oneStack, "branch: main", "branch: release", 1))); err != nil {
		t.Fatal(err)
	}
	h.eventually("the new generation observed and Degraded", func() bool {
		v, _ := h.d.Stack("app")
		return v.Status.ObservedGeneration == 2 && v.Status.Health != nil && v.Status.Health.Status == model.HealthDegraded
	})
}

// TestStackVersionsFollowEveryChange: whenever a stack's view changes,
// its version does too, so that a client keeping rendered views (the
// API's and the metrics' caches) never serves a stale one.
func TestStackVersionsFollowEveryChange(t *testing.T) {
	h := newHarness(t, chain, nil)
	h.fetcher.set("https://git.example/a.git", sha1, nil)
	h.fetcher.set("https://git.example/b.git", sha1, nil)
	h.runner.setFail("a", errors.New("a is broken"))
	type seen struct {
		version uint64
		view    string
	}
	last := map[string]seen{}
	stop, done := make(chan struct{}), make(chan struct{})
	var stale []string
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(200 * time.Microsecond):
			}
			l := h.d.lock()
			for name, st := range l.stacks {
				js, _ := json.Marshal(l.view(st))
				prev, ok := last[name]
				if ok && prev.version == st.version && prev.view != string(js) {
					stale = append(stale, fmt.Sprintf("%s at version %d:\n%s\n%s", name, st.version, prev.view, js))
				}
				last[name] = seen{st.version, string(js)}
			}
			l.unlock()
		}
	}()
	h.start()
	h.eventually("b waiting", func() bool { return len(h.runner.opsOf("a")) >= 1 })
	h.runner.setFail("a", nil)
	if _, err := h.d.Sync("a"); err != nil {
		t.Fatal(err)
	}
	h.eventually("both deployed", func() bool { return h.ready("a") && h.ready("b") })
	h.fetcher.set("https://git.example/a.git", sha2, nil)
	h.eventually("a at the new commit", func() bool { l := h.last("a"); return l != nil && l.LastSuccessfulCommit == sha2 })
	if err := h.d.Apply(h.parse(strings.Replace(chain, "branch: main", "branch: release", 1))); err != nil {
		t.Fatal(err)
	}
	h.eventually("a's new spec deployed", func() bool { l := h.last("a"); return l != nil && l.Generation == 2 && h.ready("a") })
	if err := h.d.Apply(h.parse("stacks: []\n")); err != nil {
		t.Fatal(err)
	}
	h.eventually("both removed", func() bool { return len(h.d.Stacks()) == 0 })
	close(stop)
	<-done
	if len(stale) > 0 {
		t.Fatalf("%d views changed without a new version; the first:\n%s", len(stale), stale[0])
	}
}
