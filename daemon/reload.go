package daemon

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/stackd/stackd/daemon/conditions"
	"github.com/stackd/stackd/daemon/model"
	"github.com/stackd/stackd/daemon/scrub"
	"github.com/stackd/stackd/daemon/spec"
)

// Reload reads the config again and applies it: Git sources are polled
// first, then every source is read and the whole is validated. A config
// with errors is not applied: the one in force stays, and the error
// (every problem, one per line) is returned and kept in ConfigStatus.
func (d *Daemon) Reload() error {
	return d.ReloadAllowingRemoval(0)
}

// ReloadAllowingRemoval is Reload that lets this one reload remove up to
// n stacks although the mass-removal guard would refuse it: the one-off,
// audited override of a removal the operator means (a source's only
// stack, say). The revision records n. A config that removes more than n
// is refused as before; n = 0 is Reload.
func (d *Daemon) ReloadAllowingRemoval(n int) error {
	if d.hasGitSources() {
		d.pollSources(d.ctxOrBackground(), true)
	}
	return d.reloadConfig("reload", max(n, 0))
}

func (d *Daemon) ctxOrBackground() context.Context {
	if d.loopCtx != nil {
		return d.loopCtx
	}
	return context.Background()
}

// reloadConfig reads every source and swaps the result in when it is
// valid, differs from the config in force and passes the mass-removal
// guard, which allowRemoval stacks removed pass. trigger says what asked
// (see ConfigRevision.Trigger). Reloads run one at a time.
func (d *Daemon) reloadConfig(trigger string, allowRemoval int) error {
	d.reloadMu.Lock()
	defer d.reloadMu.Unlock()
	now := time.Now()
	l := d.lock()
	inputs, revs, err := l.inputs()
	l.unlock()
	if err != nil { // a Git source not fetched yet: no revision to judge
		err = fmt.Errorf("config not applied: %w", err)
		return d.recordReload(now, err)
	}
	cfg, _, err := spec.LoadInputsExpanding(inputs, d.opts.Expand) // err lists every problem
	if err != nil {
		err = fmt.Errorf("config not applied: %w", err)
	} else {
		err = d.swap(cfg, revs, trigger, now, allowRemoval)
	}
	if err != nil {
		d.refused(revs, trigger, now, err)
	}
	return d.recordReload(now, err)
}

// swap applies cfg unless it means what the config in force means or
// removes too many stacks (more than allowRemoval). It records the
// revision it applied.
func (d *Daemon) swap(cfg *spec.Config, revs []model.RevisionSource, trigger string, now time.Time, allowRemoval int) error {
	d.learnConfig(cfg) // also when it is the same: a Secret file may have changed
	l := d.lock()
	sameConfig := l.cfg != nil && cfg.Fingerprint() == l.cfg.Fingerprint()
	rev := model.ConfigRevision{Time: now, Trigger: trigger, Sources: revs, Applied: true}
	// Stacks whose source is no longer configured are kept unless the
	// override covers every stack this reload removes, them included.
	orphans := l.orphansOf(cfg)
	_, _, removed := l.diff(cfg)
	confirm := allowRemoval > 0 && len(orphans) > 0 && allowRemoval >= len(removed)
	if !sameConfig || confirm {
		why, removes := l.guard(cfg, allowRemoval)
		l.reload.Removes = removes
		if why != "" {
			l.unlock()
			return fmt.Errorf("config not applied: %s", why)
		}
		if removes > 0 || confirm {
			rev.AllowedRemoval = allowRemoval
		}
		rev.Added, rev.Changed, rev.Removed = l.diff(cfg)
		if !confirm {
			rev.Removed = slices.DeleteFunc(rev.Removed, func(n string) bool { return slices.Contains(orphans, n) })
		}
		if err := l.applyConfirming(cfg, confirm); err != nil {
			l.unlock()
			return err
		}
		l.fullPass = true
		l.kick()
	}
	moved := l.markApplied(revs, now)
	// Recorded before the loop can act on the new config, so that the
	// history shows a revision before what it caused.
	if len(rev.Added)+len(rev.Changed)+len(rev.Removed) > 0 || len(moved) > 0 {
		l.lastRefused = nil
		l.putRevision(rev)
	}
	l.unlock()
	d.persistApplied(moved)
	if sameConfig && len(moved) == 0 {
		d.log.Debug("config reloaded: nothing changed", "trigger", trigger)
		return nil
	}
	d.log.Info("config applied", "trigger", trigger, "stacks", len(cfg.Stacks),
		"added", len(rev.Added), "changed", len(rev.Changed), "removed", len(rev.Removed))
	return nil
}

// refused records a revision that was not applied, unless it repeats the
// last one refused (a broken commit is seen again on every poll).
func (d *Daemon) refused(revs []model.RevisionSource, trigger string, now time.Time, err error) {
	l := d.lock()
	l.attribute(err)
	last := l.lastRefused
	l.unlock()
	rev := model.ConfigRevision{Time: now, Trigger: trigger, Sources: revs, Error: err.Error()}
	if last != nil && last.Error == rev.Error && slices.Equal(last.Sources, rev.Sources) {
		return
	}
	d.putRevision(rev)
	l = d.lock()
	l.lastRefused = &rev
	l.unlock()
}

func (d *Daemon) putRevision(rev model.ConfigRevision) {
	if !d.leads() {
		return // the cluster's leader records it
	}
	if _, err := d.opts.Store.PutRevision(rev); err != nil {
		d.log.Error("cannot record a config revision", "err", err)
	}
}

// operations names the operations in flight: "<stack> (<update>)".
func (d locked) operations() []string {
	var out []string
	for _, name := range slices.Sorted(maps.Keys(d.stacks)) {
		st := d.stacks[name]
		if !st.act.Running() {
			continue
		}
		op := name
		if cu := st.rec.Status.CurrentUpdate; cu != nil && cu.Name != "" {
			op += " (" + cu.Name + ")"
		}
		out = append(out, op)
	}
	return out
}

// orphansOf names the stacks cfg lacks whose config source is no
// longer configured: those kept, orphaned, until confirmed.
func (d locked) orphansOf(cfg *spec.Config) []string {
	var out []string
	for _, name := range slices.Sorted(maps.Keys(d.stacks)) {
		st := d.stacks[name]
		if cfg.Stack(name) == nil && !st.rec.Removed && d.unconfigured(st) != "" {
			out = append(out, name)
		}
	}
	return out
}

// guard refuses a config that removes too many stacks, unless
// allowed: by --allow-mass-removal, or once for up to allowRemoval
// stacks. removes is how many stacks the guard stood against (0 when it
// let cfg pass on its own).
func (d locked) guard(cfg *spec.Config, allowRemoval int) (why string, removes int) {
	if d.opts.AllowMassRemoval {
		return "", 0
	}
	cur := d.current()
	if why = spec.MassRemoval(cur, cfg); why == "" {
		return "", 0
	}
	removes = spec.RemovedCount(cur, cfg)
	switch {
	case allowRemoval <= 0:
		return why, removes
	case removes > allowRemoval:
		return fmt.Sprintf("the new config removes %d stacks, more than the %d allowed", removes, allowRemoval), removes
	}
	return "", removes
}

// current is the config in force; before one was applied, the
// stacks the store holds stand for it, so that a first config that
// lacks most of them is refused too.
func (d locked) current() *spec.Config {
	if d.cfg != nil {
		return d.cfg
	}
	cur := &spec.Config{}
	for _, name := range slices.Sorted(maps.Keys(d.stacks)) {
		// A stack whose source is no longer configured is kept, not
		// removed: it does not count against the guard.
		if st := d.stacks[name]; !st.rec.Removed && d.unconfigured(st) == "" {
			cur.Stacks = append(cur.Stacks, &spec.Stack{Name: name})
		}
	}
	return cur
}

// diff names the stacks cfg adds, changes (spec or annotations)
// and removes, against the stacks the daemon has.
func (d locked) diff(cfg *spec.Config) (added, changed, removed []string) {
	in := map[string]bool{}
	for _, s := range cfg.Stacks {
		in[s.Name] = true
		st := d.stacks[s.Name]
		switch {
		case st == nil || st.rec.Removed:
			added = append(added, s.Name)
		case d.changed(st, s):
			changed = append(changed, s.Name)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(d.stacks)) {
		if !in[name] && !d.stacks[name].rec.Removed {
			removed = append(removed, name)
		}
	}
	slices.Sort(added)
	slices.Sort(changed)
	return added, changed, removed
}

// changed says whether s differs from stack st as the config in
// force has it. It compares with the config in force rather than with
// st's record: in a cluster another replica may already have written the
// new spec's hash into the record, and the leader would then see no
// change and record no revision. Before the first config, the record is
// all there is.
func (d locked) changed(st *stackState, s *spec.Stack) bool {
	if d.cfg != nil {
		if old := d.cfg.Stack(s.Name); old != nil {
			return old.SpecHash() != s.SpecHash() || !maps.Equal(old.Annotations, s.Annotations)
		}
	}
	return st.rec.SpecHash != s.SpecHash() || (st.stack != nil && !maps.Equal(st.stack.Annotations, s.Annotations))
}

// recordReload keeps the outcome of a reload in ConfigStatus and tells
// the observer; it returns err.
func (d *Daemon) recordReload(now time.Time, err error) error {
	if err != nil {
		d.log.Error("config not applied; the config in force stays", "err", err)
	}
	l := d.lock()
	l.reload.LastAttempt, l.reload.Successful, l.reload.Error = now, err == nil, ""
	if err != nil {
		l.reload.Error = err.Error()
	} else {
		l.reload.LastSuccess, l.reload.Removes = now, 0
	}
	l.unlock()
	d.opts.Observer.ConfigReloaded(d.ConfigStatus())
	return err
}

// ConfigStatus reports the last config load, each source's state and the
// config's health.
func (d *Daemon) ConfigStatus() model.ConfigStatus {
	l := d.lock()
	defer l.unlock()
	status := l.reload
	status.Paused = l.paused
	status.Orphaned = l.orphans()
	if status.Stopping = l.stopping; l.stopping {
		status.WaitingFor = l.operations()
	}
	for _, s := range l.sources {
		status.Sources = append(status.Sources, l.sourceStatus(s))
	}
	h := model.Health{Status: model.HealthHealthy, Message: "the config is applied and every source is healthy"}
	switch {
	case status.Error != "":
		h = model.Health{Status: model.HealthDegraded, Message: status.Error}
	case l.cfg == nil:
		h = model.Health{Status: model.HealthProgressing, Message: "waiting for a first config"}
	default:
		for _, ss := range status.Sources {
			if conditions.Worse(ss.Health.Status, h.Status) {
				h = model.Health{Status: ss.Health.Status, Message: ss.Source + ": " + ss.Health.Message}
			}
		}
	}
	status.Health = &h
	if r, ok := l.opts.Policies.(PolicyReporter); ok {
		ps := r.PolicyStatus()
		status.Policies = &ps
	}
	return scrub.ConfigStatus(status, l.red)
}

func (d locked) sourceStatus(s *sourceState) model.SourceStatus {
	ss := model.SourceStatus{Source: s.name, Git: s.Git, Commit: s.applied, LatestCommit: s.latest,
		LastPoll: s.lastPoll, AppliedAt: s.appliedAt, Error: s.configErr}
	if s.fetchErr != nil {
		ss.Error = strings.TrimSpace(s.fetchErr.Error() + "\n" + ss.Error)
	}
	for _, st := range d.stacks {
		if st.stack != nil && st.stack.Source == s.name {
			ss.Stacks++
		}
	}
	// The source's own health: whether its config is read and applied.
	// The stacks' health is theirs (a failing program is no config error).
	switch {
	case ss.Error != "":
		ss.Health = model.Health{Status: model.HealthDegraded, Message: model.ProblemSummary(ss.Error)}
	case d.cfg == nil || (s.Git != nil && s.applied == ""):
		ss.Health = model.Health{Status: model.HealthProgressing, Message: "waiting for a first config"}
	case s.Git != nil && s.latest != "" && s.latest != s.applied:
		ss.Health = model.Health{Status: model.HealthProgressing, Message: "applying commit " + model.ShortCommit(s.latest)}
	default:
		ss.Health = model.Health{Status: model.HealthHealthy, Message: "applied"}
	}
	return ss
}
