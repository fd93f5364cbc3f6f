// Package daemon is stackd's reconcile loop: it follows the stacks of a
// config, decides with PKO's table when each one runs, runs one operation
// per stack at a time within a global limit, and records every step.
//
// It declares what it needs from the outside as small interfaces
// (Fetcher, Runner, Store, Observer, Notifier, Ownership) and imports no
// sibling of stackd's but model, the words every package shares (a
// stack's record and status, updates, plans, resources, …); cmd wires
// gitwatch, runner, store, web and cluster to it. Its pure parts are
// sub-packages that import nothing of the loop: the Stack spec
// (daemon/spec), PKO's decision table (daemon/decide), a status's
// conditions and health (daemon/conditions), change control's decisions
// and the policies' verdict (daemon/gate), a stack's spec resolved for
// the runner (daemon/resolve), the resource model (daemon/resource), the
// "preview now" runner (daemon/previewnow), change windows
// (daemon/window), notification delivery (daemon/notify), secret
// scrubbing (daemon/scrub), the running operation's log
// (daemon/livelog), the scheduler's bookkeeping (daemon/sched) and a
// stack's activity, one state and its transitions (daemon/activity).
// What Daemon.mu guards is changed by methods of locked, which only lock
// makes (TestLockRule checks what the compiler cannot).
//
// Where things are:
//
//	daemon.go        Daemon, Options, the Store interface, the lock (locked); New, Start, Stop
//	interfaces.go    Fetcher, Runner, CommitReader, PlanDiscarder and their errors
//	schedule.go      the scheduler: when each stack polls, waits or runs
//	operate.go       one operation: start, record, finish, failure counting
//	workspace.go     a job's workspace put in place: checkout, references, outputs
//	gate.go          change control in the loop: the gated up or destroy, holding, approving
//	windows.go       change windows in the loop: holding a change back, overrides
//	stackset.go      StackSets in the loop: the Rollouts interface, holding a stack for its set's rollout
//	drift.go         drift checks: when they are due, ignore rules, events
//	resources.go     recording a stack's resources and reading them back
//	previewnow.go    "preview now": when one may run, and its record
//	configsource.go  config sources: local paths and polled Git directories
//	reload.go        reload: read, validate, guard, then swap in whole
//	watch.go         file watching of local config sources
//	redact.go        the redactor's choke points: the Store, the Notifier, the status in memory
//	view.go          what the API and the UI read, and sync requests
//	observe.go       the Observer (metrics), history reads, push webhooks
//	external.go      what work outside the loop (pull-request previews) takes of it
//	event.go         the Notifier interface
//	ownership.go     the Ownership interface of cluster mode
//	replica.go       gaining, losing and handing over stacks in a cluster
//	maintenance.go   backup and pause
package daemon
