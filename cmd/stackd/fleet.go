package main

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/stackd/stackd/cluster"
	"github.com/stackd/stackd/daemon"
	"github.com/stackd/stackd/daemon/model"
	"github.com/stackd/stackd/daemon/notify"
	"github.com/stackd/stackd/daemon/spec"
	"github.com/stackd/stackd/fleet"
	"github.com/stackd/stackd/rollout"
	"github.com/stackd/stackd/web"
)

// fleetWiring is what StackSets take: the generators' Expander, made once
// the Fetcher exists, and the rollouts' Controller.
type fleetWiring struct {
	ex        *fleet.Expander
	rollouts  *rollout.Controller
	clustered bool
	log       *slog.Logger
	// stop ends run's goroutines, wg waits for them.
	stop context.CancelFunc
	wg   sync.WaitGroup
}

// newFleet makes the rollouts' Controller: maxUpdate slots in etcd in a
// cluster, in memory otherwise, and the abort records in the store.
func newFleet(st daemon.Store, own daemon.Ownership, notifier daemon.Notifier, log *slog.Logger) *fleetWiring {
	w := &fleetWiring{log: log.With("component", "fleet")}
	opts := rollout.Options{Meta: st, Logger: w.log, OnHalt: onHalt(notifier)}
	if c, ok := own.(*cluster.Cluster); ok {
		opts.Slots, w.clustered = c.Slots(), true
	}
	w.rollouts = rollout.New(opts)
	return w
}

// onHalt tells notifier that a set's rollout halted.
func onHalt(n daemon.Notifier) func(set string, failed []string) {
	return func(set string, failed []string) {
		if n == nil || len(failed) == 0 {
			return
		}
		n.Notify(notify.Event{Kind: notify.RolloutHalted, Stack: failed[0], Time: time.Now(),
			Message: fmt.Sprintf("the rollout of StackSet %s halted: %s failed on the new revision; it waits for a newer commit, stackd rollout resume %s or abort",
				set, strings.Join(failed, ", "), set)})
	}
}

// attach makes the Expander of opts and returns the daemon's options for
// sets.
func (w *fleetWiring) attach(opts fleet.Options) (spec.Expander, daemon.Rollouts) {
	opts.Logger = w.log
	w.ex = fleet.New(opts)
	return w.ex.Expand, w.rollouts
}

// offlineExpander evaluates the generators that read nothing (lists, and
// matrices and merges of them) for a config checked before the daemon
// runs: a git generator yields nothing then.
func offlineExpander(hosts spec.HostPaths) spec.Expander {
	return fleet.New(fleet.Options{Offline: true, HostPaths: hosts}).Expand
}

// run reloads the config whenever a git generator's revision moves, and
// every poll forgets what the generators kept of sets that are gone and,
// in a cluster, rereads the abort records, until close.
func (w *fleetWiring) run(d *daemon.Daemon, every time.Duration) {
	ctx, cancel := context.WithCancel(context.Background())
	w.stop = cancel
	w.wg.Add(2)
	go func() {
		defer w.wg.Done()
		w.ex.Watch(ctx, every, func() {
			if err := d.Reload(); err != nil {
				w.log.Warn("config not applied after a generator's repository moved", "err", err)
			}
		})
	}()
	go w.tidy(ctx, d, every)
}

// tidy is run's housekeeping, every period until ctx ends.
func (w *fleetWiring) tidy(ctx context.Context, d *daemon.Daemon, every time.Duration) {
	defer w.wg.Done()
	t := time.NewTicker(max(every, time.Second))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		sets, _ := d.StackSets()
		names := make([]string, len(sets))
		for i, set := range sets {
			names[i] = set.Name
		}
		if sets != nil {
			w.ex.Keep(names)
		}
		if w.clustered {
			if err := w.rollouts.Refresh(); err != nil {
				w.log.Warn("cannot read the rollouts' abort records", "err", err)
			}
		}
	}
}

// close ends what run started and waits for it.
func (w *fleetWiring) close() {
	if w != nil && w.stop != nil {
		w.stop()
		w.wg.Wait()
	}
}

// fleetAPI is web.StackSets over the daemon, the Expander and the
// rollouts.
type fleetAPI struct {
	w *fleetWiring
	d *daemon.Daemon
}

func (a fleetAPI) StackSets() []model.StackSetView {
	sets, members := a.d.StackSets()
	out := make([]model.StackSetView, 0, len(sets))
	for _, set := range sets {
		out = append(out, a.view(set, members[set.Name]))
	}
	slices.SortFunc(out, func(x, y model.StackSetView) int { return strings.Compare(x.Name, y.Name) })
	return out
}

func (a fleetAPI) StackSet(name string) (model.StackSetView, error) {
	set, members, err := a.set(name)
	if err != nil {
		return model.StackSetView{}, err
	}
	return a.view(set, members), nil
}

func (a fleetAPI) set(name string) (*spec.StackSet, []model.RolloutMember, error) {
	sets, members := a.d.StackSets()
	for _, set := range sets {
		if set.Name == name {
			return set, members[name], nil
		}
	}
	return nil, nil, fmt.Errorf("stack set %s: %w", name, model.ErrNotFound)
}

func (a fleetAPI) view(set *spec.StackSet, members []model.RolloutMember) model.StackSetView {
	v := model.StackSetView{Name: set.Name, Source: set.Source, Generators: a.w.ex.Status(set.Name), Stacks: []string{}}
	// A generator's error may quote what Git said: scrub it of every
	// secret the daemon knows, as every message it serves.
	for i := range v.Generators {
		g := &v.Generators[i]
		g.Repository, g.Error = a.d.Redactor().Clean(g.Repository), a.d.Redactor().Clean(g.Error)
	}
	for _, m := range members {
		v.Stacks = append(v.Stacks, m.Name)
	}
	slices.Sort(v.Stacks)
	if set.Spec.Strategy != nil {
		rs := a.w.rollouts.Plan(set, members)
		v.Rollout = &rs
	}
	return v
}

// ResumeRollout asks the stacks that halted the rollout to run again (a
// sync request each, so that their failure no longer halts it) and drops
// its abort records.
func (a fleetAPI) ResumeRollout(name string, by model.Principal) error {
	set, members, err := a.set(name)
	if err != nil {
		return err
	}
	failed := rollout.Failed(members)
	resumed, err := a.w.rollouts.Resume(set, members)
	if err != nil {
		return err
	}
	if len(failed) == 0 && !resumed {
		return fmt.Errorf("stack set %s: nothing halted or aborted: %w", name, web.ErrRolloutState)
	}
	for _, stack := range failed {
		if _, err := a.d.Sync(stack); err != nil {
			return fmt.Errorf("resume %s: sync %s: %w", name, stack, err)
		}
	}
	a.w.log.Info("rollout resumed", "set", name, "by", by.String(), "retried", failed)
	return nil
}

// AbortRollout records every stack of the set not yet on its target as
// aborted there: it stays at its applied commit until a newer revision.
func (a fleetAPI) AbortRollout(name string, by model.Principal) error {
	set, members, err := a.set(name)
	if err != nil {
		return err
	}
	if set.Spec.Strategy == nil {
		return fmt.Errorf("stack set %s has no rollout: %w", name, web.ErrRolloutState)
	}
	if err := a.w.rollouts.Abort(set, members); err != nil {
		return fmt.Errorf("abort %s: %w", name, err)
	}
	a.w.log.Info("rollout aborted", "set", name, "by", by.String())
	return nil
}

// fleetCollector exports the sets and their rollouts.
type fleetCollector struct{ api fleetAPI }

var (
	setStacksDesc = prometheus.NewDesc("stackd_stackset_stacks",
		"Stacks a StackSet generates.", []string{"set"}, nil)
	setGenFailDesc = prometheus.NewDesc("stackd_stackset_generator_failing",
		"1 when a generator of the StackSet failed at its last evaluation (the set keeps its last good output).", []string{"set"}, nil)
	rolloutStepDesc = prometheus.NewDesc("stackd_rollout_step",
		"The first step of a StackSet's rollout not complete (1-based); 0 when complete.", []string{"set"}, nil)
	rolloutStepsDesc = prometheus.NewDesc("stackd_rollout_steps",
		"The steps of a StackSet's rollout.", []string{"set"}, nil)
	rolloutWaitingDesc = prometheus.NewDesc("stackd_rollout_waiting_stacks",
		"Stacks of a StackSet that its rollout holds back.", []string{"set"}, nil)
	rolloutHaltedDesc = prometheus.NewDesc("stackd_rollout_halted",
		"1 when a StackSet's rollout is halted by a failure (or aborted), until a newer commit, a resume or an abort.", []string{"set"}, nil)
)

func (c fleetCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{setStacksDesc, setGenFailDesc, rolloutStepDesc, rolloutStepsDesc, rolloutWaitingDesc, rolloutHaltedDesc} {
		ch <- d
	}
}

func (c fleetCollector) Collect(ch chan<- prometheus.Metric) {
	gauge := func(d *prometheus.Desc, v float64, set string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, set)
	}
	for _, v := range c.api.StackSets() {
		gauge(setStacksDesc, float64(len(v.Stacks)), v.Name)
		gauge(setGenFailDesc, b2f(slices.ContainsFunc(v.Generators, func(g model.GeneratorStatus) bool { return g.Error != "" })), v.Name)
		rs := v.Rollout
		if rs == nil {
			continue
		}
		waiting := 0
		for _, st := range rs.Steps {
			for _, s := range st.Stacks {
				if s.State == model.MemberWaiting {
					waiting++
				}
			}
		}
		gauge(rolloutStepDesc, float64(rs.Step), v.Name)
		gauge(rolloutStepsDesc, float64(len(rs.Steps)), v.Name)
		gauge(rolloutWaitingDesc, float64(waiting), v.Name)
		gauge(rolloutHaltedDesc, b2f(rs.State == model.RolloutHalted || rs.State == model.RolloutAborted), v.Name)
	}
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
