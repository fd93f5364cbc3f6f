// Package conditions keeps a stack's status as PKO does: its Ready,
// Reconciling and Stalled conditions (and stackd's AwaitingApproval), set
// with their transition times, and the Argo CD health they map to. It
// changes a model.StackStatus and imports nothing of the reconcile loop.
package conditions
