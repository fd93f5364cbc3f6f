package daemon

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/stackd/stackd/daemon/activity"
	"github.com/stackd/stackd/daemon/decide"
	"github.com/stackd/stackd/daemon/gate"
	"github.com/stackd/stackd/daemon/livelog"
	"github.com/stackd/stackd/daemon/model"
	"github.com/stackd/stackd/daemon/resource"
	"github.com/stackd/stackd/daemon/sched"
	"github.com/stackd/stackd/daemon/scrub"
	"github.com/stackd/stackd/daemon/spec"
)

// Store keeps stack records, update history and logs; store implements
// it. What may carry a secret (scrub.Records) is cleaned on its way in
// and out.
type Store interface {
	scrub.Records
	storeRest
}

// storeRest is what Store holds besides scrub.Records.
type storeRest interface {
	DeleteStack(name string) error
	// Meta and PutMeta keep small values across restarts (the commits of
	// the Git config sources in force). Meta's error for a missing key
	// wraps ErrNotFound; any error reads as "no value".
	Meta(key string) ([]byte, error)
	PutMeta(key string, value []byte) error
	ResourceStore
	PreviewStore
}

// Defaults of Options.
const (
	DefaultMaxConcurrent = 2
	DefaultPollTimeout   = 30 * time.Second
	DefaultHandoverGrace = 30 * time.Second
)

// Options configure a Daemon. Store, Fetcher and Runner are required.
type Options struct {
	Store   Store
	Fetcher Fetcher
	Runner  Runner
	Logger  *slog.Logger
	// DataDir holds the stacks' checkouts and Program projects
	// (<DataDir>/stacks/<name>).
	DataDir string
	// Refs says where Secret, ConfigMap and Env references are read.
	Refs spec.RefSources
	// HostPaths says which paths of the host a stack may name as a file
	// backend or a local repository: every config is validated with it,
	// and each stack checked again, its references read, before it runs.
	HostPaths spec.HostPaths
	// MaxConcurrent bounds the operations running at once
	// (DefaultMaxConcurrent).
	MaxConcurrent int
	// MinResync is the floor of every stack's resync and branch-poll
	// period (DefaultResync, PKO's floor). Tests lower it.
	MinResync time.Duration
	// MaxFailures is how many consecutive failures stall a stack
	// (DefaultMaxFailures).
	MaxFailures int64
	// BackoffBase is the first retry delay after a failure; the n-th waits
	// BackoffBase·3^n (10s, PKO's).
	BackoffBase time.Duration
	// OpTimeout bounds one operation; zero leaves it to the runner.
	OpTimeout time.Duration
	// PollTimeout bounds one branch resolution (DefaultPollTimeout).
	PollTimeout time.Duration
	// Sources are where the config is read (the --config values). With
	// New's cfg nil, Start reads them; Reload reads them again.
	Sources []spec.Source
	// SourceAuth are the credentials of the Git sources; nil is anonymous.
	SourceAuth *model.GitAuth
	// SourcePoll is how often Git sources are polled (DefaultSourcePoll).
	SourcePoll time.Duration
	// WatchConfig reloads the config when its local files change.
	WatchConfig bool
	// AllowMassRemoval lets a reload remove all stacks or more than half
	// of them; by default such a config is refused.
	AllowMassRemoval bool
	// DriftInterval checks every stack for drift this often, unless its
	// spec says otherwise; zero turns checks off by default.
	DriftInterval time.Duration
	// Notifier hears about drift, failures, stalls and recoveries; nil
	// tells nobody.
	Notifier Notifier
	// Expand evaluates StackSets' generators (fleet.Expander.Expand); nil
	// generates no stack. Rollouts orders their stacks' updates; nil
	// updates them all at once.
	Expand   spec.Expander
	Rollouts Rollouts
	// Observer is told about updates, polls and reloads, for metrics;
	// nil tells nobody.
	Observer Observer
	// Policies judge every preview made before an up; nil: no policies.
	Policies gate.Policies
	// Approval is the approval of stacks whose spec sets none (--approval);
	// nil: none.
	Approval *spec.Approval
	// Ownership shares the stacks with other replicas (cluster mode); nil
	// holds every stack.
	Ownership Ownership
	// Node names this replica in update records (cluster mode).
	Node string
	// Redactor scrubs every secret the daemon knows from what it stores,
	// serves and tells, whichever stack it belongs to; the caller seeds it
	// with the daemon's own secrets (tokens, webhook URLs, passphrases) and
	// shares it with the log handler and the runner. The daemon adds the
	// secrets of each config it applies, and SourceAuth's. Nil: a
	// Redactor of the daemon's own.
	Redactor *scrub.Redactor
	// HandoverGrace is how long a new holder waits before breaking a
	// Pulumi lock that a holder which died or froze during an update may
	// have left (DefaultHandoverGrace). It must exceed the runner's
	// heartbeat bound, by which that holder's processes are dead.
	HandoverGrace time.Duration

	// pollEvery replaces every stack's poll period; unit tests use it to
	// poll faster than resyncFrequencySeconds can say.
	pollEvery time.Duration
}

func (o Options) withDefaults() Options {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.MaxConcurrent <= 0 {
		o.MaxConcurrent = DefaultMaxConcurrent
	}
	if o.MinResync <= 0 {
		o.MinResync = decide.DefaultResync
	}
	if o.MaxFailures <= 0 {
		o.MaxFailures = decide.DefaultMaxFailures
	}
	if o.BackoffBase <= 0 {
		o.BackoffBase = decide.BaseBackoff
	}
	if o.PollTimeout <= 0 {
		o.PollTimeout = DefaultPollTimeout
	}
	if o.SourcePoll <= 0 {
		o.SourcePoll = DefaultSourcePoll
	}
	if o.Observer == nil {
		o.Observer = nopObserver{}
	}
	if o.Notifier == nil {
		o.Notifier = nopNotifier{}
	}
	if o.HandoverGrace <= 0 {
		o.HandoverGrace = DefaultHandoverGrace
	}
	return o
}

// Daemon reconciles the stacks of a config: it polls their sources,
// decides with PKO's table when to run, runs one operation per stack at a
// time within a global limit, and records every step in the store.
type Daemon struct {
	opts Options
	log  *slog.Logger
	// resources caches the stacks' resources (resource.Cache).
	resources *resource.Cache
	// red scrubs every secret the daemon knows (Options.Redactor).
	red *scrub.Redactor
	// own says which stacks this replica acts on; clustered is set when
	// Options gave one.
	own       Ownership
	clustered bool

	mu  sync.Mutex
	cfg *spec.Config // nil until a first config is applied
	// repoPolls are the polling rounds of the stacks' repositories, by
	// spec.RepoKey.
	repoPolls map[string]*sched.Round
	// versions numbers the changes of the stacks' views.
	versions uint64
	// order is the evaluation order, nil when stacks or specs changed;
	// fullPass asks the next pass to evaluate every stack (a new config,
	// Resume), as does a minute without one (lastFull).
	order    []string
	fullPass bool
	lastFull time.Time
	// queue says which stacks a pass evaluates; waves which keep later
	// sync waves waiting; waiters want to run and cannot yet.
	queue   sched.Queue[string]
	waves   sched.Waves[string]
	waiters map[string]bool
	// setMembers caches StackSets' members for one pass (members).
	setMembers map[string][]model.RolloutMember
	// sources are the config sources, in Options.Sources order.
	sources []*sourceState
	reload  model.ConfigStatus
	// lastRefused is the last revision refused, so that a broken commit
	// seen again is not recorded again.
	lastRefused *model.ConfigRevision
	stacks      map[string]*stackState
	// running counts operations in flight, for MaxConcurrent, work of
	// AcquireSlot included; starved are the stacks that wait for a
	// worker, and slotFreed is closed when AcquireSlot may look again.
	running   int
	starved   map[string]bool
	slotFreed chan struct{}
	started   bool
	// paused stops operations from starting (Pause); polls go on.
	paused bool
	// stopping is set once Stop began (ConfigStatus says so).
	stopping bool

	wake chan struct{}
	// srcWake makes the Git sources poll now (a push webhook).
	srcWake chan struct{}
	// reloadMu makes reloads run one at a time.
	reloadMu sync.Mutex
	stop     context.CancelFunc
	opCtx    context.Context // cancelled when a drain times out
	opStop   context.CancelFunc
	loopWG   sync.WaitGroup
	workWG   sync.WaitGroup
	loopCtx  context.Context
}

// locked is the daemon while its lock (mu) is held. What mu guards (the
// fields of Daemon after it, and every stack's stackState) is read and
// changed by methods of locked, which only lock makes: a caller without
// the lock cannot call them. A locked is not used after unlock, nor by a
// goroutine started under it, which takes the lock anew (TestLockRule).
type locked struct{ *Daemon }

// lock takes d.mu.
func (d *Daemon) lock() locked {
	d.mu.Lock()
	return locked{d}
}

// unlock releases d.mu.
func (d locked) unlock() { d.mu.Unlock() }

// move applies e to st's activity. A refused event is a fault of the
// loop's: it is logged, and the stack keeps its phase.
func (d locked) move(st *stackState, e activity.Event) bool {
	if err := st.act.Do(e); err != nil {
		d.log.Error("the stack's activity refused a transition", "stack", st.rec.Name, "err", err)
		return false
	}
	return true
}

// stackState is the daemon's in-memory view of one stack. Guarded by
// Daemon.mu: read and changed by methods of locked.
type stackState struct {
	stack *spec.Stack // nil once the stack left the config
	rec   model.StackRecord
	// gone and goneCfg are the spec and the config a stack had when it
	// left the config: a stack never deployed is checked out from them
	// for its destroy (kept in memory only).
	gone    *spec.Stack
	goneCfg *spec.Config
	// act is what the stack is doing (activity.State); the loop moves it.
	act activity.State

	// commit is the source's current commit (a resolved branch, a pinned
	// commit or a Program's revision); empty until known.
	commit    string
	sourceErr error
	// pollNow asks for a poll before the next round of the stack's
	// repository (a push, a sync, a new source); round is the last round
	// of that repository the stack polled in. Not a phase: a request
	// comes in any phase, for the next poll.
	pollNow bool
	round   int
	// version grows with every change of the stack's view (touch).
	version uint64
	// cancel and live are the running operation's; live is its log.
	cancel context.CancelFunc
	live   *livelog.Log
	// commitSeen is when commit was first seen, for the commit-to-applied
	// latency.
	commitSeen time.Time
	// remediate is the reason of the next up when it repairs drift (it
	// refreshes first): a remediation after a check, or a sync of a
	// drifted stack.
	remediate string
	// changesPaths is the last commit seen to change files of the
	// stack's paths, which closed change windows then hold back without
	// checking it out again (kept in memory only).
	changesPaths string
	// refusedPlan says why the last approved plan was not applied (it no
	// longer held), for the plan that asks again.
	refusedPlan string
	// breakLockAt is set when this replica took the stack from a holder
	// that died during an update: its Pulumi lock may be left, and is
	// broken by the next operation, which waits until then.
	breakLockAt time.Time
	// rollout is the set whose rollout admitted the running operation.
	rollout *spec.StackSet
	// requested is the last sync request passed to the stack's holder.
	requested string
	// held and releasing are its ownership in cluster mode, which follows
	// the cluster's events in any phase: held from taking the stack over
	// (gained) until losing or releasing it; releasing once another
	// replica should hold it, which it gets once no operation runs.
	held, releasing bool
	// scrubbed is the redactor's version the status was last cleaned at.
	scrubbed uint64
}

// New makes a daemon for cfg; with cfg nil, Start reads Options.Sources.
// Start begins the work.
func New(cfg *spec.Config, opts Options) (*Daemon, error) {
	if opts.Store == nil || opts.Fetcher == nil || opts.Runner == nil {
		return nil, errors.New("daemon: Store, Fetcher and Runner are required")
	}
	if cfg == nil && len(opts.Sources) == 0 {
		return nil, errors.New("daemon: a config or Sources is required")
	}
	opts = opts.withDefaults()
	if opts.Redactor == nil {
		opts.Redactor = scrub.NewRedactor()
	}
	if opts.SourceAuth != nil {
		opts.Redactor.Add(opts.SourceAuth.Secrets()...)
	}
	opts.Logger = scrub.Logger(opts.Logger, opts.Redactor)
	opts.Store = scrubStore{scrub.Store{Records: opts.Store, R: opts.Redactor}, opts.Store}
	opts.Notifier = scrubNotifier{Notifier: opts.Notifier, r: opts.Redactor}
	d := &Daemon{
		opts:      opts,
		log:       opts.Logger,
		red:       opts.Redactor,
		own:       opts.Ownership,
		clustered: opts.Ownership != nil,
		resources: &resource.Cache{Off: opts.Ownership != nil},
		cfg:       cfg,
		sources:   newSourceStates(opts.Sources),
		stacks:    map[string]*stackState{}, repoPolls: map[string]*sched.Round{}, waiters: map[string]bool{}, setMembers: map[string][]model.RolloutMember{},
		starved: map[string]bool{}, slotFreed: make(chan struct{}),
		wake:    make(chan struct{}, 1),
		srcWake: make(chan struct{}, 1),
	}
	if d.own == nil {
		d.own = allStacks{}
	}
	if cfg != nil {
		now := time.Now()
		d.reload = model.ConfigStatus{Successful: true, LastSuccess: now, LastAttempt: now}
	}
	return d, nil
}

// Start loads the records, turns updates left running by a previous
// process into aborted ones, applies the config and starts reconciling.
func (d *Daemon) Start(ctx context.Context) error {
	if !d.clustered {
		// In a cluster, a stack's new holder does this (see gained).
		if err := d.recover(); err != nil {
			return err
		}
	}
	recs, err := d.opts.Store.Stacks()
	if err != nil {
		return fmt.Errorf("daemon: read stacks: %w", err)
	}
	if d.cfg != nil {
		d.learnConfig(d.cfg)
	}
	l := d.lock()
	for _, rec := range recs {
		st := &stackState{rec: rec}
		if rec.Status.CurrentUpdate != nil && !l.clustered {
			st.rec.Status.CurrentUpdate = nil // marked aborted by recover
			l.putStack(st)
		}
		l.stacks[rec.Name] = st
	}
	if l.cfg != nil {
		err = l.apply(l.cfg)
	}
	l.unlock()
	if err != nil {
		return err
	}
	if err := d.loadFirst(ctx); err != nil {
		return err
	}
	l = d.lock()
	l.started = true
	l.unlock()
	d.loopCtx, d.stop = context.WithCancel(context.WithoutCancel(ctx))
	d.opCtx, d.opStop = context.WithCancel(context.WithoutCancel(ctx))
	d.loopWG.Add(1)
	go d.loop()
	if d.clustered {
		d.loopWG.Add(1)
		go d.followOwnership(d.loopCtx)
	}
	if d.hasGitSources() {
		d.loopWG.Add(1)
		go d.watchSources(d.loopCtx)
	}
	if d.opts.WatchConfig {
		if err := d.watchConfig(d.loopCtx); err != nil {
			d.log.Warn("config changes will not be seen; reload with SIGHUP or the API", "err", err)
		}
	}
	return nil
}

// loadFirst reads the sources when New was given no config. Git sources
// start from the commits in force when the daemon last ran; their new
// commits are fetched by watchSources. A config that cannot be applied
// is an error when every source is local (the operator is at hand);
// with Git sources the daemon starts without a config, touches no stack,
// and applies the first valid commit.
func (d *Daemon) loadFirst(ctx context.Context) error {
	if d.cfg != nil {
		return nil
	}
	d.restoreSources(ctx)
	d.fetchUnapplied(ctx)
	err := d.reloadConfig("start", 0)
	if err != nil && !d.hasGitSources() {
		return err
	}
	return nil
}

// recover marks updates that a dead process left running as aborted.
func (d *Daemon) recover() error {
	running, err := d.opts.Store.RunningUpdates()
	if err != nil {
		return fmt.Errorf("daemon: read running updates: %w", err)
	}
	for _, u := range running {
		u.State, u.EndTime = model.UpdateAborted, time.Now()
		u.Message = "stackd stopped while the update was running"
		if err := d.opts.Store.PutUpdate(u); err != nil {
			return fmt.Errorf("daemon: mark update %s aborted: %w", u.ID, err)
		}
		d.log.Warn("update was left running by a previous process; marked aborted", "stack", u.Stack, "update", u.ID)
	}
	return nil
}

// Apply replaces the config in force. cfg must be valid (Load without
// errors). Stacks that left it are kept until their removal is done.
func (d *Daemon) Apply(cfg *spec.Config) error {
	d.learnConfig(cfg)
	l := d.lock()
	defer l.unlock()
	if err := l.apply(cfg); err != nil {
		return err
	}
	l.fullPass = true
	l.kick()
	return nil
}

func (d locked) apply(cfg *spec.Config) error {
	return d.applyConfirming(cfg, false)
}

// applyConfirming is apply; a stack that left the config
// because its source is no longer configured is kept, orphaned, unless
// confirm (the operator's override) removes it as any other.
func (d locked) applyConfirming(cfg *spec.Config, confirm bool) error {
	prev := d.cfg
	d.cfg = cfg
	inConfig := map[string]bool{}
	for _, s := range cfg.Stacks {
		inConfig[s.Name] = true
		st := d.stacks[s.Name]
		if st == nil {
			st = &stackState{rec: model.StackRecord{Name: s.Name}}
			d.stacks[s.Name] = st
		}
		if err := d.observeSpec(st, s); err != nil {
			return err
		}
	}
	for name, st := range d.stacks {
		if inConfig[name] || st.rec.Removed {
			continue
		}
		if st.stack != nil {
			st.gone, st.goneCfg = st.stack, prev
		}
		st.stack = nil
		st.pollNow = true
		d.touch(st)
		if !d.acts(st) {
			continue // its holder records the removal
		}
		if src := d.unconfigured(st); src != "" && !confirm {
			if st.rec.Orphaned == "" {
				st.rec.Orphaned = orphanMessage(src)
				d.putStack(st)
				d.log.Warn("the stack's config source is no longer configured: the stack is kept until its removal is confirmed",
					"stack", name, "source", src)
			}
			continue
		}
		st.rec.Removed, st.rec.Orphaned = true, ""
		if err := d.opts.Store.PutStack(st.rec); err != nil {
			return fmt.Errorf("daemon: record removal of %s: %w", name, err)
		}
		d.log.Info("stack left the config", "stack", name)
	}
	d.declareStacks()
	return nil
}

// unconfigured is the config source of st when that source is no
// longer among the daemon's; empty when it is, or is not known (a record
// of an older stackd, a config given without sources).
func (d locked) unconfigured(st *stackState) string {
	src := st.rec.Source
	if st.stack != nil {
		src = st.stack.Source
	}
	if src == "" || len(d.sources) == 0 {
		return ""
	}
	for _, s := range d.sources {
		if s.name == src {
			return ""
		}
	}
	return src
}

// orphanMessage is the status of a stack kept since its source left.
func orphanMessage(src string) string {
	return fmt.Sprintf("source %s is no longer configured; kept until confirmed (stackd reload --allow-removal N, N counting this stack)", src)
}

// orphans names the stacks kept since their source left.
func (d locked) orphans() (out []string) {
	for name, st := range d.stacks {
		if st.rec.Orphaned != "" {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// declareStacks tells the ownership layer which stacks there are.
func (d locked) declareStacks() {
	d.own.SetStacks(slices.Collect(maps.Keys(d.stacks)))
}

// observeSpec takes s as st's spec, growing the generation when the
// spec's hash changed.
func (d locked) observeSpec(st *stackState, s *spec.Stack) error {
	changedSource := st.stack == nil || sourceOf(st.stack) != sourceOf(s)
	st.stack, d.order = s, nil
	d.touch(st)
	if !d.acts(st) {
		return nil // its holder counts the generations
	}
	hash := s.SpecHash()
	if st.rec.SpecHash == hash && !st.rec.Removed && st.rec.Source == s.Source && st.rec.Orphaned == "" {
		return nil
	}
	if st.rec.SpecHash != hash {
		st.rec.Generation++
		st.rec.SpecHash = hash
	}
	st.rec.Removed, st.rec.Source, st.rec.Orphaned = false, s.Source, ""
	st.act.Unblock()
	if changedSource {
		st.commit, st.sourceErr, st.pollNow = "", nil, true
	}
	if err := d.opts.Store.PutStack(st.rec); err != nil {
		return fmt.Errorf("daemon: record spec of %s: %w", s.Name, err)
	}
	return nil
}

// sourceOf identifies where a stack's program comes from.
func sourceOf(s *spec.Stack) string {
	if s.Spec.ProgramRef != nil {
		return "program:" + s.Spec.ProgramRef.Name
	}
	return s.Spec.ProjectRepo + "#" + s.Spec.Branch + "@" + s.Spec.Commit
}

// Stopping marks the daemon as stopping before Stop is called: from then
// on ConfigStatus says so and lists the running operations that the stop
// will wait for. The process calls it when its stop begins, before
// whatever it stops first, so that no moment reports a stopping process
// waiting for nothing.
func (d *Daemon) Stopping() {
	l := d.lock()
	l.stopping = true
	l.unlock()
}

// Stop stops scheduling, lets running operations finish until ctx ends,
// then interrupts them and waits for them to record their outcome.
func (d *Daemon) Stop(ctx context.Context) error {
	if d.stop == nil {
		return nil
	}
	d.Stopping()
	d.stop()
	d.loopWG.Wait()
	done := make(chan struct{})
	go func() { d.workWG.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
	}
	d.log.Warn("drain deadline reached; interrupting running operations")
	d.opStop()
	<-done
	return nil
}

// kick wakes the loop, with or without the lock.
func (d *Daemon) kick() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// loop evaluates every stack whenever something happened or a stack's
// next check is due.
func (d *Daemon) loop() {
	defer d.loopWG.Done()
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-d.loopCtx.Done():
			return
		case <-d.wake:
		case <-timer.C:
		}
		next := d.evaluate(time.Now())
		timer.Reset(next)
	}
}

// evaluate starts what can start and returns how long until the next
// time-driven check. It evaluates only the stacks an event marked dirty
// and those whose time came (a poll round, a backoff, a drift check);
// the others keep what their last evaluation said, sync wave included.
// Every stack is evaluated on a new config, on Resume, and once a
// minute.
func (d *Daemon) evaluate(now time.Time) time.Duration {
	l := d.lock()
	defer l.unlock()
	if t := time.Now(); t.After(now) {
		now = t // not before what happened while it waited for the lock
	}
	next := time.Minute
	if l.cfg == nil {
		return next // no config yet: no stack may be judged removed
	}
	full := l.fullPass || now.Sub(l.lastFull) >= time.Minute
	if full {
		l.fullPass, l.lastFull = false, now
	}
	names := l.queue.Take(now)
	clear(l.setMembers)
	if full {
		names = l.evalOrder()
	} else {
		slices.SortFunc(names, l.orderOf)
	}
	for _, name := range names {
		st := l.stacks[name]
		if st == nil {
			l.forget(name) // finalized meanwhile
			continue
		}
		var pass passState
		wait := l.evaluateStack(st, now, &pass)
		if l.stacks[name] != st {
			continue // finalized by its evaluation
		}
		l.queue.Clean(name)
		var due time.Time // none: only an event concerns it
		if wait > 0 {
			due = now.Add(wait)
		}
		l.queue.SetDue(name, due)
		busy := pass.marked && st.stack != nil // a stack that left the config holds no wave
		if src, w := sourceAndWave(st); l.waves.Set(name, src, w, busy) && !busy {
			l.wakeWaiting() // a later sync wave may go now
		}
		if st.act.Waiting() {
			l.waiters[name] = true
		} else {
			delete(l.waiters, name)
		}
	}
	l.freeSlot()
	if l.queue.Dirty() { // marked by another stack's evaluation
		return 10 * time.Millisecond
	}
	if wait, ok := l.queue.Next(now); ok {
		next = min(next, wait)
	}
	return max(next, 10*time.Millisecond)
}

// forget drops a stack that left the daemon.
func (d locked) forget(name string) {
	delete(d.stacks, name)
	delete(d.waiters, name)
	delete(d.starved, name)
	d.queue.Forget(name)
	d.waves.Set(name, "", 0, false)
	d.order = nil
}

// markDirty asks for st's evaluation at the next pass.
func (d locked) markDirty(st *stackState) {
	d.queue.MarkDirty(st.rec.Name)
	d.kick()
}

// evalOrder lists stack names by sync wave, then name; it is kept
// until stacks or specs change (d.order = nil).
func (d locked) evalOrder() []string {
	if d.order != nil && len(d.order) == len(d.stacks) {
		return d.order
	}
	names := slices.Collect(maps.Keys(d.stacks))
	slices.SortFunc(names, d.orderOf)
	d.order = names
	return names
}

// orderOf orders stacks by sync wave, then name.
func (d locked) orderOf(a, b string) int {
	_, wa := sourceAndWave(d.stacks[a])
	_, wb := sourceAndWave(d.stacks[b])
	return cmp.Or(cmp.Compare(wa, wb), cmp.Compare(a, b))
}

// sourceAndWave are st's config source and sync wave; none once it left
// the config.
func sourceAndWave(st *stackState) (string, int) {
	if st == nil || st.stack == nil {
		return "", 0
	}
	return st.stack.Source, st.stack.SyncWave
}

// stackDir is where a stack's checkout and program project live.
func (d *Daemon) stackDir(name string) string {
	return filepath.Join(d.opts.DataDir, "stacks", name)
}

// removeStackDir deletes a finalized stack's checkout; the runner's state
// (its config file and encryption salt) is kept.
func (d *Daemon) removeStackDir(name string) {
	if err := os.RemoveAll(d.stackDir(name)); err != nil {
		d.log.Warn("could not remove the work dir of a removed stack", "stack", name, "err", err)
	}
}
