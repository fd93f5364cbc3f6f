package cluster

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/stackd/stackd/cluster/etcdtest"
	"github.com/stackd/stackd/daemon"
	"github.com/stackd/stackd/daemon/model"
	"github.com/stackd/stackd/daemon/storetest"
)

var prefixes atomic.Int64

// newPrefix is a key prefix of its own, so that tests sharing an etcd
// start from an empty cluster.
func newPrefix() string { return fmt.Sprintf("/test/%d/", prefixes.Add(1)) }

// replica is a started Cluster with what its daemon would hear. Unless
// manual, it releases what it is asked to hand over, and acknowledges
// what it lost, at once, as an idle daemon does.
type replica struct {
	*Cluster
	manual bool
	mu     sync.Mutex
	events []model.OwnershipEvent
}

func join(t *testing.T, endpoints []string, prefix, node string, opts Options) *replica {
	return joinAs(t, endpoints, prefix, node, opts, false)
}

func joinAs(t *testing.T, endpoints []string, prefix, node string, opts Options, manual bool) *replica {
	t.Helper()
	opts.Endpoints, opts.Prefix, opts.Node = endpoints, prefix, node
	if opts.TTL == 0 {
		// Not shorter: a replica that heard of no renewal for two thirds
		// of its TTL gives its session up, and a busy machine running the
		// race detector may well hold renewals back for a second or two,
		// which would make lost stacks no test expects.
		opts.TTL = testTTL
	}
	c, err := Open(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	r := &replica{Cluster: c, manual: manual}
	c.Start()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for e := range c.Events() {
			r.mu.Lock()
			r.events = append(r.events, e)
			r.mu.Unlock()
			if (e.Kind == model.OwnerHandover || e.Kind == model.OwnerLost) && !manual {
				c.Release(e.Stack)
			}
		}
	}()
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return r
}

// seen lists the stacks of the events of kind heard so far.
func (r *replica) seen(kind string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, e := range r.events {
		if e.Kind == kind {
			out = append(out, e.Stack)
		}
	}
	return out
}

// testTTL is the lease TTL of the tests' replicas (see joinAs).
const testTTL = 15 * time.Second

// eventually waits for cond. The bound only ends a failed test: it is
// longer than a lease, which a replica that could not revoke its own
// when it left (etcd slow to answer) leaves to expire.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// shared is one etcd member that the package's tests share, each with a
// key prefix of its own. It starts on first use, within m.Run: testing
// swaps os.Stderr there (with -json), which the member's loggers read
// from goroutines of their own.
var shared struct {
	once      sync.Once
	dir       string
	cluster   *etcdtest.Cluster
	endpoints []string
	err       error
}

func TestMain(m *testing.M) {
	flag.Parse()
	code := m.Run()
	if shared.cluster != nil {
		shared.cluster.StopAll()
	}
	if shared.dir != "" {
		os.RemoveAll(shared.dir)
	}
	os.Exit(code)
}

// etcd returns the endpoints of the shared member, started on the first
// call; under -short the test is skipped.
func etcd(tb testing.TB) []string {
	tb.Helper()
	if testing.Short() {
		tb.Skip("starts an etcd member")
	}
	shared.once.Do(func() {
		if shared.dir, shared.err = os.MkdirTemp("", "stackd-cluster-test-"); shared.err != nil {
			return
		}
		if shared.cluster, shared.err = etcdtest.StartIn(shared.dir, 1); shared.err == nil {
			shared.endpoints = shared.cluster.Endpoints()
		}
	})
	if shared.err != nil {
		tb.Fatalf("start the shared etcd member: %v", shared.err)
	}
	return shared.endpoints
}

func TestStoreContract(t *testing.T) {
	eps := etcd(t)
	storetest.Run(t, func(t *testing.T, limits storetest.Limits) (daemon.Store, func(string)) {
		r := join(t, eps, newPrefix(), "node-1", Options{HistoryLimit: limits.History, LogLimit: limits.Log})
		var wanted []string
		hold := func(name string) {
			wanted = append(wanted, name)
			r.SetStacks(wanted)
			eventually(t, "holding "+name, func() bool { return r.Holds(name) })
		}
		return r, hold
	})
}

// TestStacksSpreadOverReplicas: three replicas share 30 stacks, each held
// by exactly one, the one rendezvous hashing names.
func TestStacksSpreadOverReplicas(t *testing.T) {
	eps, prefix := etcd(t), newPrefix()
	var stacks []string
	for i := range 30 {
		stacks = append(stacks, fmt.Sprintf("stack-%02d", i))
	}
	nodes := []string{"node-1", "node-2", "node-3"}
	var rs []*replica
	for _, n := range nodes {
		r := join(t, eps, prefix, n, Options{})
		r.SetStacks(stacks)
		rs = append(rs, r)
	}
	eventually(t, "every stack held by its rendezvous owner", func() bool {
		for _, s := range stacks {
			for i, r := range rs {
				if r.Holds(s) != (Owner(s, nodes) == nodes[i]) {
					return false
				}
			}
		}
		return true
	})
	// Each replica publishes its count; rs[0] sees the others' through
	// its watch, a moment after they hold their stacks.
	var st model.ClusterStatus
	counted := func() bool {
		st = rs[0].Status()
		total := 0
		for _, m := range st.Members {
			total += m.Stacks
		}
		return len(st.Members) == 3 && total == 30 && st.Session
	}
	deadline := time.Now().Add(time.Minute)
	for !counted() && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if !counted() {
		t.Errorf("Status = %+v, want 3 members holding 30 stacks", st)
	}
	eventually(t, "a leader", func() bool { return rs[0].Status().Leader != "" })
	if l := rs[0].Status().Leader; rs[1].Status().Leader != l || rs[2].Status().Leader != l {
		t.Errorf("replicas disagree on the leader")
	}
}

// TestHandover: a replica that joins takes its share only once the
// holder released it, and a replica that leaves hands its stacks on at
// once.
func TestHandover(t *testing.T) {
	eps, prefix := etcd(t), newPrefix()
	stacks := []string{"a", "b", "c", "d", "e", "f", "g", "h"}
	r1 := joinAs(t, eps, prefix, "node-1", Options{}, true)
	r1.SetStacks(stacks)
	eventually(t, "node-1 holding all", func() bool { return len(r1.seen(model.OwnerGained)) == len(stacks) })

	r2 := join(t, eps, prefix, "node-2", Options{TTL: 30 * time.Second})
	r2.SetStacks(stacks)
	var moving []string
	for _, s := range stacks {
		if Owner(s, []string{"node-1", "node-2"}) == "node-2" {
			moving = append(moving, s)
		}
	}
	eventually(t, "handover requests", func() bool { return len(r1.seen(model.OwnerHandover)) == len(moving) })
	if got := r1.seen(model.OwnerHandover); !reflect.DeepEqual(sorted(got), moving) {
		t.Errorf("asked to hand over %v, want %v", got, moving)
	}
	time.Sleep(200 * time.Millisecond)
	for _, s := range moving {
		if r2.Holds(s) {
			t.Fatalf("node-2 holds %s before node-1 released it", s)
		}
		r1.Release(s)
	}
	eventually(t, "node-2 holding its share", func() bool {
		return slices.IndexFunc(moving, func(s string) bool { return !r2.Holds(s) }) < 0
	})

	// node-1 leaves: node-2 takes the rest. (Close revokes node-1's lease,
	// so that it does not wait for it to expire; but a revoke that timed
	// out on a busy machine falls back to the expiry, so how soon is not
	// asserted.)
	if err := r1.Close(); err != nil {
		t.Fatal(err)
	}
	eventually(t, "node-2 holding all", func() bool {
		return slices.IndexFunc(stacks, func(s string) bool { return !r2.Holds(s) }) < 0
	})
}

// TestSessionLoss: when a replica's lease ends (as when it was cut off
// longer than its TTL), it hears that it lost its stacks, and takes
// them again with a new session.
func TestSessionLoss(t *testing.T) {
	eps, prefix := etcd(t), newPrefix()
	r := join(t, eps, prefix, "node-1", Options{})
	r.SetStacks([]string{"a", "b"})
	eventually(t, "holding", func() bool { return r.Holds("a") && r.Holds("b") })
	revoke(t, eps, r.Cluster)
	eventually(t, "lost events", func() bool { return len(r.seen(model.OwnerLost)) == 2 })
	eventually(t, "held again", func() bool { return r.Holds("a") && r.Holds("b") })
	if st := r.Status(); st.SessionsLost != 1 {
		t.Errorf("SessionsLost = %d, want 1", st.SessionsLost)
	}
}

// TestNoClaimBeforeLossAcknowledged: a replica that lost a stack does not
// take it again while the operation of its lost holding may still run
// (the daemon has not released it): that operation's late writes would
// otherwise pass the new holding's fence.
func TestNoClaimBeforeLossAcknowledged(t *testing.T) {
	eps, prefix := etcd(t), newPrefix()
	r := joinAs(t, eps, prefix, "node-1", Options{}, true)
	r.SetStacks([]string{"a", "b"})
	eventually(t, "holding", func() bool { return r.Holds("a") && r.Holds("b") })
	revoke(t, eps, r.Cluster)
	eventually(t, "lost events", func() bool { return len(r.seen(model.OwnerLost)) == 2 })
	r.Release("a")
	eventually(t, "a held again", func() bool { return r.Holds("a") })
	time.Sleep(time.Second) // several passes of the ownership loop
	if r.Holds("b") {
		t.Fatal("b was claimed again before its loss was acknowledged")
	}
	if _, err := r.BeginUpdate(model.Update{Stack: "b"}); !errors.Is(err, daemon.ErrNotOwner) {
		t.Errorf("a write about b before its loss was acknowledged = %v, want ErrNotOwner", err)
	}
	r.Release("b")
	eventually(t, "b held again", func() bool { return r.Holds("b") })
}

// revoke ends r's lease from outside, as etcd does when it expires.
func revoke(t *testing.T, eps []string, c *Cluster) {
	t.Helper()
	c.mu.Lock()
	lease := c.session.Lease()
	c.mu.Unlock()
	cli, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 5 * time.Second, Logger: zapLogger()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	if _, err := cli.Revoke(context.Background(), lease); err != nil {
		t.Fatal(err)
	}
}

// TestFencing: a replica that has not noticed yet that it lost a stack
// (paused, or cut off) cannot write about it once another replica holds
// it: every write is conditional on its own ownership key.
func TestFencing(t *testing.T) {
	eps, prefix := etcd(t), newPrefix()
	r1 := join(t, eps, prefix, "node-1", Options{})
	r1.SetStacks([]string{"s"})
	eventually(t, "node-1 holding s", func() bool { return r1.Holds("s") })
	if err := r1.PutStack(storetest.Record("s", 1)); err != nil {
		t.Fatal(err)
	}
	u, err := r1.BeginUpdate(model.Update{Stack: "s", State: model.UpdateRunning})
	if err != nil {
		t.Fatal(err)
	}
	r1.mu.Lock()
	stale := r1.held["s"]
	r1.mu.Unlock()

	// node-1 stops (its lease ends, its etcd client stays); node-2 takes s
	// and writes.
	r1.cancel()
	<-r1.done
	r2 := join(t, eps, prefix, "node-2", Options{})
	r2.SetStacks([]string{"s"})
	eventually(t, "node-2 holding s", func() bool { return r2.Holds("s") })
	if err := r2.PutStack(storetest.Record("s", 2)); err != nil {
		t.Fatal(err)
	}

	// node-1 comes back believing it still holds s.
	r1.mu.Lock()
	r1.held["s"] = stale
	r1.mu.Unlock()
	u.State = model.UpdateSucceeded
	for what, err := range map[string]error{
		"PutStack":    r1.PutStack(storetest.Record("s", 99)),
		"PutUpdate":   r1.PutUpdate(u),
		"PutLog":      r1.PutLog(u.ID, []byte("late")),
		"DeleteStack": r1.DeleteStack("s"),
	} {
		if !errors.Is(err, daemon.ErrNotOwner) {
			t.Errorf("%s by the old holder = %v, want ErrNotOwner", what, err)
		}
	}
	if _, err := r1.BeginUpdate(model.Update{Stack: "s"}); !errors.Is(err, daemon.ErrNotOwner) {
		t.Errorf("BeginUpdate by the old holder = %v, want ErrNotOwner", err)
	}
	if rec, err := r2.Stack("s"); err != nil || rec.Generation != 2 {
		t.Errorf("record after the old holder's writes: generation %d, %v; want 2", rec.Generation, err)
	}
	if got, _ := r2.Update(u.ID); got.State != model.UpdateRunning {
		t.Errorf("update after the old holder's write: %s, want running", got.State)
	}
}

func sorted(s []string) []string { return slices.Sorted(slices.Values(s)) }

func TestDecide(t *testing.T) {
	members := []string{"node-1", "node-2"}
	var mine, theirs string // a stack rendezvous gives node-1, one it gives node-2
	for i := 0; mine == "" || theirs == ""; i++ {
		s := fmt.Sprintf("s%d", i)
		if Owner(s, members) == "node-1" {
			mine = s
		} else {
			theirs = s
		}
	}
	set := func(names ...string) map[string]bool {
		m := map[string]bool{}
		for _, n := range names {
			m[n] = true
		}
		return m
	}
	for _, tc := range []struct {
		name                      string
		members                   []string
		wanted                    map[string]bool
		owners                    map[string]string
		held, handover, acquiring map[string]bool
		claim, hand, keep, drop   []string
	}{
		{name: "claim a free stack of mine", wanted: set(mine), claim: []string{mine}},
		{name: "wait for a stack held elsewhere", wanted: set(mine), owners: map[string]string{mine: "node-2"}},
		{name: "no second claim in flight", wanted: set(mine), acquiring: set(mine)},
		{name: "leave a stack of theirs", wanted: set(theirs)},
		{name: "hand over a stack of theirs", wanted: set(theirs), owners: map[string]string{theirs: "node-1"}, held: set(theirs), hand: []string{theirs}},
		{name: "hand over once", wanted: set(theirs), held: set(theirs), handover: set(theirs)},
		{name: "keep a stack that is mine again", wanted: set(mine), held: set(mine), handover: set(mine), keep: []string{mine}},
		{name: "drop a stack no longer known", wanted: set(), held: set(mine), drop: []string{mine}},
		{name: "nothing without a registration", members: []string{"node-2"}, wanted: set(mine, theirs), held: set(mine)},
	} {
		m := members
		if tc.members != nil {
			m = tc.members
		}
		p := decide("node-1", m, tc.wanted, tc.owners, tc.held, tc.handover, tc.acquiring)
		want := plan{claim: tc.claim, handover: tc.hand, keep: tc.keep, drop: tc.drop}
		if !reflect.DeepEqual(p, want) {
			t.Errorf("%s: decide = %+v, want %+v", tc.name, p, want)
		}
	}
}
