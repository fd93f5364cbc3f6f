package daemon

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/stackd/stackd/daemon/model"
	"github.com/stackd/stackd/daemon/spec"
)

// This file is the daemon's side of cluster mode: what it does when it
// gains, loses or must hand over a stack, and how it follows the records
// and requests of stacks other replicas hold. Scheduling skips stacks
// this replica does not hold (evaluateStack), and putStack writes only
// those it holds.

// followOwnership handles ownership events until ctx ends.
func (d *Daemon) followOwnership(ctx context.Context) {
	defer d.loopWG.Done()
	events := d.own.Events()
	for {
		select {
		case <-ctx.Done():
			return
		case e, ok := <-events:
			if !ok {
				return
			}
			d.ownershipChanged(e)
		}
	}
}

func (d *Daemon) ownershipChanged(e model.OwnershipEvent) {
	switch e.Kind {
	case model.OwnerGained:
		d.gained(e.Stack)
	case model.OwnerLost:
		d.lost(e.Stack)
	case model.OwnerHandover:
		d.handover(e.Stack)
	case model.OwnerRecord:
		d.recordFrom(e.Stack, e.Record)
	case model.OwnerSync:
		d.syncRequested(e.Stack, e.Token)
	case model.OwnerPush:
		d.pushStacks(spec.RepoKeys(e.URLs), e.Branch)
	}
}

// gained takes a stack over: its record as the last holder wrote it,
// updates that holder left running marked aborted, and a fresh look at
// its source. When the last update was left running (its holder died)
// or was interrupted, the lock it may have left on the backend is broken
// by the next operation, which waits for the handover grace first.
func (d *Daemon) gained(name string) {
	rec, recErr := d.opts.Store.Stack(name)
	recent, _ := d.opts.Store.Updates(name, 0, 3)
	now := time.Now()
	l := d.lock()
	defer l.unlock()
	st := l.stacks[name]
	if st == nil {
		l.own.Release(name) // no longer known here
		return
	}
	st.releasing = false
	if st.held {
		return // it stayed here: members came back before the handover
	}
	st.held = true
	switch {
	case recErr == nil:
		st.rec = rec
	case !errors.Is(recErr, model.ErrNotFound):
		l.log.Error("cannot read the record of a stack taken over", "stack", name, "err", recErr)
	}
	st.commit, st.sourceErr, st.pollNow = "", nil, true
	st.act.Unblock()
	if len(recent) > 0 && recent[0].State == model.UpdateAborted && recent[0].PullRequest == 0 {
		// Interrupted by the last holder (a handover after its grace): its
		// CLI has ended, but may not have released the lock.
		st.breakLockAt = now.Add(l.opts.HandoverGrace)
	}
	for _, u := range recent {
		if u.State != model.UpdateRunning || u.Type == model.UpdatePreview {
			continue // a preview is its pull request's holder's to end
		}
		u.State, u.EndTime = model.UpdateAborted, now
		u.Message = "the replica running the update stopped holding the stack"
		if u.Node != "" {
			u.Message = fmt.Sprintf("replica %s stopped holding the stack during the update", u.Node)
		}
		if err := l.opts.Store.PutUpdate(u); err != nil {
			l.log.Error("cannot mark an update of a stack taken over aborted", "update", u.ID, "err", err)
		}
		st.breakLockAt = now.Add(l.opts.HandoverGrace)
		l.log.Warn("update left running by the stack's last holder; marked aborted", "stack", name, "update", u.ID, "node", u.Node)
	}
	st.rec.Status.CurrentUpdate = nil
	if st.stack != nil {
		if err := l.observeSpec(st, st.stack); err != nil {
			l.log.Error("cannot record the spec of a stack taken over", "stack", name, "err", err)
		}
	} else {
		st.rec.Removed = true
	}
	l.putStack(st)
	l.log.Info("now acting on the stack", "stack", name)
	l.kick()
}

// lost stops acting on a stack at once: its running operation is
// interrupted, and nothing more is written about it. The loss is
// acknowledged (Release) once that operation has ended (release), so
// that the replica takes the stack again only after it.
func (d *Daemon) lost(name string) {
	l := d.lock()
	defer l.unlock()
	st := l.stacks[name]
	if st == nil || !st.act.Running() {
		l.own.Release(name)
	}
	if st == nil {
		return
	}
	st.releasing, st.held = false, false
	l.markDirty(st)
	if st.act.Running() && st.cancel != nil {
		l.log.Warn("lost the stack during an operation; interrupting it", "stack", name)
		st.cancel()
	}
}

// handover makes a stack go to another replica once idle.
func (d *Daemon) handover(name string) {
	l := d.lock()
	defer l.unlock()
	st := l.stacks[name]
	if st == nil {
		l.own.Release(name)
		return
	}
	st.releasing = true
	l.markDirty(st)
}

// handingOver releases st once no operation runs on it; it reports
// whether st is still being handed over (and so must not start
// anything). A running operation is never interrupted for a handover:
// the member that should hold the stack (one that joined, or came back
// after a freeze) waits for it to end, rather than aborting an update
// half-way and running its own.
func (d locked) handingOver(st *stackState, _ time.Time) (bool, time.Duration) {
	if !st.releasing {
		return false, 0
	}
	if !st.act.Running() {
		st.releasing, st.held = false, false
		d.own.Release(st.rec.Name)
		d.log.Info("handed the stack over", "stack", st.rec.Name)
	}
	return true, 0
}

// recordFrom takes the record another replica wrote of a stack it holds;
// nil when it deleted the stack.
func (d *Daemon) recordFrom(name string, rec *model.StackRecord) {
	l := d.lock()
	defer l.unlock()
	st := l.stacks[name]
	if st != nil && l.acts(st) {
		return
	}
	switch {
	case rec == nil && st != nil && st.stack == nil:
		l.forget(name) // removed and finalized by its holder
		l.declareStacks()
	case rec == nil:
	case st == nil:
		st = &stackState{rec: *rec}
		l.stacks[name] = st
		l.order = nil
		l.touch(st)
		l.declareStacks()
	default:
		st.rec = *rec
		l.touch(st)
		l.wakeWaiting() // on a prerequisite held elsewhere
	}
}

// syncRequested applies a sync request another replica received.
func (d *Daemon) syncRequested(name, token string) {
	l := d.lock()
	defer l.unlock()
	if st := l.stacks[name]; st != nil && st.rec.SyncRequest != token {
		l.sync(st, token)
	}
}

// requestSync asks for a run of st with token: directly when this
// replica holds it, else through its holder.
func (d locked) requestSync(st *stackState, token string) {
	if d.acts(st) {
		d.sync(st, token)
		return
	}
	if st.requested == token {
		return
	}
	st.requested = token
	if err := d.own.RequestSync(st.rec.Name, token); err != nil {
		d.log.Warn("cannot pass a sync request to the stack's holder", "stack", st.rec.Name, "err", err)
	}
}

// acts says whether this replica acts on st: always for a single node;
// in a cluster, while it holds st and has taken it over.
func (d locked) acts(st *stackState) bool { return !d.clustered || st.held }

// busyElsewhere says whether a stack held by another replica is running
// an operation, as its record says.
func busyElsewhere(st *stackState) bool { return st.rec.Status.CurrentUpdate != nil }

// RemoteLog is the API URL of the replica that runs update id now, when
// it is not this one: that replica has its live log. Empty otherwise.
func (d *Daemon) RemoteLog(id string) string {
	if !d.clustered {
		return ""
	}
	u, err := d.opts.Store.Update(id)
	if err != nil || u.State != model.UpdateRunning {
		return ""
	}
	return d.HolderURL(u.Stack)
}

// HolderURL is the API URL of the replica that holds stack name, when it
// is not this one: approvals, window overrides and previews now of the
// stack are its to make. Empty otherwise, or when no replica holds it.
func (d *Daemon) HolderURL(name string) string {
	if !d.clustered {
		return ""
	}
	l := d.lock()
	st := l.stacks[name]
	here := st == nil || l.acts(st)
	l.unlock()
	if here {
		return ""
	}
	holder := d.own.Holder(name)
	for _, m := range d.own.Status().Members {
		if m.Name == holder && holder != d.opts.Node {
			return m.URL
		}
	}
	return ""
}

// ClusterStatus is the cluster as this replica sees it; ok is false
// outside cluster mode.
func (d *Daemon) ClusterStatus() (model.ClusterStatus, bool) {
	if !d.clustered {
		return model.ClusterStatus{}, false
	}
	return d.own.Status(), true
}

// leads says whether this replica records what is recorded once for the
// cluster (config revisions): always outside cluster mode.
func (d *Daemon) leads() bool {
	if !d.clustered {
		return true
	}
	st := d.own.Status()
	return st.Leader == st.Node
}
