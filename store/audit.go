package store

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"time"

	"go.etcd.io/bbolt"

	"github.com/stackd/stackd/daemon/audit"
	"github.com/stackd/stackd/daemon/model"
)

var _ audit.Log = (*Store)(nil)

// PutAudit appends e to the audit trail: it assigns e.Seq, the next
// number of the trail (never reused, even after pruning), and e.Time
// when it is zero (now). It returns e as stored. It writes.
func (s *Store) PutAudit(e model.AuditEntry) (model.AuditEntry, error) {
	if e.Time.IsZero() {
		e.Time = time.Now()
	}
	err := s.update(func(tx *bbolt.Tx) error {
		b := tx.Bucket(bucketAudit)
		var err error
		if e.Seq, err = b.NextSequence(); err != nil {
			return err
		}
		v, err := json.Marshal(e)
		if err != nil {
			return err
		}
		return b.Put(seqKey(e.Seq), v)
	})
	if err != nil {
		return model.AuditEntry{}, fmt.Errorf("store: put audit entry: %w", err)
	}
	return e, nil
}

// Audit reads the audit entries f selects, newest first: those with Seq
// < f.Before when it is not 0, at most f.Limit (audit.PageDefault
// when 0 or less, audit.PageMax at most). None gives an empty
// slice. To page, pass the Seq of the last entry of a page as the next
// call's Before.
func (s *Store) Audit(f audit.Filter) ([]model.AuditEntry, error) {
	scan := audit.NewScan(f)
	err := s.view(func(tx *bbolt.Tx) error {
		c := tx.Bucket(bucketAudit).Cursor()
		for k, v := newestBefore(c, f.Before); k != nil; k, v = c.Prev() {
			more, err := scan.Add(v)
			if err != nil {
				return fmt.Errorf("seq %d: %w", binary.BigEndian.Uint64(k), err)
			}
			if !more {
				break
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: audit: %w", err)
	}
	return scan.Entries, nil
}

// pruneBatch bounds the entries PruneAudit deletes in one transaction,
// so that a first prune of a long trail does not hold the writer long.
const pruneBatch = 10000

// PruneAudit deletes the audit entries older than before, oldest first,
// and says how many. It stops at the first entry that is not older:
// entries are in time order but for steps of the clock, and one left
// behind by a step goes at a later prune. It writes.
func (s *Store) PruneAudit(before time.Time) (int, error) {
	total := 0
	for {
		n, more, err := s.pruneAudit(before, pruneBatch)
		total += n
		if err != nil {
			return total, fmt.Errorf("store: prune audit: %w", err)
		}
		if !more {
			return total, nil
		}
	}
}

// pruneAudit deletes up to limit entries older than before, in one
// transaction; more says whether it stopped at limit.
func (s *Store) pruneAudit(before time.Time, limit int) (n int, more bool, err error) {
	err = s.update(func(tx *bbolt.Tx) error {
		n, more = 0, false
		c := tx.Bucket(bucketAudit).Cursor()
		for k, v := c.First(); k != nil; k, v = c.First() {
			var head struct{ Time time.Time }
			if err := json.Unmarshal(v, &head); err != nil {
				return fmt.Errorf("seq %d: %w", binary.BigEndian.Uint64(k), err)
			}
			if !head.Time.Before(before) {
				return nil
			}
			if n == limit {
				more = true
				return nil
			}
			if err := c.Delete(); err != nil {
				return err
			}
			n++
		}
		return nil
	})
	if err != nil {
		return 0, false, err
	}
	return n, more, nil
}
