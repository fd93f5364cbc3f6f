// Package audit is the audit trail's contract (Log, which the BoltDB and
// the etcd stores implement, and Filter) and the scan both stores use to
// select entries from their stored JSON without decoding most of them.
// It imports only model.
package audit
