package cluster

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/stackd/stackd/rollout"
)

var _ rollout.Slots = (*Slots)(nil)

// TestRolloutSlotsLimit: two replicas taking and giving back the slots
// of one key from many goroutines never exceed its limit.
func TestRolloutSlotsLimit(t *testing.T) {
	eps, prefix := etcd(t), newPrefix()
	replicas := []*replica{join(t, eps, prefix, "a", Options{}), join(t, eps, prefix, "b", Options{})}
	for _, max := range []int{1, 2} {
		t.Run(fmt.Sprint("max ", max), func(t *testing.T) {
			key := fmt.Sprintf("web/%d", max)
			var inside, peak, taken atomic.Int64
			var wg sync.WaitGroup
			for _, r := range replicas {
				slots := r.Slots()
				for g := range 8 {
					holder := fmt.Sprintf("%s-%d", r.opts.Node, g)
					wg.Go(func() { hammer(t, slots, key, holder, max, &inside, &peak, &taken) })
				}
			}
			wg.Wait()
			if p := peak.Load(); p > int64(max) {
				t.Errorf("%d holders at once, limit %d", p, max)
			}
			if taken.Load() == 0 {
				t.Error("no slot was ever taken")
			}
			if n := holders(t, replicas[0].Cluster, key); n != 0 {
				t.Errorf("%d slots left after every release", n)
			}
		})
	}
}

// hammer takes and gives back holder's slot of key, counting the
// holders between the two.
func hammer(t *testing.T, slots *Slots, key, holder string, max int, inside, peak, taken *atomic.Int64) {
	ctx := context.Background()
	for range 25 {
		ok, err := slots.TryAcquire(ctx, key, holder, max)
		if err != nil {
			if !strings.Contains(err.Error(), "taken by others") {
				t.Errorf("TryAcquire %s: %v", holder, err)
			}
			continue
		}
		if !ok {
			continue
		}
		taken.Add(1)
		n := inside.Add(1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		// Held a while, as an update is: the others try meanwhile.
		// etcd itself never lists more holders than the limit.
		time.Sleep(2 * time.Millisecond)
		if n := holders(t, slots.c, key); n > int64(max) {
			t.Errorf("etcd lists %d holders of %s, limit %d", n, key, max)
		}
		inside.Add(-1)
		if err := slots.Release(ctx, key, holder); err != nil {
			t.Errorf("Release %s: %v", holder, err)
		}
	}
}

// holders is how many slots of key are held.
func holders(t *testing.T, c *Cluster, key string) int64 {
	resp, err := c.cli.Get(context.Background(), c.key("rollout-slots/", key+"/"), clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Error(err)
		return 0
	}
	return resp.Count
}

// TestRolloutSlotsHolders: taking a held slot again is true; a replica
// takes over the slot of a stack that moved to it, and the old
// replica's release leaves it; a replica that closes frees its slots;
// a replica without a session takes none.
func TestRolloutSlotsHolders(t *testing.T) {
	eps, prefix := etcd(t), newPrefix()
	a, b := join(t, eps, prefix, "a", Options{}).Slots(), join(t, eps, prefix, "b", Options{}).Slots()
	ctx := context.Background()
	take := func(s *Slots, key, holder string, want bool) {
		t.Helper()
		if ok, err := s.TryAcquire(ctx, key, holder, 1); err != nil || ok != want {
			t.Fatalf("%s takes %s for %s: %v, %v; want %v", s.c.opts.Node, key, holder, ok, err, want)
		}
	}
	take(a, "web/2", "prod-1", true)
	take(a, "web/2", "prod-1", true)
	take(b, "web/2", "prod-2", false)
	take(b, "web/2", "prod-1", true) // prod-1 moved to b
	if err := a.Release(ctx, "web/2", "prod-1"); err != nil {
		t.Fatal(err)
	}
	take(a, "web/2", "prod-3", false)
	if err := b.Release(ctx, "web/2", "prod-1"); err != nil {
		t.Fatal(err)
	}
	take(a, "web/2", "prod-3", true)

	c, err := Open(ctx, Options{Endpoints: eps, Prefix: prefix, Node: "c", TTL: testTTL})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Slots().TryAcquire(ctx, "web/1", "canary-1", 1); err == nil {
		t.Error("a replica without a session took a slot")
	}
	c.Start()
	take(c.Slots(), "web/1", "canary-1", true)
	take(b, "web/1", "canary-2", false)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the closed replica's slot to be free", func() bool {
		ok, err := b.TryAcquire(ctx, "web/1", "canary-2", 1)
		return err == nil && ok
	})
}
