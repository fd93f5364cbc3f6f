package cluster

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/stackd/stackd/daemon/model"
)

// SetStacks declares the stacks the daemon knows; this replica claims its
// share and gives up the ones no longer named.
func (c *Cluster) SetStacks(names []string) {
	c.mu.Lock()
	c.wanted = make(map[string]bool, len(names))
	for _, n := range names {
		c.wanted[n] = true
	}
	maps.DeleteFunc(c.lostHere, func(n string, _ bool) bool { return !c.wanted[n] })
	c.mu.Unlock()
	c.poke()
}

// Holds says whether this replica holds name now.
func (c *Cluster) Holds(name string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.held[name]
	return ok
}

// Events reports the changes that concern this replica.
func (c *Cluster) Events() <-chan model.OwnershipEvent { return c.events.out }

// Release gives up name: its ownership key is deleted, if it is still
// this replica's. After a Lost event, it says that nothing of the lost
// holding runs any more: name may be claimed again.
func (c *Cluster) Release(name string) {
	c.mu.Lock()
	rev, ok := c.held[name]
	delete(c.held, name)
	delete(c.handover, name)
	if c.lostHere[name] {
		delete(c.lostHere, name)
		defer c.poke()
	}
	if ok {
		c.moves++
	}
	c.mu.Unlock()
	if !ok {
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
		defer cancel()
		key := c.key("owners/", name)
		_, err := c.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", rev)).Then(clientv3.OpDelete(key)).Commit()
		if err != nil {
			// The key goes with the lease anyway; until then nobody acts.
			c.log.Warn("cannot release a stack; it moves when this replica's lease ends", "stack", name, "err", err)
			return
		}
		c.log.Info("released stack", "stack", name)
	}()
}

// plan is what one pass of the ownership loop decided.
type plan struct {
	claim, handover, keep, drop []string
}

// decide compares what this replica holds with what rendezvous hashing
// gives it; it claims none of waiting (a claim in flight, or a lost
// holding not yet released). It is pure: a table test covers it.
func decide(node string, members []string, wanted map[string]bool, owners map[string]string,
	held, handover, waiting map[string]bool) plan {
	var p plan
	if !slices.Contains(members, node) {
		return p // this replica's registration is gone with its lease: it decides nothing
	}
	for _, name := range slices.Sorted(maps.Keys(wanted)) {
		mine := Owner(name, members) == node
		switch {
		case mine && !held[name] && owners[name] == "" && !waiting[name]:
			p.claim = append(p.claim, name)
		case !mine && held[name] && !handover[name]:
			p.handover = append(p.handover, name)
		case mine && held[name] && handover[name]:
			p.keep = append(p.keep, name) // members flapped back
		}
	}
	for _, name := range slices.Sorted(maps.Keys(held)) {
		if !wanted[name] {
			p.drop = append(p.drop, name)
		}
	}
	return p
}

// reconcile runs one pass of the ownership loop.
func (c *Cluster) reconcile(ctx context.Context) {
	c.mu.Lock()
	if c.session == nil {
		c.mu.Unlock()
		return
	}
	held := make(map[string]bool, len(c.held))
	for n := range c.held {
		held[n] = true
	}
	waiting := maps.Clone(c.acquiring)
	maps.Copy(waiting, c.lostHere)
	p := decide(c.opts.Node, slices.Sorted(maps.Keys(c.members)), c.wanted, c.owners, held, c.handover, waiting)
	for _, n := range p.handover {
		c.handover[n] = true
	}
	for _, n := range p.keep {
		delete(c.handover, n)
	}
	for _, n := range p.claim {
		c.acquiring[n] = true
	}
	lease := c.session.Lease()
	c.mu.Unlock()
	for _, n := range p.handover {
		c.events.push(model.OwnershipEvent{Kind: model.OwnerHandover, Stack: n})
	}
	for _, n := range p.keep {
		c.events.push(model.OwnershipEvent{Kind: model.OwnerGained, Stack: n})
	}
	for _, n := range p.drop {
		c.Release(n)
	}
	for _, n := range p.claim {
		c.claim(ctx, n, lease)
	}
	c.reconcilePRs(ctx)
}

// claim creates name's ownership key, bound to lease, if nobody holds it.
func (c *Cluster) claim(ctx context.Context, name string, lease clientv3.LeaseID) {
	rctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	key := c.key("owners/", name)
	resp, err := c.cli.Txn(rctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, c.opts.Node, clientv3.WithLease(lease))).
		Else(clientv3.OpGet(key)).Commit()
	c.mu.Lock()
	delete(c.acquiring, name)
	switch {
	case err != nil:
		c.mu.Unlock()
		c.log.Warn("cannot claim a stack", "stack", name, "err", err)
		return
	case !resp.Succeeded:
		if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) > 0 {
			c.owners[name] = string(kvs[0].Value)
		}
		c.mu.Unlock()
		return
	case c.session == nil || c.session.Lease() != lease:
		c.mu.Unlock()
		return // the session ended meanwhile: the key goes with its lease
	}
	c.held[name] = resp.Header.Revision
	c.owners[name] = c.opts.Node
	c.moves++
	c.mu.Unlock()
	c.log.Info("holding stack", "stack", name)
	c.events.push(model.OwnershipEvent{Kind: model.OwnerGained, Stack: name})
}

// watchMembers follows who is live.
func (c *Cluster) watchMembers(ctx context.Context, rev int64) {
	c.watch(ctx, "members/", rev, func(ev *clientv3.Event) {
		c.mu.Lock()
		if ev.Type == clientv3.EventTypeDelete {
			delete(c.members, c.name("members/", ev.Kv.Key))
		} else {
			c.putMemberLocked(ev.Kv.Value)
		}
		c.mu.Unlock()
		c.poke()
	})
}

// watchOwners follows who holds what. A key of this replica's that
// vanished without a Release (deleted by hand, or a lease that expired
// before the session noticed) is lost at once.
func (c *Cluster) watchOwners(ctx context.Context, rev int64) {
	c.watch(ctx, "owners/", rev, func(ev *clientv3.Event) {
		name := c.name("owners/", ev.Kv.Key)
		c.mu.Lock()
		lost := false
		if ev.Type == clientv3.EventTypeDelete {
			delete(c.owners, name)
			if r, ok := c.held[name]; ok && r < ev.Kv.ModRevision {
				delete(c.held, name)
				delete(c.handover, name)
				c.lostHere[name] = true
				lost = true
			}
		} else {
			c.owners[name] = string(ev.Kv.Value)
		}
		c.mu.Unlock()
		if lost {
			c.events.push(model.OwnershipEvent{Kind: model.OwnerLost, Stack: name})
		}
		c.poke()
	})
}

// watchStacks passes the records other replicas write to the daemon.
func (c *Cluster) watchStacks(ctx context.Context, rev int64) {
	c.watch(ctx, "stacks/", rev, func(ev *clientv3.Event) {
		name := c.name("stacks/", ev.Kv.Key)
		if ev.Type == clientv3.EventTypeDelete {
			c.recordChanged(name, nil)
			return
		}
		c.recordChanged(name, ev.Kv.Value)
	})
}

// recordChanged tells the daemon about a record it did not write; value
// nil is a deleted record.
func (c *Cluster) recordChanged(name string, value []byte) {
	if c.Holds(name) {
		return // this replica wrote it
	}
	ev := model.OwnershipEvent{Kind: model.OwnerRecord, Stack: name}
	if value != nil {
		var rec model.StackRecord
		if err := json.Unmarshal(value, &rec); err != nil {
			c.log.Error("unreadable stack record in etcd", "stack", name, "err", err)
			return
		}
		ev.Record = &rec
	}
	c.events.push(ev)
}

// watch calls fn for each event under part from rev on, until ctx ends.
// A watch that breaks (compaction, a lost connection) is opened again
// from where it stopped.
func (c *Cluster) watch(ctx context.Context, part string, rev int64, fn func(*clientv3.Event)) {
	for ctx.Err() == nil {
		wch := c.cli.Watch(clientv3.WithRequireLeader(ctx), c.opts.Prefix+part, clientv3.WithPrefix(), clientv3.WithRev(rev))
		for resp := range wch {
			if resp.CompactRevision > 0 {
				rev = resp.CompactRevision
			}
			if err := resp.Err(); err != nil {
				c.log.Debug("watch broke; opening it again", "part", part, "err", err)
				break
			}
			for _, ev := range resp.Events {
				fn(ev)
				rev = ev.Kv.ModRevision + 1
			}
		}
		sleep(ctx, 100*time.Millisecond)
	}
}

// Status is the cluster as this replica sees it.
func (c *Cluster) Status() model.ClusterStatus {
	c.mu.Lock()
	defer c.mu.Unlock()
	count := map[string]int{}
	for _, node := range c.owners {
		count[node]++
	}
	st := model.ClusterStatus{Node: c.opts.Node, Session: c.session != nil, Leader: c.leader,
		Moves: c.moves, SessionsLost: c.lost, LeaseTTL: model.Duration(c.opts.TTL), Members: []model.ClusterMember{}}
	for _, name := range slices.Sorted(maps.Keys(c.members)) {
		m := c.members[name]
		st.Members = append(st.Members, model.ClusterMember{Name: m.Name, URL: m.URL, Started: m.Started, Stacks: count[name]})
	}
	return st
}

// Holder is the member that holds name, empty when none does.
func (c *Cluster) Holder(name string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.owners[name]
}

// zapLogger silences the etcd client's own logging: this package logs
// what matters with slog.
func zapLogger() *zap.Logger { return zap.NewNop() }
