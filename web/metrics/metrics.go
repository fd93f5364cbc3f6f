// Package metrics is stackd's Prometheus metrics: the counters the daemon
// and the previews observe, and the gauges read from the daemon's State at
// scrape time, with a cache of the scrape's response. It knows no server:
// package web serves the registry at GET /metrics.
package metrics

import (
	"maps"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/stackd/stackd/daemon"
	"github.com/stackd/stackd/daemon/access"
	"github.com/stackd/stackd/daemon/model"
	"github.com/stackd/stackd/daemon/review"
	"github.com/stackd/stackd/daemon/spec"
)

// Metrics are stackd's Prometheus metrics. It is the daemon's
// daemon.Observer, counting updates and polls as they happen, and the
// previews' review.Observer, counting previews of pull requests; the
// gauges of each stack, the scheduler and the config are read from the
// daemon's State at scrape time, so a stack that leaves the daemon
// leaves them too.
// Label values are stack names, config sources (--config values, free of
// credentials) and bounded enumerations (update types, states, healths,
// preview results), never commits, pull requests or error text.
type Metrics struct {
	api atomic.Pointer[apiRef]
	// prs lists the pull requests (SetPullRequests); nil without previews.
	prs atomic.Pointer[func() []review.PullRequest]
	// events counts what the observer was told: a change of a counter.
	events atomic.Uint64
	// stacks are each stack's gauges as last made: a scrape makes again
	// only those of the stacks whose version changed.
	stacksMu sync.Mutex
	stacks   map[string]*stackMetrics

	updates          *prometheus.CounterVec
	updateDuration   *prometheus.HistogramVec
	polls            *prometheus.CounterVec
	pollDuration     prometheus.Histogram
	remoteCalls      *prometheus.CounterVec
	commitApplied    prometheus.Histogram
	driftChecks      *prometheus.CounterVec
	previews         *prometheus.CounterVec
	reviewStackOps   *prometheus.CounterVec
	previewTook      prometheus.Histogram
	audit            *prometheus.CounterVec
	auditDropped     prometheus.Counter
	policyViolations *prometheus.CounterVec
	exportFailures   prometheus.Counter
}

// State is what a scrape reads of the daemon (web.API and
// *daemon.Daemon have it). Every method returns copies: no lock is kept
// while the metrics are made.
type State interface {
	// StackVersions lists every stack's version, by name: a stack's view
	// is read again (Stack) only when its version or holder changed.
	StackVersions() []model.StackVersion
	Stack(name string) (model.StackView, error)
	Stats() model.Stats
	ConfigStatus() model.ConfigStatus
	// ClusterStatus is the cluster as this replica sees it; ok is false
	// for a single node.
	ClusterStatus() (status model.ClusterStatus, ok bool)
}

// apiRef boxes a State for atomic.Pointer.
type apiRef struct{ State }

var (
	_ daemon.Observer = (*Metrics)(nil)
	_ review.Observer = (*Metrics)(nil)
)

// Label values of stackd_git_polls_total.
const (
	pollSuccess = "success"
	pollError   = "error"
)

// updateTypes and updateResults are the label values the counters start
// at zero with, so rates are defined before the first update.
var (
	updateTypes   = []string{model.UpdateUp, model.UpdatePreview, model.UpdateRefresh, model.UpdateDestroy, model.UpdateDrift}
	updateResults = []string{model.UpdateSucceeded, model.UpdateFailed, model.UpdateAborted}
	// previewResults are the results of a finished preview.
	previewResults = []string{review.Succeeded, review.Failed, review.Cancelled}
)

// updateBuckets are the buckets of the durations of updates and
// previews, in seconds.
var updateBuckets = []float64{1, 5, 10, 30, 60, 120, 300, 600, 1200, 1800, 3600}

// New registers stackd's metrics, the Go runtime's and the
// process's on reg (it panics if reg holds any of them already). api may
// be nil when the Metrics must exist before the daemon, as its Observer:
// SetAPI supplies it later, and until then a scrape has no stack gauges.
func New(reg *prometheus.Registry, api State, version string) *Metrics {
	m := &Metrics{
		updates: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "stackd_updates_total",
			Help: "Finished updates, by type (up, preview, refresh, destroy, drift) and result (succeeded, failed, aborted).",
		}, []string{"type", "result"}),
		updateDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "stackd_update_duration_seconds",
			Help:    "Duration of finished updates, by type.",
			Buckets: updateBuckets,
		}, []string{"type"}),
		polls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "stackd_git_polls_total",
			Help: "Branch resolutions against git remotes, by result (success, error).",
		}, []string{"result"}),
		pollDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "stackd_git_poll_duration_seconds",
			Help:    "Duration of branch resolutions against git remotes.",
			Buckets: []float64{0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30},
		}),
		remoteCalls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "stackd_git_remote_calls_total",
			Help: "Calls to git remotes, by operation (ls-remote, fetch): stacks that share a repository share its ls-remote.",
		}, []string{"op"}),
		driftChecks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "stackd_drift_checks_total",
			Help: "Drift checks, by result (InSync, Drifted, CheckFailed).",
		}, []string{"result"}),
		commitApplied: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "stackd_commit_seen_to_applied_seconds",
			Help:    "Time from stackd first seeing a new commit (a poll or a push webhook) to its update succeeding; not from the commit's own time.",
			Buckets: []float64{5, 15, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200},
		}),
		previews: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "stackd_previews_total",
			Help: "Finished previews of pull requests, by result (succeeded, failed, cancelled).",
		}, []string{"result"}),
		reviewStackOps: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "stackd_review_stack_operations_total",
			Help: "Finished operations on review stacks of pull requests, by operation (create, update, destroy) and result (succeeded, failed).",
		}, []string{"op", "result"}),
		previewTook: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "stackd_preview_duration_seconds",
			Help:    "Duration of finished previews of pull requests.",
			Buckets: updateBuckets,
		}),
		audit: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "stackd_audit_total",
			Help: "Requests recorded in the audit trail, by action (read, sync, pause, reload, approve, cancel, override, admin, sign-in, sign-out) and outcome (allowed, failed, denied, unauthenticated).",
		}, []string{"action", "outcome"}),
		policyViolations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "stackd_policy_violations_total",
			Help: "Policy messages on previews, by stack, policy and level (deny, warn); a policy that could not be evaluated counts as a deny of policy \"evaluation\".",
		}, []string{"stack", "policy", "level"}),
		exportFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "stackd_resource_export_failures_total",
			Help: "Operations after which the stack's resources could not be exported from its state: they show an older state until the next export (the log names the stack).",
		}),
		auditDropped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "stackd_audit_dropped_total",
			Help: "Unauthenticated refusals not written to the audit trail because they came faster than one a second after a burst of 60.",
		}),
	}
	for _, typ := range updateTypes {
		for _, res := range updateResults {
			m.updates.WithLabelValues(typ, res)
		}
		m.updateDuration.WithLabelValues(typ)
	}
	m.polls.WithLabelValues(pollSuccess)
	m.polls.WithLabelValues(pollError)
	for _, op := range []string{"ls-remote", "fetch"} {
		m.remoteCalls.WithLabelValues(op)
	}
	for _, res := range []string{spec.DriftInSync, spec.DriftDrifted, spec.DriftCheckFailed} {
		m.driftChecks.WithLabelValues(res)
	}
	for _, res := range previewResults {
		m.previews.WithLabelValues(res)
	}
	for _, op := range []review.Op{review.Create, review.Update, review.Destroy} {
		for _, res := range []string{review.Succeeded, review.Failed} {
			m.reviewStackOps.WithLabelValues(string(op), res)
		}
	}
	for _, action := range auditActions {
		for _, outcome := range auditOutcomes {
			m.audit.WithLabelValues(action, outcome)
		}
	}
	m.SetAPI(api)
	reg.MustRegister(buildInfo(version), m.updates, m.updateDuration, m.polls, m.pollDuration, m.remoteCalls, m.commitApplied, m.driftChecks,
		m.previews, m.reviewStackOps, m.previewTook, m.audit, m.auditDropped, m.policyViolations, m.exportFailures,
		stateCollector{m: m}, prCollector{m: m},
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// SetAPI sets the daemon whose state a scrape reports.
func (m *Metrics) SetAPI(api State) {
	if api == nil {
		m.api.Store(nil)
		return
	}
	m.api.Store(&apiRef{api})
}

func buildInfo(version string) prometheus.Gauge {
	if version == "" {
		version = "unknown"
	}
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "stackd_build_info",
		Help:        "Always 1; the labels name stackd's version and the Go version it was built with.",
		ConstLabels: prometheus.Labels{"version": version, "goversion": runtime.Version()},
	})
	g.Set(1)
	return g
}

// UpdateFinished counts a finished update and observes its duration.
func (m *Metrics) UpdateFinished(u model.Update) {
	m.events.Add(1)
	result := u.State
	if result == "" {
		result = "unknown"
	}
	m.updates.WithLabelValues(u.Type, result).Inc()
	if !u.StartTime.IsZero() && !u.EndTime.IsZero() && !u.EndTime.Before(u.StartTime) {
		m.updateDuration.WithLabelValues(u.Type).Observe(u.EndTime.Sub(u.StartTime).Seconds())
	}
}

// Polled counts a branch resolution and observes its duration.
func (m *Metrics) Polled(err error, took time.Duration) {
	m.events.Add(1)
	result := pollSuccess
	if err != nil {
		result = pollError
	}
	m.polls.WithLabelValues(result).Inc()
	m.pollDuration.Observe(took.Seconds())
}

// RemoteCall counts a call to a git remote (gitwatch's
// Options.RemoteCall).
func (m *Metrics) RemoteCall(op string) {
	m.events.Add(1)
	m.remoteCalls.WithLabelValues(op).Inc()
}

// CommitApplied observes how long a new commit took to be applied.
func (m *Metrics) CommitApplied(took time.Duration) {
	m.events.Add(1)
	m.commitApplied.Observe(took.Seconds())
}

// ConfigReloaded does nothing: the reload gauges are read from
// State.ConfigStatus at scrape time, which also covers the first load.
func (m *Metrics) ConfigReloaded(model.ConfigStatus) {}

// DriftChecked counts a drift check by its outcome.
func (m *Metrics) DriftChecked(state string) {
	m.events.Add(1)
	m.driftChecks.WithLabelValues(state).Inc()
}

// PolicyEvaluated counts the policy messages of a verdict on stack.
func (m *Metrics) PolicyEvaluated(stack string, v model.PolicyVerdict) {
	m.events.Add(1)
	for _, list := range [][]model.Violation{v.Deny, v.Warn} {
		for _, x := range list {
			m.policyViolations.WithLabelValues(stack, x.Policy, x.Level).Inc()
		}
	}
}

// ResourcesExportFailed counts an operation after which the stack's
// resources could not be exported. The stack is no label: the series of
// a stack end with it, and a counter's would not.
func (m *Metrics) ResourcesExportFailed(string) {
	m.events.Add(1)
	m.exportFailures.Inc()
}

// PreviewDone counts a finished preview of a pull request by its result
// (review.Succeeded, Failed or Cancelled) and observes how long it took.
func (m *Metrics) PreviewDone(result string, took time.Duration) {
	m.events.Add(1)
	if result == "" {
		result = "unknown"
	}
	m.previews.WithLabelValues(result).Inc()
	m.previewTook.Observe(took.Seconds())
}

// ReviewStackDone counts a finished operation on a review stack by its
// operation and result (review.Succeeded or Failed).
func (m *Metrics) ReviewStackDone(op review.Op, result string) {
	m.events.Add(1)
	m.reviewStackOps.WithLabelValues(string(op), result).Inc()
}

// The actions of the audit trail that are the server's, not the
// daemon's: a sign-in and a sign-out (package web records them).
const (
	ActionSignIn  = "sign-in"
	ActionSignOut = "sign-out"
)

// auditActions and auditOutcomes are the label values of
// stackd_audit_total, each pair at zero from the start.
var (
	auditActions = []string{access.ActionRead, access.ActionSync, access.ActionPause, access.ActionReload,
		access.ActionApprove, access.ActionCancel, access.ActionOverride, access.ActionAdmin, ActionSignIn, ActionSignOut}
	auditOutcomes = []string{model.AuditAllowed, model.AuditFailed, model.AuditDenied, model.AuditUnauthenticated}
)

// Audited counts a request recorded in the audit trail; action and
// outcome are bounded enumerations, never a name.
func (m *Metrics) Audited(action, outcome string) {
	m.events.Add(1)
	m.audit.WithLabelValues(action, outcome).Inc()
}

// AuditDropped counts an unauthenticated refusal left out of the trail.
func (m *Metrics) AuditDropped() {
	m.events.Add(1)
	m.auditDropped.Inc()
}

// Descriptions of the gauges read at scrape time.
var (
	stackLabel    = []string{"stack"}
	descStacks    = prometheus.NewDesc("stackd_stacks", "Stacks the daemon knows, including removed ones whose destroy is pending.", nil, nil)
	descReady     = prometheus.NewDesc("stackd_stack_ready", "1 when the stack's Ready condition is True.", stackLabel, nil)
	descReconcile = prometheus.NewDesc("stackd_stack_reconciling", "1 when the stack's Reconciling condition is True.", stackLabel, nil)
	descStalled   = prometheus.NewDesc("stackd_stack_stalled", "1 when the stack's Stalled condition is True.", stackLabel, nil)
	descFailing   = prometheus.NewDesc("stackd_stack_failing", "1 when the stack's last update failed.", stackLabel, nil)
	descFailures  = prometheus.NewDesc("stackd_stack_consecutive_failures",
		"Consecutive failed updates of the stack for its current generation and sync request; 0 after a success.", stackLabel, nil)
	descLastOK = prometheus.NewDesc("stackd_stack_last_success_timestamp_seconds",
		"Unix time of the stack's last successful update; absent until one succeeds.", stackLabel, nil)
	descDrifted = prometheus.NewDesc("stackd_stack_drifted",
		"1 when the stack's last drift check found drift that no ignore rule accepts; absent before the first check.", stackLabel, nil)
	descDriftRes = prometheus.NewDesc("stackd_stack_drift_resources",
		"Drifted resources of the stack by what a refresh would do (update, delete); ignored ones under op=\"ignored\".", []string{"stack", "op"}, nil)
	descDriftCheck = prometheus.NewDesc("stackd_stack_last_drift_check_timestamp_seconds",
		"When the stack was last checked for drift.", stackLabel, nil)
	descWindowClosed = prometheus.NewDesc("stackd_stack_change_window_closed",
		"1 while a change of the stack waits for its change windows to open.", stackLabel, nil)
	descWindowOpens = prometheus.NewDesc("stackd_stack_change_window_next_open_timestamp_seconds",
		"When the change windows let the waiting change of the stack run; absent while none waits, or when no window opens within a year.", stackLabel, nil)
	descQueue    = prometheus.NewDesc("stackd_queue_depth", "Stacks waiting for a worker, a prerequisite or a sync wave.", nil, nil)
	descRunning  = prometheus.NewDesc("stackd_operations_running", "Pulumi operations in flight.", nil, nil)
	descAwaiting = prometheus.NewDesc("stackd_stacks_awaiting_approval",
		"Stacks whose plan awaits approval.", nil, nil)
	descReload = prometheus.NewDesc("stackd_config_last_reload_successful",
		"1 when the last config load or reload was applied, 0 when it had errors.", nil, nil)
	descReloadOK = prometheus.NewDesc("stackd_config_last_reload_success_timestamp_seconds",
		"Unix time of the last config load or reload that was applied.", nil, nil)
	descPolicyReload = prometheus.NewDesc("stackd_policy_last_reload_successful",
		"1 when the last load or reload of the policies (--policy) succeeded, 0 when it failed and the policies before stay in force; absent without --policy.", nil, nil)
	descPaused = prometheus.NewDesc("stackd_paused",
		"1 while the daemon is paused (stackd pause): no operation starts until it is resumed.", nil, nil)
	descStackHealth = prometheus.NewDesc("stackd_stack_health",
		"1 for the stack's current health (Healthy, Progressing, Degraded), 0 for the others; absent while unknown.", []string{"stack", "health"}, nil)
)

// Descriptions of the config sources' gauges. The label "source" is the
// --config value, which holds no credentials.
var (
	sourceLabel      = []string{"source"}
	descSourceHealth = prometheus.NewDesc("stackd_config_source_health",
		"1 for the config source's current health (Healthy, Progressing, Degraded), 0 for the others.", []string{"source", "health"}, nil)
	descSourceFailing = prometheus.NewDesc("stackd_config_source_failing",
		"1 when the config source's latest content is not in force: it cannot be fetched, or its config is not valid.", sourceLabel, nil)
	descSourceStacks = prometheus.NewDesc("stackd_config_source_stacks",
		"Stacks the config source defines.", sourceLabel, nil)
	descSourcePoll = prometheus.NewDesc("stackd_config_source_last_poll_timestamp_seconds",
		"Unix time the Git config source's ref was last resolved; absent for local sources and before the first poll.", sourceLabel, nil)
	descSourceApplied = prometheus.NewDesc("stackd_config_source_applied_timestamp_seconds",
		"Unix time the config source's content in force was applied; absent until it is.", sourceLabel, nil)
)

// Descriptions of the cluster's gauges and counters (cluster mode only).
var (
	descClusterMembers = prometheus.NewDesc("stackd_cluster_members", "Live replicas of the cluster, as this replica sees them.", nil, nil)
	descClusterOwned   = prometheus.NewDesc("stackd_cluster_owned_stacks", "Stacks this replica holds.", nil, nil)
	descClusterMoves   = prometheus.NewDesc("stackd_cluster_ownership_moves_total", "Stacks this replica took over or gave up.", nil, nil)
	descClusterLost    = prometheus.NewDesc("stackd_cluster_session_lost_total", "Times this replica's etcd session ended without it leaving.", nil, nil)
	descClusterLeader  = prometheus.NewDesc("stackd_cluster_leader", "1 when this replica is the cluster's leader (it records config revisions).", nil, nil)
	descClusterSession = prometheus.NewDesc("stackd_cluster_session", "1 while this replica holds an etcd session; without one it acts on no stack.", nil, nil)
)

// healthValues are the values of the "health" label, each reported for
// every stack and source so that a change of health moves a 1 rather
// than ending one series and starting another.
var healthValues = []string{model.HealthHealthy, model.HealthProgressing, model.HealthDegraded, model.HealthAwaitingApproval}

// stateCollector reports the State's current values at each scrape.
type stateCollector struct{ m *Metrics }

func (c stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descStacks, descReady, descReconcile, descStalled, descFailing,
		descFailures, descLastOK, descDrifted, descDriftRes, descDriftCheck, descWindowClosed, descWindowOpens, descQueue, descRunning, descAwaiting, descReload, descReloadOK, descPolicyReload, descPaused,
		descStackHealth, descSourceHealth, descSourceFailing, descSourceStacks, descSourcePoll, descSourceApplied,
		descClusterMembers, descClusterOwned, descClusterMoves, descClusterLost, descClusterLeader, descClusterSession} {
		ch <- d
	}
}

// stackMetrics are one stack's gauges at a version.
type stackMetrics struct {
	version uint64
	holder  string
	metrics []prometheus.Metric
}

// Collect reads the State (copies, no lock kept) and emits the gauges.
func (c stateCollector) Collect(ch chan<- prometheus.Metric) {
	ref := c.m.api.Load()
	if ref == nil {
		return
	}
	versions, stats, cfg := ref.StackVersions(), ref.Stats(), ref.ConfigStatus()
	cs, clustered := ref.ClusterStatus()
	if clustered {
		// Each replica reports the stacks it holds, so that a sum over
		// replicas counts each stack once.
		versions = slices.DeleteFunc(versions, func(sv model.StackVersion) bool { return sv.Holder != cs.Node })
		collectCluster(ch, cs, len(versions))
	}
	gauge(ch, descStacks, float64(len(versions)))
	c.m.collectStacks(ch, ref, versions)
	gauge(ch, descQueue, float64(stats.Queued))
	gauge(ch, descRunning, float64(stats.Running))
	gauge(ch, descAwaiting, float64(stats.AwaitingApproval))
	gauge(ch, descReload, boolValue(cfg.Successful))
	gauge(ch, descPaused, boolValue(cfg.Paused))
	if cfg.Policies != nil {
		gauge(ch, descPolicyReload, boolValue(cfg.Policies.Successful))
	}
	if !cfg.LastSuccess.IsZero() {
		gauge(ch, descReloadOK, unixSeconds(cfg.LastSuccess))
	}
	collectSources(ch, cfg.Sources)
}

// collectStacks emits the gauges of the stacks of versions, making again
// those of the stacks that changed since the last scrape.
func (m *Metrics) collectStacks(ch chan<- prometheus.Metric, api State, versions []model.StackVersion) {
	m.stacksMu.Lock()
	defer m.stacksMu.Unlock()
	if m.stacks == nil {
		m.stacks = map[string]*stackMetrics{}
	}
	seen := make(map[string]bool, len(versions))
	for _, sv := range versions {
		e := m.stacks[sv.Name]
		if e == nil || e.version != sv.Version || e.holder != sv.Holder {
			v, err := api.Stack(sv.Name)
			if err != nil {
				continue // gone meanwhile
			}
			buf := make(chan prometheus.Metric, 32)
			collectStack(buf, &v)
			close(buf)
			e = &stackMetrics{version: sv.Version, holder: sv.Holder}
			for metric := range buf {
				e.metrics = append(e.metrics, metric)
			}
			m.stacks[sv.Name] = e
		}
		seen[sv.Name] = true
		for _, metric := range e.metrics {
			ch <- metric
		}
	}
	maps.DeleteFunc(m.stacks, func(name string, _ *stackMetrics) bool { return !seen[name] })
}

// collectCluster emits the cluster's metrics as this replica sees it.
func collectCluster(ch chan<- prometheus.Metric, cs model.ClusterStatus, owned int) {
	gauge(ch, descClusterMembers, float64(len(cs.Members)))
	gauge(ch, descClusterOwned, float64(owned))
	ch <- prometheus.MustNewConstMetric(descClusterMoves, prometheus.CounterValue, float64(cs.Moves))
	ch <- prometheus.MustNewConstMetric(descClusterLost, prometheus.CounterValue, float64(cs.SessionsLost))
	gauge(ch, descClusterLeader, boolValue(cs.Leader != "" && cs.Leader == cs.Node))
	gauge(ch, descClusterSession, boolValue(cs.Session))
}

// collectSources emits the config sources' gauges. A source named twice
// is reported once (the first), as a duplicate series would fail the
// whole scrape.
func collectSources(ch chan<- prometheus.Metric, sources []model.SourceStatus) {
	seen := make(map[string]bool, len(sources))
	for i := range sources {
		src := &sources[i]
		if seen[src.Source] {
			continue
		}
		seen[src.Source] = true
		collectHealth(ch, descSourceHealth, src.Source, src.Health.Status)
		gauge(ch, descSourceFailing, boolValue(src.Error != ""), src.Source)
		gauge(ch, descSourceStacks, float64(src.Stacks), src.Source)
		if !src.LastPoll.IsZero() {
			gauge(ch, descSourcePoll, unixSeconds(src.LastPoll), src.Source)
		}
		if !src.AppliedAt.IsZero() {
			gauge(ch, descSourceApplied, unixSeconds(src.AppliedAt), src.Source)
		}
	}
}

// collectHealth emits d for each health value under name: 1 for current,
// 0 for the others (all 0 for a value that is none of them).
func collectHealth(ch chan<- prometheus.Metric, d *prometheus.Desc, name, current string) {
	for _, h := range healthValues {
		gauge(ch, d, boolValue(h == current), name, h)
	}
}

// collectStack emits one stack's gauges.
//
// stackd_stack_consecutive_failures is lastUpdate.failures while the last
// update failed (1 after the first failure; the number the Stalled
// message gives), 0 otherwise. A record from before stackd counted from 1
// shows at least 1.
func collectStack(ch chan<- prometheus.Metric, v *model.StackView) {
	gauge(ch, descReady, conditionTrue(&v.Status, model.ConditionReady), v.Name)
	gauge(ch, descReconcile, conditionTrue(&v.Status, model.ConditionReconciling), v.Name)
	gauge(ch, descStalled, conditionTrue(&v.Status, model.ConditionStalled), v.Name)
	failing, failures := 0.0, 0.0
	if lu := v.Status.LastUpdate; lu != nil && lu.State == model.UpdateFailed {
		failing, failures = 1, float64(max(lu.Failures, 1))
	}
	gauge(ch, descFailing, failing, v.Name)
	gauge(ch, descFailures, failures, v.Name)
	if h := v.Status.Health; h != nil {
		collectHealth(ch, descStackHealth, v.Name, h.Status)
	}
	if !v.LastSuccess.IsZero() {
		gauge(ch, descLastOK, unixSeconds(v.LastSuccess), v.Name)
	}
	if dr := v.Status.Drift; dr != nil {
		collectDrift(ch, v.Name, dr)
	}
	cw := v.Status.ChangeWindow
	gauge(ch, descWindowClosed, boolValue(cw != nil), v.Name)
	if cw != nil && !cw.NextOpen.IsZero() {
		gauge(ch, descWindowOpens, unixSeconds(cw.NextOpen), v.Name)
	}
}

// collectDrift emits a stack's drift gauges.
func collectDrift(ch chan<- prometheus.Metric, name string, dr *spec.DriftStatus) {
	gauge(ch, descDrifted, boolValue(dr.State == spec.DriftDrifted), name)
	gauge(ch, descDriftCheck, unixSeconds(dr.LastCheck), name)
	ops := map[string]float64{"update": 0, "delete": 0, "ignored": float64(dr.Ignored)}
	for _, r := range dr.Resources {
		ops[r.Op]++
	}
	for op, n := range ops {
		gauge(ch, descDriftRes, n, name, op)
	}
}

func gauge(ch chan<- prometheus.Metric, d *prometheus.Desc, value float64, labels ...string) {
	ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, value, labels...)
}

func conditionTrue(s *model.StackStatus, typ string) float64 {
	c := s.Condition(typ)
	return boolValue(c != nil && c.Status == "True")
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func unixSeconds(t time.Time) float64 {
	return float64(t.UnixNano()) / 1e9
}
