// Package daemon is stackd's reconcile loop: it follows the stacks of a
// config, decides with PKO's table when each one runs, runs one operation
// per stack at a time within a global limit, and records every step.
//
// It declares what it needs from the outside as small interfaces
// (Fetcher, Runner, Store, Observer, Notifier) and imports no sibling of
// stackd's; cmd wires gitwatch, runner, store, web and cluster to it.
// The Stack spec lives in daemon/spec, notification delivery in
// daemon/notify, secret scrubbing in daemon/scrub, the running
// operation's log in daemon/livelog and the scheduler's bookkeeping
// (dirty stacks, a timer heap, busy sync waves) in daemon/sched: they
// import nothing of the loop.
//
// Where things are:
//
//	daemon.go        Daemon, Options, the Store interface; New, Start, Stop
//	interfaces.go    Fetcher, Runner and the values they take and return
//	schedule.go      the scheduler: when each stack polls, waits or runs
//	decide.go        PKO's decision table and backoff, as pure functions
//	operate.go       one operation: start, record, finish, failure counting
//	workspace.go     a stack's spec resolved into what the runner needs
//	drift.go         drift checks: when they are due, ignore rules, events
//	status.go        records, updates and PKO's StackStatus
//	conditions.go    Ready/Reconciling/Stalled conditions and health
//	configsource.go  config sources: local paths and polled Git directories
//	reload.go        reload: read, validate, guard, then swap in whole
//	watch.go         file watching and the mass-removal guard
//	view.go          what the API and the UI read
//	observe.go       the Observer (metrics) and the config's status
//	event.go         the Notifier interface
//	ownership.go     the Ownership interface of cluster mode
//	replica.go       gaining, losing and handing over stacks in a cluster
//	records.go       update IDs and log truncation every Store shares
//	maintenance.go   backup and pause
package daemon
