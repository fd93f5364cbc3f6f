// Package resolve turns a stack's spec into what the runner and the
// fetcher take: its Workspace (config and environment, references read),
// its GitSource (credentials resolved, a local repository checked against
// the host paths), and what its record keeps for a later destroy. The
// reconcile loop (daemon) puts the program in place and runs it; this
// package imports nothing of it.
package resolve
