package rollout

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stackd/stackd/daemon/model"
)

// prodTurn is the fleet at c2 with dev and canary done: prod's turn.
func prodTurn() []model.RolloutMember {
	return fleet("c2", each(on("c2"), append([]string{"canary-1"}, devAll...)...))
}

// TestMaxUpdateLocalSlots: prod's maxUpdate 1 admits one stack; the
// next waits until Done gives the slot back; admitting the holder again
// is no second slot.
func TestMaxUpdateLocalSlots(t *testing.T) {
	set, members := threeSteps(), prodTurn()
	slots := &LocalSlots{}
	c := New(Options{Slots: slots})
	if reason, msg := c.Admit(set, "prod-1", members); reason != "" {
		t.Fatalf("Admit prod-1: %q %q", reason, msg)
	}
	reason, msg := c.Admit(set, "prod-2", members)
	if reason != model.ReasonRolloutWaiting || msg != "step 3 of 3: 1 of 1 updating (maxUpdate 1)" {
		t.Errorf("Admit prod-2: %q %q", reason, msg)
	}
	if reason, _ := c.Admit(set, "prod-1", members); reason != "" || slots.Holders("web/2") != 1 {
		t.Errorf("Admit prod-1 again: %q, %d holders", reason, slots.Holders("web/2"))
	}
	if reason, _ := c.Admit(set, "dev-1", members); reason != "" || slots.Holders("web/0") != 0 {
		t.Errorf("a done stack took a slot, or was held: %q", reason)
	}
	c.Done(set, "prod-1")
	if reason, msg := c.Admit(set, "prod-2", members); reason != "" {
		t.Errorf("Admit prod-2 after Done: %q %q", reason, msg)
	}
	c.Done(set, "prod-2")
	c.Done(set, "prod-2") // a second Done releases nothing more
	if n := slots.Holders("web/2"); n != 0 {
		t.Errorf("%d holders after Done", n)
	}
}

// TestMaxUpdatePercent: "50%" of four stacks is two.
func TestMaxUpdatePercent(t *testing.T) {
	set, members := threeSteps(), prodTurn()
	set.Spec.Strategy.RollingSync.Steps[2].MaxUpdate = "50%"
	c := New(Options{})
	var admitted []string
	for _, n := range prodAll {
		if reason, _ := c.Admit(set, n, members); reason == "" {
			admitted = append(admitted, n)
		}
	}
	if !slices.Equal(admitted, prodAll[:2]) {
		t.Errorf("admitted %q", admitted)
	}
}

// failingSlots fail every call.
type failingSlots struct{}

func (failingSlots) TryAcquire(context.Context, string, string, int) (bool, error) {
	return false, errors.New("etcd: no leader")
}
func (failingSlots) Release(context.Context, string, string) error {
	return errors.New("etcd: no leader")
}

// TestSlotErrorHolds: a slot that cannot be taken holds the stack.
func TestSlotErrorHolds(t *testing.T) {
	c := New(Options{Slots: failingSlots{}})
	reason, msg := c.Admit(threeSteps(), "prod-1", prodTurn())
	if reason != model.ReasonRolloutWaiting || !strings.Contains(msg, "cannot take a slot (maxUpdate 1): etcd: no leader") {
		t.Errorf("Admit: %q %q", reason, msg)
	}
}

// flakySlots fail Release until ok is set.
type flakySlots struct {
	LocalSlots
	ok atomic.Bool
}

func (f *flakySlots) Release(ctx context.Context, key, holder string) error {
	if !f.ok.Load() {
		return errors.New("etcd: timeout")
	}
	return f.LocalSlots.Release(ctx, key, holder)
}

// TestFailedReleaseIsRetried: Refresh retries a release that failed.
func TestFailedReleaseIsRetried(t *testing.T) {
	slots := &flakySlots{}
	c := New(Options{Slots: slots})
	set, members := threeSteps(), prodTurn()
	if reason, _ := c.Admit(set, "prod-1", members); reason != "" {
		t.Fatal(reason)
	}
	c.Done(set, "prod-1")
	if reason, _ := c.Admit(set, "prod-2", members); reason == "" {
		t.Fatal("prod-2 admitted while prod-1's slot is still held")
	}
	slots.ok.Store(true)
	if err := c.Refresh(); err != nil {
		t.Fatal(err)
	}
	if reason, msg := c.Admit(set, "prod-2", members); reason != "" {
		t.Errorf("Admit prod-2 after Refresh: %q %q", reason, msg)
	}
}

// TestOnHaltOnce: a halt is told once however often stacks are admitted,
// and again when, after a resume, a stack fails anew.
func TestOnHaltOnce(t *testing.T) {
	var mu sync.Mutex
	var told []string
	c := New(Options{OnHalt: func(set string, failed []string) {
		mu.Lock()
		defer mu.Unlock()
		told = append(told, set+":"+strings.Join(failed, ","))
	}})
	set := threeSteps()
	fail := func(commit, request string) func(model.RolloutMember) model.RolloutMember {
		return func(m model.RolloutMember) model.RolloutMember {
			m.Commit, m.Request = commit, request
			return failed(m, commit, "c1")
		}
	}
	pass := func(ms []model.RolloutMember) {
		for _, m := range ms {
			c.Admit(set, m.Name, ms)
		}
	}
	halted := fleet("c2", with(each(on("c2"), devAll...), each(fail("c2", "r1"), "canary-1", "prod-1")))
	pass(halted)
	pass(fleet("c2", with(each(on("c2"), devAll...), each(fail("c2", "r1"), "canary-1", "prod-1")))) // same halt, new slice
	pass(fleet("c2", each(on("c2"), devAll...)))                                                     // resumed
	pass(fleet("c2", with(each(on("c2"), devAll...), each(fail("c2", "r2"), "canary-1"))))
	want := []string{"web:canary-1,prod-1", "web:canary-1"}
	if !slices.Equal(told, want) {
		t.Errorf("told %q, want %q", told, want)
	}
}

// TestAbort: an abort holds what had not succeeded, for every Controller
// sharing the records once it refreshed, until a newer commit; the next
// abort prunes what can no longer apply.
func TestAbort(t *testing.T) {
	meta := &memMeta{}
	a, b := New(Options{Meta: meta}), New(Options{Meta: meta})
	set := threeSteps()
	members := fleet("c2", with(each(on("c2"), devAll...), map[string]func(model.RolloutMember) model.RolloutMember{
		"canary-1": func(m model.RolloutMember) model.RolloutMember { return failed(m, "c2", "c1") },
	}))
	if reason, _ := b.Admit(set, "canary-1", members); reason != model.ReasonRolloutHalted {
		t.Fatalf("before the abort: %q", reason)
	}
	if err := a.Abort(set, members); err != nil {
		t.Fatal(err)
	}
	if reason, msg := a.Admit(set, "prod-1", members); reason != model.ReasonRolloutAborted || !strings.Contains(msg, "step 2 of 3") {
		t.Errorf("Admit prod-1 on the aborting replica: %q %q", reason, msg)
	}
	if err := b.Refresh(); err != nil {
		t.Fatal(err)
	}
	if reason, _ := b.Admit(set, "canary-1", members); reason != model.ReasonRolloutAborted {
		t.Errorf("Admit canary-1 on the other replica: %q", reason)
	}
	if st := b.Snapshot(); len(st) != 1 || st[0].State != model.RolloutAborted {
		t.Errorf("snapshot %+v", st)
	}
	newer := fleet("c3", each(on("c2"), devAll...))
	if reason, msg := b.Admit(set, "dev-1", newer); reason != "" {
		t.Errorf("Admit dev-1 on c3: %q %q", reason, msg)
	}
	newer[1] = succeeded(newer[1], "c3") // dev-1
	if err := a.Abort(set, newer); err != nil {
		t.Fatal(err)
	}
	got, err := readAborted(meta, "web")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := got["dev-1"]; ok || got["prod-1"] != (Target{"c3", 1}) || len(got) != 6 {
		t.Errorf("record after the second abort: %v", got)
	}
}

// brokenMeta fails every read.
type brokenMeta struct{ memMeta }

func (*brokenMeta) Meta(string) ([]byte, error) { return nil, errors.New("etcd: no leader") }

// TestMetaErrorHolds: records that cannot be read hold the stacks that
// would move; a stack done on its target is not held.
func TestMetaErrorHolds(t *testing.T) {
	c := New(Options{Meta: &brokenMeta{}})
	members := prodTurn()
	if reason, msg := c.Admit(threeSteps(), "prod-1", members); reason != model.ReasonRolloutWaiting || !strings.Contains(msg, "no leader") {
		t.Errorf("Admit prod-1: %q %q", reason, msg)
	}
	if reason, _ := c.Admit(threeSteps(), "dev-1", members); reason != "" {
		t.Errorf("Admit dev-1: %q", reason)
	}
	if err := New(Options{Meta: &brokenMeta{}}).Abort(threeSteps(), members); err == nil {
		t.Error("Abort without its record: no error")
	}
}

// TestCachedPlanFollowsChanges: the plan cached for one slice is not
// used once a member in it changed.
func TestCachedPlanFollowsChanges(t *testing.T) {
	c := New(Options{})
	set, members := threeSteps(), fleet("c2", each(on("c2"), devAll...))
	if reason, _ := c.Admit(set, "prod-1", members); reason != model.ReasonRolloutWaiting {
		t.Fatalf("Admit prod-1: %q", reason)
	}
	i := slices.IndexFunc(members, func(m model.RolloutMember) bool { return m.Name == "canary-1" })
	members[i] = succeeded(members[i], "c2")
	if reason, msg := c.Admit(set, "prod-1", members); reason != "" {
		t.Errorf("Admit prod-1 once canary-1 succeeded: %q %q", reason, msg)
	}
	if st := c.Snapshot(); st[0].Step != 3 {
		t.Errorf("snapshot at step %d", st[0].Step)
	}
}

// TestLocalSlotsRace: many holders taking and giving back the slots of
// one key never exceed its limit.
func TestLocalSlotsRace(t *testing.T) {
	for _, max := range []int{1, 3} {
		t.Run(fmt.Sprint("max ", max), func(t *testing.T) {
			var slots LocalSlots
			var inside, peak atomic.Int64
			var wg sync.WaitGroup
			for g := range 32 {
				wg.Go(func() {
					holder := fmt.Sprint("stack-", g)
					for range 500 {
						ok, _ := slots.TryAcquire(context.Background(), "k", holder, max)
						if !ok {
							continue
						}
						n := inside.Add(1)
						for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
						}
						inside.Add(-1)
						_ = slots.Release(context.Background(), "k", holder)
					}
				})
			}
			wg.Wait()
			if p := peak.Load(); p > int64(max) || p == 0 {
				t.Errorf("peak %d holders, limit %d", p, max)
			}
			if n := slots.Holders("k"); n != 0 {
				t.Errorf("%d holders left", n)
			}
		})
	}
}

// TestAdmitConcurrently: stacks admitted from many goroutines at once
// never exceed prod's maxUpdate.
func TestAdmitConcurrently(t *testing.T) {
	c := New(Options{})
	set, members := threeSteps(), prodTurn()
	var inside, over atomic.Int64
	var wg sync.WaitGroup
	for _, name := range prodAll {
		wg.Go(func() {
			for range 200 {
				if reason, _ := c.Admit(set, name, members); reason != "" {
					continue
				}
				if inside.Add(1) > 1 {
					over.Add(1)
				}
				inside.Add(-1)
				c.Done(set, name)
			}
		})
	}
	wg.Wait()
	if over.Load() > 0 {
		t.Errorf("%d admissions beyond maxUpdate 1", over.Load())
	}
}

// BenchmarkAdmit1000 admits each of 1,000 stacks in three steps once per
// pass, as the daemon's loop does; it reports the time of one Admit.
func BenchmarkAdmit1000(b *testing.B) {
	set := threeSteps()
	var members []model.RolloutMember
	for i := range 1000 {
		env := []string{"dev", "canary", "prod"}[i%3]
		m := member(fmt.Sprintf("stack-%04d", i), env, "c2")
		if env == "dev" {
			m = succeeded(m, "c2")
		} else {
			m = succeeded(m, "c1")
		}
		members = append(members, m)
	}
	c := New(Options{})
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		c.Admit(set, members[i%len(members)].Name, members)
	}
}

// TestResumeAfterAbort: a resume drops the set's abort records, on the
// replica that resumes and, after Refresh, on the other; Plan shows it.
func TestResumeAfterAbort(t *testing.T) {
	meta := &memMeta{}
	a, b := New(Options{Meta: meta}), New(Options{Meta: meta})
	set := threeSteps()
	members := fleet("c2", each(on("c2"), devAll...))
	if held, err := a.Resume(set, members); err != nil || held {
		t.Fatalf("resume of nothing aborted: %v %v", held, err)
	}
	if err := a.Abort(set, members); err != nil {
		t.Fatal(err)
	}
	if st := b.Plan(set, members); st.State != model.RolloutAborted {
		t.Fatalf("plan after the abort: %+v", st)
	}
	held, err := a.Resume(set, members)
	if err != nil || !held {
		t.Fatalf("resume: %v %v", held, err)
	}
	if st := a.Plan(set, members); st.State != model.RolloutProgressing {
		t.Errorf("plan after the resume: %+v", st)
	}
	if err := b.Refresh(); err != nil {
		t.Fatal(err)
	}
	if reason, msg := b.Admit(set, "canary-1", members); reason != "" {
		t.Errorf("canary-1 after the resume, on the other replica: %q %q", reason, msg)
	}
}
