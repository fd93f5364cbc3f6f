package daemon

import (
	"errors"
	"maps"
	"slices"
	"time"

	"github.com/stackd/stackd/daemon/conditions"
	"github.com/stackd/stackd/daemon/decide"
	"github.com/stackd/stackd/daemon/model"
	"github.com/stackd/stackd/daemon/scrub"
	"github.com/stackd/stackd/daemon/spec"
)

// ErrUnknownStack is returned for a name that is not a stack of the
// daemon.
var ErrUnknownStack = errors.New("unknown stack")

// StackVersions lists every stack's version, by name: a client that
// keeps views asks again only for those that changed.
func (d *Daemon) StackVersions() []model.StackVersion {
	l := d.lock()
	defer l.unlock()
	names := l.evalOrder() // kept, by sync wave then name: by name unless waves differ
	if !slices.IsSorted(names) {
		names = slices.Sorted(slices.Values(names))
	}
	out := make([]model.StackVersion, 0, len(names))
	for _, name := range names {
		l.cleanStatus(l.stacks[name])
		out = append(out, model.StackVersion{Name: name, Version: l.stacks[name].version, Holder: l.own.Holder(name)})
	}
	return out
}

// touch notes a change of st's view.
func (d locked) touch(st *stackState) {
	d.versions++
	st.version = d.versions
	d.markDirty(st)
}

// Stacks lists every stack, by name.
func (d *Daemon) Stacks() []model.StackView {
	l := d.lock()
	defer l.unlock()
	out := make([]model.StackView, 0, len(l.stacks))
	for _, name := range slices.Sorted(maps.Keys(l.stacks)) {
		out = append(out, l.view(l.stacks[name]))
	}
	return out
}

// Stack returns one stack, or ErrUnknownStack.
func (d *Daemon) Stack(name string) (model.StackView, error) {
	l := d.lock()
	defer l.unlock()
	st := l.stacks[name]
	if st == nil {
		return model.StackView{}, ErrUnknownStack
	}
	return l.view(st), nil
}

func (d locked) view(st *stackState) model.StackView {
	d.cleanStatus(st)
	v := model.StackView{Name: st.rec.Name, Status: st.rec.Status.Clone(), Removed: st.rec.Removed, Orphaned: st.rec.Orphaned,
		LastSuccess: st.rec.LastSuccess, AppliedCommit: st.rec.AppliedCommit, LatestCommit: st.rec.LatestCommit}
	v.Status.Health = healthPtr(conditions.HealthOf(&st.rec.Status, st.rec.Generation))
	if st.stack != nil {
		v.Spec, _ = scrub.Plain(spec.Redacted(&st.stack.Spec), d.red).(map[string]any)
		v.ExternalLink = st.stack.ExternalLink()
		v.Labels = st.stack.Labels
		v.Tracking = spec.Tracking(&st.stack.Spec)
		v.CommitURL = spec.CommitURL(st.stack.Spec.ProjectRepo)
		v.Source, v.Owner = st.stack.Source, st.stack.Owner
	}
	if d.clustered {
		v.Holder = d.own.Holder(st.rec.Name)
	}
	return v
}

// Sync asks for a run of the named stack, as PKO's reconcile-request
// annotation does, and returns the request's token. For a stack that left
// the config and whose destroy stalled, it asks for another destroy.
func (d *Daemon) Sync(name string) (string, error) {
	l := d.lock()
	defer l.unlock()
	st := l.stacks[name]
	if st == nil {
		return "", ErrUnknownStack
	}
	token := time.Now().UTC().Format(time.RFC3339Nano)
	l.requestSync(st, decide.ManualToken(token))
	return token, nil
}

// SyncWithRefresh begins the reason of an up that a sync of a drifted
// stack asked for: it refreshes first.
const SyncWithRefresh = "Sync with refresh"

// sync asks for a run of st, which this replica holds.
func (d locked) sync(st *stackState, token string) {
	token, manual := decide.SplitManual(token) // a replayed request is no new one
	st.rec.SyncRequest, st.rec.ManualSync = token, st.rec.ManualSync || manual && token != st.rec.SyncRequest
	st.act.Unblock()
	if dr := st.rec.Status.Drift; dr != nil && dr.State == spec.DriftDrifted && st.remediate == "" {
		// A sync heals, as Argo CD's does: the up refreshes first, so
		// that what changed outside Pulumi is put back.
		st.remediate = SyncWithRefresh + " (drift found by check " + dr.Check + ")"
	}
	if tracksBranch(st) {
		st.pollNow = true // a sync looks at the branch again
		if src, err := d.gitSource(st.stack); err == nil {
			d.opts.Fetcher.Forget(src.URL)
		}
	}
	d.putStack(st)
	d.kick()
}

// Ready is nil once the daemon has started.
func (d *Daemon) Ready() error {
	l := d.lock()
	defer l.unlock()
	switch {
	case !l.started:
		return errors.New("starting")
	case l.cfg == nil:
		return errors.New("no config applied yet: " + l.reload.Error)
	case l.clustered && !l.own.Status().Session:
		return errors.New("no cluster session: acting on no stack")
	}
	return nil
}
