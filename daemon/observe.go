package daemon

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/stackd/stackd/daemon/livelog"
	"github.com/stackd/stackd/daemon/model"
	"github.com/stackd/stackd/daemon/spec"
)

// Observer is told what happens, for metrics; web implements it with
// Prometheus. Its methods must not block.
type Observer interface {
	// UpdateFinished reports a finished update (its type, state, start
	// and end).
	UpdateFinished(u model.Update)
	// Polled reports one branch resolution.
	Polled(err error, took time.Duration)
	// CommitApplied reports how long a new commit took from being seen to
	// being applied.
	CommitApplied(took time.Duration)
	// ConfigReloaded reports a reload attempt.
	ConfigReloaded(s model.ConfigStatus)
	// DriftChecked reports a drift check's outcome: a drift state.
	DriftChecked(state string)
	// PolicyEvaluated reports the policies' verdict on a preview of stack.
	PolicyEvaluated(stack string, v model.PolicyVerdict)
	// ResourcesExportFailed reports an operation on stack after which its
	// resources could not be exported from its state.
	ResourcesExportFailed(stack string)
}

type nopObserver struct{}

func (nopObserver) UpdateFinished(model.Update)                 {}
func (nopObserver) Polled(error, time.Duration)                 {}
func (nopObserver) CommitApplied(time.Duration)                 {}
func (nopObserver) ConfigReloaded(model.ConfigStatus)           {}
func (nopObserver) DriftChecked(string)                         {}
func (nopObserver) PolicyEvaluated(string, model.PolicyVerdict) {}
func (nopObserver) ResourcesExportFailed(string)                {}

// PolicyReporter is implemented by Policies that report their state.
type PolicyReporter interface {
	PolicyStatus() model.PolicyStatus
}

// ErrUnknownUpdate is returned for an update id that does not exist.
var ErrUnknownUpdate = errors.New("unknown update")

// Stats reports the scheduler's gauges.
func (d *Daemon) Stats() model.Stats {
	l := d.lock()
	defer l.unlock()
	s := model.Stats{Running: l.running, Paused: l.paused}
	for name := range l.waiters {
		if st := l.stacks[name]; st != nil && st.act.Waiting() {
			s.Queued++
		}
	}
	for _, st := range l.stacks {
		if g := st.rec.Status.Gate; g != nil && g.State == model.GateAwaiting && l.acts(st) {
			s.AwaitingApproval++
		}
	}
	return s
}

// Updates lists a stack's updates, newest first (see Store.Updates).
func (d *Daemon) Updates(stack string, before uint64, limit int) ([]model.Update, error) {
	l := d.lock()
	_, known := l.stacks[stack]
	l.unlock()
	if !known {
		return nil, ErrUnknownStack
	}
	return d.opts.Store.Updates(stack, before, limit)
}

// Update returns one update.
func (d *Daemon) Update(id string) (model.Update, error) {
	u, err := d.opts.Store.Update(id)
	if err != nil {
		return model.Update{}, fmt.Errorf("%w: %s", ErrUnknownUpdate, id)
	}
	return u, nil
}

// Log returns an update's log: the live log while it runs (followers read
// it as it grows), else the stored one. Both are scrubbed of the secrets
// the daemon knows.
func (d *Daemon) Log(id string) ([]byte, *livelog.Log, error) {
	u, err := d.Update(id)
	if err != nil {
		return nil, nil, err
	}
	l := d.lock()
	st := l.stacks[u.Stack]
	var live *livelog.Log
	if st != nil && st.act.Running() && st.rec.Status.CurrentUpdate != nil && st.rec.Status.CurrentUpdate.Name == id {
		live = st.live
	}
	l.unlock()
	if live != nil {
		return nil, live, nil
	}
	log, err := d.opts.Store.Log(id)
	if err != nil {
		return nil, nil, nil // an update that wrote no log yet
	}
	return log, nil, nil
}

// Push reports a push to a repository's branch, as a webhook announces
// it: the stacks and Git config sources that track that branch of that
// repository poll it now. urls are the repository's URLs as the forge
// names them (clone, SSH, web).
func (d *Daemon) Push(urls []string, branch string) model.PushResult {
	want := spec.RepoKeys(urls)
	res := model.PushResult{Stacks: d.pushStacks(want, branch), Sources: d.pushSources(want, branch)}
	if err := d.own.Push(urls, branch); err != nil {
		d.log.Warn("cannot pass the push on to the other replicas", "err", err)
	}
	if res.Stacks == nil {
		res.Stacks = []string{}
	}
	return res
}

func (d *Daemon) pushStacks(want map[string]bool, branch string) []string {
	l := d.lock()
	defer l.unlock()
	var names []string
	for _, name := range slices.Sorted(maps.Keys(l.stacks)) {
		st := l.stacks[name]
		if !tracksBranch(st) || strings.TrimPrefix(st.stack.Spec.Branch, "refs/heads/") != branch {
			continue
		}
		src, err := l.gitSource(st.stack)
		if err != nil || !want[spec.RepoKey(src.URL)] {
			continue
		}
		l.opts.Fetcher.Forget(src.URL)
		st.pollNow = true
		l.markDirty(st)
		names = append(names, name)
	}
	if len(names) > 0 {
		l.kick()
	}
	return names
}

// ConfigRevisions lists the config revisions, newest first (see
// Store.Revisions).
func (d *Daemon) ConfigRevisions(before uint64, limit int) ([]model.ConfigRevision, error) {
	return d.opts.Store.Revisions(before, limit)
}
