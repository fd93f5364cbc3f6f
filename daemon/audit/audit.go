package audit

import (
	"time"

	"github.com/stackd/stackd/daemon/model"
)

// Filter selects audit entries; zero fields select all.
type Filter struct {
	Stack string
	// Actor matches the principal's name.
	Actor string
	Since time.Time
	// Before, when not zero, selects entries with a lower Seq (paging).
	Before uint64
	// Limit bounds the entries returned, newest first.
	Limit int
}

// Matches says whether e is selected by f (Before and Limit aside).
func (f Filter) Matches(e model.AuditEntry) bool {
	return (f.Stack == "" || e.Stack == f.Stack) &&
		(f.Actor == "" || e.Principal.Name == f.Actor) &&
		(f.Since.IsZero() || !e.Time.Before(f.Since))
}

// Log keeps the audit trail durably: BoltDB on one node, etcd in a
// cluster, where every replica's entries are seen by all.
type Log interface {
	// PutAudit appends e, assigning its Seq.
	PutAudit(e model.AuditEntry) (model.AuditEntry, error)
	// Audit lists the entries f selects, newest first.
	Audit(f Filter) ([]model.AuditEntry, error)
	// PruneAudit deletes the entries older than before, and says how
	// many.
	PruneAudit(before time.Time) (int, error)
}
