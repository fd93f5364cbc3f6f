package daemon

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/stackd/stackd/daemon/livelog"
	"github.com/stackd/stackd/daemon/spec"
)

// Observer is told what happens, for metrics; web implements it with
// Prometheus. Its methods must not block.
type Observer interface {
	// UpdateFinished reports a finished update (its type, state, start
	// and end).
	UpdateFinished(u Update)
	// Polled reports one branch resolution.
	Polled(err error, took time.Duration)
	// CommitApplied reports how long a new commit took from being seen to
	// being applied.
	CommitApplied(took time.Duration)
	// ConfigReloaded reports a reload attempt.
	ConfigReloaded(s ConfigStatus)
	// DriftChecked reports a drift check's outcome: a drift state.
	DriftChecked(state string)
	// PolicyEvaluated reports the policies' verdict on a preview of stack.
	PolicyEvaluated(stack string, v PolicyVerdict)
	// ResourcesExportFailed reports an operation on stack after which its
	// resources could not be exported from its state.
	ResourcesExportFailed(stack string)
}

type nopObserver struct{}

func (nopObserver) UpdateFinished(Update)                 {}
func (nopObserver) Polled(error, time.Duration)           {}
func (nopObserver) CommitApplied(time.Duration)           {}
func (nopObserver) ConfigReloaded(ConfigStatus)           {}
func (nopObserver) DriftChecked(string)                   {}
func (nopObserver) PolicyEvaluated(string, PolicyVerdict) {}
func (nopObserver) ResourcesExportFailed(string)          {}

// ConfigStatus is the outcome of the last config (re)load.
type ConfigStatus struct {
	Successful  bool      `json:"successful"`
	LastSuccess time.Time `json:"lastSuccess,omitzero"`
	LastAttempt time.Time `json:"lastAttempt,omitzero"`
	// Error says why the last attempt failed: the config's problems, one
	// per line, each naming file:line:column.
	Error string `json:"error,omitempty"`
	// Health is the config's as a whole: the worst of its sources'.
	Health *Health `json:"health,omitempty"`
	// Sources are the --config values, in order.
	Sources []SourceStatus `json:"sources,omitempty"`
	// Paused says that no operation starts until resumed (stackd pause).
	Paused bool `json:"paused,omitempty"`
	// Removes is how many stacks the last config refused by the
	// mass-removal guard removes: a reload allowing that many removals
	// (stackd reload --allow-removal N) applies it once. Zero otherwise.
	Removes int `json:"removes,omitempty"`
	// Policies is the state of the policies (--policy); nil without.
	Policies *PolicyStatus `json:"policies,omitempty"`
	// Orphaned are the stacks kept although they left the config, because
	// their config source is no longer configured: a reload allowing their
	// removal (stackd reload --allow-removal N) removes them.
	Orphaned []string `json:"orphaned,omitempty"`
	// Stopping says that stackd is stopping: no operation starts, and it
	// waits for those in WaitingFor ("<stack> (<update>)") to end.
	Stopping   bool     `json:"stopping,omitempty"`
	WaitingFor []string `json:"waitingFor,omitempty"`
}

// PolicyStatus is the outcome of the last load of the policies.
type PolicyStatus struct {
	// Source is the --policy value, free of credentials.
	Source string `json:"source"`
	// Commit is the commit of a Git source whose policies are in force.
	Commit string `json:"commit,omitempty"`
	// Policies are the names of the policies in force.
	Policies    []string  `json:"policies"`
	Successful  bool      `json:"successful"`
	LastSuccess time.Time `json:"lastSuccess,omitzero"`
	LastAttempt time.Time `json:"lastAttempt,omitzero"`
	// Error says why the last load failed, each problem naming
	// file:line:column; the policies loaded before stay in force (none:
	// every change is denied).
	Error string `json:"error,omitempty"`
}

// PolicyReporter is implemented by Policies that report their state.
type PolicyReporter interface {
	PolicyStatus() PolicyStatus
}

// SourceStatus is the state of one config source.
type SourceStatus struct {
	// Source is the --config value, free of credentials.
	Source string `json:"source"`
	// Git is set for a Git source.
	Git *spec.GitDir `json:"git,omitempty"`
	// Commit is the commit whose manifests are in force (Git sources).
	Commit string `json:"commit,omitempty"`
	// LatestCommit is what Git.Ref pointed at when last polled. It differs
	// from Commit while it is being applied, or when it could not be.
	LatestCommit string `json:"latestCommit,omitempty"`
	// LastPoll is when the Git ref was last resolved.
	LastPoll time.Time `json:"lastPoll,omitzero"`
	// AppliedAt is when the source's content in force was applied.
	AppliedAt time.Time `json:"appliedAt,omitzero"`
	// Error says why the source's latest content is not in force: it
	// cannot be fetched, or the config it makes is not valid.
	Error string `json:"error,omitempty"`
	// Stacks counts the stacks the source defines.
	Stacks int `json:"stacks"`
	// Health is Degraded when Error is set, else the worst health of the
	// source's stacks (Progressing while a new commit is applied).
	Health Health `json:"health"`
}

// ConfigRevision is one attempt to apply a new config: what the sources
// were, whether it was applied, and which stacks it added, changed or
// removed.
type ConfigRevision struct {
	// Seq numbers revisions, from 1; the store assigns it.
	Seq  uint64    `json:"seq"`
	Time time.Time `json:"time"`
	// Trigger is what read the config: "start", "git" (a new commit),
	// "watch" (a file changed) or "reload" (SIGHUP or the API).
	Trigger string           `json:"trigger"`
	Sources []RevisionSource `json:"sources"`
	Applied bool             `json:"applied"`
	// Error says why the revision was not applied.
	Error   string   `json:"error,omitempty"`
	Added   []string `json:"added,omitempty"`
	Changed []string `json:"changed,omitempty"`
	Removed []string `json:"removed,omitempty"`
	// AllowedRemoval is the removals an operator allowed this reload
	// (stackd reload --allow-removal N), past the mass-removal guard.
	AllowedRemoval int `json:"allowedRemoval,omitempty"`
}

// RevisionSource is one source of a revision, and its commit when it is
// a Git source.
type RevisionSource struct {
	Source string `json:"source"`
	Commit string `json:"commit,omitempty"`
}

// PushResult is what a push webhook woke: the stacks and config sources
// that track the pushed branch.
type PushResult struct {
	Stacks  []string `json:"stacks"`
	Sources []string `json:"sources,omitempty"`
}

// Stats are the scheduler's gauges.
type Stats struct {
	// Running counts operations in flight.
	Running int
	// Queued counts stacks that want to run but wait for a worker, a
	// prerequisite or a sync wave.
	Queued int
	// Paused is set while no operation may start (Pause).
	Paused bool
	// AwaitingApproval counts the stacks this replica acts on whose plan
	// awaits approval.
	AwaitingApproval int
}

// ErrUnknownUpdate is returned for an update id that does not exist.
var ErrUnknownUpdate = errors.New("unknown update")

// Stats reports the scheduler's gauges.
func (d *Daemon) Stats() Stats {
	d.mu.Lock()
	defer d.mu.Unlock()
	s := Stats{Running: d.running, Paused: d.paused}
	for name := range d.waiters {
		if st := d.stacks[name]; st != nil && !st.running && st.waiting {
			s.Queued++
		}
	}
	for _, st := range d.stacks {
		if g := st.rec.Status.Gate; g != nil && g.State == GateAwaiting && d.acts(st) {
			s.AwaitingApproval++
		}
	}
	return s
}

// Updates lists a stack's updates, newest first (see Store.Updates).
func (d *Daemon) Updates(stack string, before uint64, limit int) ([]Update, error) {
	d.mu.Lock()
	_, known := d.stacks[stack]
	d.mu.Unlock()
	if !known {
		return nil, ErrUnknownStack
	}
	return d.opts.Store.Updates(stack, before, limit)
}

// Update returns one update.
func (d *Daemon) Update(id string) (Update, error) {
	u, err := d.opts.Store.Update(id)
	if err != nil {
		return Update{}, fmt.Errorf("%w: %s", ErrUnknownUpdate, id)
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
	d.mu.Lock()
	st := d.stacks[u.Stack]
	var live *livelog.Log
	if st != nil && st.running && st.rec.Status.CurrentUpdate != nil && st.rec.Status.CurrentUpdate.Name == id {
		live = st.live
	}
	d.mu.Unlock()
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
func (d *Daemon) Push(urls []string, branch string) PushResult {
	want := spec.RepoKeys(urls)
	res := PushResult{Stacks: d.pushStacks(want, branch), Sources: d.pushSources(want, branch)}
	if err := d.own.Push(urls, branch); err != nil {
		d.log.Warn("cannot pass the push on to the other replicas", "err", err)
	}
	if res.Stacks == nil {
		res.Stacks = []string{}
	}
	return res
}

func (d *Daemon) pushStacks(want map[string]bool, branch string) []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var names []string
	for _, name := range slices.Sorted(maps.Keys(d.stacks)) {
		st := d.stacks[name]
		if !tracksBranch(st) || strings.TrimPrefix(st.stack.Spec.Branch, "refs/heads/") != branch {
			continue
		}
		src, err := d.gitSource(st.stack)
		if err != nil || !want[spec.RepoKey(src.URL)] {
			continue
		}
		d.opts.Fetcher.Forget(src.URL)
		st.pollNow = true
		d.markDirty(st)
		names = append(names, name)
	}
	if len(names) > 0 {
		d.kick()
	}
	return names
}

// ConfigRevisions lists the config revisions, newest first (see
// Store.Revisions).
func (d *Daemon) ConfigRevisions(before uint64, limit int) ([]ConfigRevision, error) {
	return d.opts.Store.Revisions(before, limit)
}
