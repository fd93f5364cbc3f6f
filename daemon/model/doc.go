// Package model holds the words every package of stackd shares: who
// acted (Principal) and the audit trail's entries; a stack's record and
// its PKO-shaped status, its updates, the plans and steps change control
// holds and the policies' verdicts on them, its resources and their
// drift, the change windows' status; and what the API shows of the
// config, of a cluster and of a stack.
//
// It has no behaviour beyond formatting and copying (the reconcile loop,
// daemon, keeps what changes a status), and imports only daemon/spec and
// the standard library, so that auth, web, store and cluster read and
// write these values without importing the loop.
package model
