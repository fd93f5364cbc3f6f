package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/stackd/stackd/daemon"
	"github.com/stackd/stackd/daemon/model"
	"github.com/stackd/stackd/daemon/review"
)

// Pull requests in a cluster. Any replica takes a pull-request event and
// posts it under prevents/<key>. The previews of a pull request run on
// the replica that holds its lease, prleases/<key>, a key bound to that
// replica's session as a stack's ownership key is: it is taken when the
// pull request has work left (the Event.WorkKey of its newest event is
// not its record's Done: a round, a closing, a sweep) and nobody holds
// it, released when the work ended, and it goes with the session of a
// replica that died, so that another takes the work over. A closed pull
// request's event stays until its holder destroyed its review stacks and
// deleted its event and record. The record, prrecords/<key>, is written by the
// holder only, each write fenced by the lease and by the event key, so
// that a replica cut off, or a round of a closed pull request, never
// writes it again; the preview records in the stacks' histories are
// fenced by the lease too.

// prState is what this replica knows of one pull request.
type prState struct {
	event  *review.Event // the newest posted; nil when none (closed)
	done   string        // the record's Done
	holder string        // the replica holding the lease, "" for none
	held   int64         // create revision of this replica's lease key; 0 when not held
	sent   string        // the WorkKey last given to the previewer
	taking bool          // a take is in flight
}

// prWork is what one pass over the pull requests decided.
type prWork struct {
	take, release []string
	deliver       []review.Work
}

// PostPullRequest passes a pull-request event on: the replica that holds
// or takes the pull request's lease runs it, a closed pull request's
// too (it destroys its review stacks, then deletes its event and record).
//
// An event that repeats the one before it (the same head commit) is
// posted with a Touch: the holder counts it as activity on the review
// stacks, as one replica does, and starts no new round.
func (c *Cluster) PostPullRequest(ev review.Event) error {
	key := ev.Key()
	ev.Sweep, ev.Touch = 0, 0 // stackd's own, never a forge's
	ctx, cancel := c.ctx()
	defer cancel()
	resp, err := c.cli.Get(ctx, c.key("prevents/", key))
	if err != nil {
		return fmt.Errorf("cluster: pass pull request %s on: %w", key, err)
	}
	var prev review.Event
	if len(resp.Kvs) > 0 && json.Unmarshal(resp.Kvs[0].Value, &prev) == nil && ev.Repeats(prev) {
		ev.Touch = max(time.Now().UnixMilli(), prev.Touch+1) // a new WorkKey each time
	}
	v, err := json.Marshal(ev)
	if err != nil {
		return fmt.Errorf("cluster: pass pull request %s on: %w", key, err)
	}
	if _, err := c.cli.Put(ctx, c.key("prevents/", key), string(v)); err != nil {
		return fmt.Errorf("cluster: pass pull request %s on: %w", key, err)
	}
	return nil
}

// PullRequestWork delivers the work of the pull requests whose lease this
// replica holds. A replica takes leases only once it was called: one
// that does not preview (no --forge) leaves the work to the others.
func (c *Cluster) PullRequestWork() <-chan review.Work {
	c.mu.Lock()
	c.prFollowed = true
	c.mu.Unlock()
	c.poke()
	return c.prWork.out
}

// SweepPullRequest asks the holder of pull request key to destroy its
// review stacks expired at at: it sets the Sweep of the pull request's
// event to at, unless it is at or later already, or the event changed
// meanwhile (a newer event is activity, and work of its own).
func (c *Cluster) SweepPullRequest(key string, at int64) error {
	ctx, cancel := c.ctx()
	defer cancel()
	ekey := c.key("prevents/", key)
	resp, err := c.cli.Get(ctx, ekey)
	if err != nil {
		return fmt.Errorf("cluster: sweep pull request %s: %w", key, err)
	}
	if len(resp.Kvs) == 0 {
		return nil // closed and forgotten
	}
	var ev review.Event
	if err := json.Unmarshal(resp.Kvs[0].Value, &ev); err != nil {
		return fmt.Errorf("cluster: sweep pull request %s: %w", key, err)
	}
	if ev.Sweep >= at {
		return nil
	}
	ev.Sweep = at
	v, err := json.Marshal(ev)
	if err != nil {
		return fmt.Errorf("cluster: sweep pull request %s: %w", key, err)
	}
	same := clientv3.Compare(clientv3.ModRevision(ekey), "=", resp.Kvs[0].ModRevision)
	if _, err := c.cli.Txn(ctx).If(same).Then(clientv3.OpPut(ekey, string(v))).Commit(); err != nil {
		return fmt.Errorf("cluster: sweep pull request %s: %w", key, err)
	}
	return nil
}

// ReleasePullRequest gives up the lease of pull request key once the
// work whose Event.WorkKey is work ended, unless a newer event was
// handed over meanwhile (its work is to run under the lease). A newer
// event that comes later is taken by whichever replica takes the lease
// first.
func (c *Cluster) ReleasePullRequest(key, work string) {
	c.mu.Lock()
	st := c.prs[key]
	var rev int64
	if st != nil && st.sent == work {
		rev, st.held, st.sent = st.held, 0, ""
	}
	c.mu.Unlock()
	c.releasePR(key, rev)
}

// releasePR deletes the lease key of pull request key if its create
// revision is rev (nonzero).
func (c *Cluster) releasePR(key string, rev int64) {
	if rev == 0 {
		return
	}
	ctx, cancel := c.ctx()
	defer cancel()
	lease := c.key("prleases/", key)
	if _, err := c.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(lease), "=", rev)).Then(clientv3.OpDelete(lease)).Commit(); err != nil {
		c.log.Warn("cannot release a pull request; it moves when this replica's lease ends", "pullRequest", key, "err", err)
	}
	c.poke()
}

// prFence is the fence of the writes about pull request key: its lease
// as this replica created it.
func (c *Cluster) prFence(key string) (fence, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if st := c.prs[key]; st != nil && st.held != 0 {
		return fence{name: key, key: c.key("prleases/", key), rev: st.held}, nil
	}
	return fence{}, fmt.Errorf("%s: %w", key, daemon.ErrNotOwner)
}

// errClosed is returned for a write about a pull request that closed.
var errClosed = errors.New("the pull request is closed")

// PutPullRequest writes the record of a pull request whose lease this
// replica holds, unless it closed meanwhile.
func (c *Cluster) PutPullRequest(rec review.Record) error {
	key := rec.View.Key
	if key == "" {
		return errors.New("cluster: put pull request: empty key")
	}
	f, err := c.prFence(key)
	if err != nil {
		return fmt.Errorf("cluster: put pull request %s: %w", key, err)
	}
	v, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("cluster: put pull request %s: %w", key, err)
	}
	open := clientv3.Compare(clientv3.CreateRevision(c.key("prevents/", key)), ">", 0)
	ok, err := c.txnBehind(f, []clientv3.Cmp{open}, clientv3.OpPut(c.key("prrecords/", key), string(v)))
	switch {
	case err != nil:
		return fmt.Errorf("cluster: put pull request %s: %w", key, err)
	case !ok:
		return fmt.Errorf("cluster: put pull request %s: %w", key, errClosed)
	}
	return nil
}

// DeletePullRequest deletes the event and the record of pull request
// key: it is closed, or not previewed.
func (c *Cluster) DeletePullRequest(key string) error {
	ctx, cancel := c.ctx()
	defer cancel()
	_, err := c.cli.Txn(ctx).Then(clientv3.OpDelete(c.key("prevents/", key)), clientv3.OpDelete(c.key("prrecords/", key))).Commit()
	if err != nil {
		return fmt.Errorf("cluster: delete pull request %s: %w", key, err)
	}
	return nil
}

// PullRequests reads the records of every open pull request.
func (c *Cluster) PullRequests() ([]review.Record, error) {
	ctx, cancel := c.ctx()
	defer cancel()
	resp, err := c.cli.Get(ctx, c.opts.Prefix+"prrecords/", clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("cluster: pull requests: %w", err)
	}
	out := make([]review.Record, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		var rec review.Record
		if err := json.Unmarshal(kv.Value, &rec); err != nil {
			return nil, fmt.Errorf("cluster: pull request %s: %w", c.name("prrecords/", kv.Key), err)
		}
		out = append(out, rec)
	}
	return out, nil
}

// BeginPullRequestPreview records the start of a preview of pull
// request key in its stack's history, behind the pull request's lease.
func (c *Cluster) BeginPullRequestPreview(key string, u model.Update) (model.Update, error) {
	f, err := c.prFence(key)
	if err != nil {
		return model.Update{}, fmt.Errorf("cluster: begin preview of %s: %w", u.Stack, err)
	}
	return c.beginUpdate(u, f)
}

// PutPullRequestPreview overwrites the record of a preview of pull
// request key.
func (c *Cluster) PutPullRequestPreview(key string, u model.Update) error {
	f, err := c.prFence(key)
	if err != nil {
		return fmt.Errorf("cluster: put preview %s: %w", model.UpdateID(u.Stack, u.Seq), err)
	}
	return c.putUpdate(u, f)
}

// PutPullRequestPreviewLog stores the log of preview id of pull
// request key.
func (c *Cluster) PutPullRequestPreviewLog(key, id string, log []byte) error {
	f, err := c.prFence(key)
	if err != nil {
		return fmt.Errorf("cluster: put log %s: %w", id, err)
	}
	return c.putLog(id, log, f)
}

// decidePRs is one pass over the pull requests this replica knows: the
// leases to take (work left, nobody holds it), those to release (closed)
// and the work to hand to the previewer. It is pure and changes nothing.
func decidePRs(prs map[string]*prState) prWork {
	var w prWork
	for _, key := range slices.Sorted(maps.Keys(prs)) {
		st := prs[key]
		switch {
		case st.held != 0 && st.event == nil:
			w.deliver = append(w.deliver, review.Work{Key: key, Closed: true})
			w.release = append(w.release, key)
		case st.held != 0 && st.event.WorkKey() != st.sent:
			w.deliver = append(w.deliver, review.Work{Key: key, Event: *st.event})
		case st.held == 0 && st.event != nil && st.holder == "" && st.done != st.event.WorkKey() && !st.taking:
			w.take = append(w.take, key)
		}
	}
	return w
}

// reconcilePRs runs one pass over the pull requests.
func (c *Cluster) reconcilePRs(ctx context.Context) {
	c.mu.Lock()
	if c.session == nil || !c.prFollowed {
		c.mu.Unlock()
		return
	}
	w := decidePRs(c.prs)
	for _, work := range w.deliver {
		if !work.Closed {
			c.prs[work.Key].sent = work.Event.WorkKey()
		}
	}
	for _, key := range w.take {
		c.prs[key].taking = true
	}
	lease := c.session.Lease()
	c.mu.Unlock()
	for _, work := range w.deliver {
		c.prWork.push(work)
	}
	for _, key := range w.release {
		c.mu.Lock()
		var rev int64
		if st := c.prs[key]; st != nil {
			rev, st.held, st.sent = st.held, 0, ""
		}
		c.mu.Unlock()
		c.releasePR(key, rev)
	}
	for _, key := range w.take {
		c.takePR(ctx, key, lease)
	}
}

// takePR takes the lease of pull request key, bound to lease, if nobody
// holds it, and hands its newest event to the previewer with its record.
func (c *Cluster) takePR(ctx context.Context, key string, lease clientv3.LeaseID) {
	rctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	lkey, ekey := c.key("prleases/", key), c.key("prevents/", key)
	resp, err := c.cli.Txn(rctx).
		If(clientv3.Compare(clientv3.CreateRevision(lkey), "=", 0), clientv3.Compare(clientv3.CreateRevision(ekey), ">", 0)).
		Then(clientv3.OpPut(lkey, c.opts.Node, clientv3.WithLease(lease)), clientv3.OpGet(ekey), clientv3.OpGet(c.key("prrecords/", key))).
		Commit()
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.prs[key]
	if st == nil {
		st = &prState{}
		c.prs[key] = st
	}
	st.taking = false
	switch {
	case err != nil:
		c.log.Warn("cannot take a pull request", "pullRequest", key, "err", err)
		return
	case !resp.Succeeded:
		return // taken by another, or closed: the watches tell
	case c.session == nil || c.session.Lease() != lease:
		return // the session ended meanwhile: the key goes with its lease
	}
	var ev review.Event
	if kvs := resp.Responses[1].GetResponseRange().Kvs; len(kvs) == 0 || json.Unmarshal(kvs[0].Value, &ev) != nil {
		c.log.Error("unreadable pull-request event in etcd", "pullRequest", key)
		return
	}
	work := review.Work{Key: key, Event: ev}
	if kvs := resp.Responses[2].GetResponseRange().Kvs; len(kvs) > 0 {
		var rec review.Record
		if json.Unmarshal(kvs[0].Value, &rec) == nil {
			work.Record = &rec
		}
	}
	st.held, st.holder, st.sent = resp.Header.Revision, c.opts.Node, ev.WorkKey()
	c.log.Info("holding pull request", "pullRequest", key, "commit", ev.HeadSHA, "work", ev.WorkKey())
	c.prWork.push(work)
}

// watchPRs follows the pull requests' events, records and leases.
func (c *Cluster) watchPRs(ctx context.Context, rev int64) {
	c.watch(ctx, "pr", rev, func(ev *clientv3.Event) {
		c.prChanged(string(ev.Kv.Key), ev.Kv.Value, ev.Type == clientv3.EventTypeDelete, ev.Kv.ModRevision)
	})
}

// prChanged takes one change of a key under prevents/, pullrequests/ or
// prleases/ (value nil for a deletion). A lease of this replica's that
// vanished without a release is lost at once.
func (c *Cluster) prChanged(key string, value []byte, deleted bool, modRev int64) {
	var part, name string
	for _, p := range []string{"prevents/", "prrecords/", "prleases/"} {
		if n, ok := strings.CutPrefix(key, c.opts.Prefix+p); ok && n != "" {
			part, name = p, n
		}
	}
	if part == "" {
		return
	}
	c.mu.Lock()
	st := c.prs[name]
	if st == nil {
		st = &prState{}
		c.prs[name] = st
	}
	lost := false
	switch part {
	case "prevents/":
		st.event = nil
		if !deleted {
			var ev review.Event
			if json.Unmarshal(value, &ev) == nil {
				st.event = &ev
			}
		}
	case "prrecords/":
		st.done = ""
		if !deleted {
			var rec review.Record
			if json.Unmarshal(value, &rec) == nil {
				st.done = rec.Done
			}
		}
	case "prleases/":
		st.holder = ""
		if !deleted {
			st.holder = string(value)
		} else if st.held != 0 && st.held < modRev {
			st.held, st.sent, lost = 0, "", true
		}
	}
	if st.event == nil && st.held == 0 && st.holder == "" && !st.taking {
		delete(c.prs, name)
	}
	c.mu.Unlock()
	if lost {
		c.prWork.push(review.Work{Key: name, Lost: true})
	}
	c.poke()
}

// loadPRs takes the pull requests' keys read at join.
func (c *Cluster) loadPRs(kvs []*mvccpb.KeyValue) {
	c.mu.Lock()
	c.prs = map[string]*prState{}
	c.mu.Unlock()
	for _, kv := range kvs {
		c.prChanged(string(kv.Key), kv.Value, false, 0)
	}
}

// endPRsLocked forgets the leases of a session that ended, and returns
// their pull requests: the previewer stops acting on them. c.mu is held.
func (c *Cluster) endPRsLocked() []string {
	var lost []string
	for key, st := range c.prs {
		if st.held != 0 {
			lost = append(lost, key)
			st.held, st.sent = 0, ""
		}
	}
	return lost
}
