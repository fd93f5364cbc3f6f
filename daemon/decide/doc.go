// Package decide is PKO's decision table and its backoff, as pure
// functions: from a stack's last finished update and what is observed of
// it now (Observation), whether an operation runs, which, and why
// (Decision), and what change windows do with that run (ChangeOf,
// WindowRule). The reconcile loop (daemon) observes and acts; this package
// imports nothing of it.
package decide
