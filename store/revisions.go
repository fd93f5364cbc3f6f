package store

import (
	"encoding/binary"
	"encoding/json"
	"fmt"

	"go.etcd.io/bbolt"

	"github.com/stackd/stackd/daemon/model"
)

// PutRevision appends config revision r: it assigns r.Seq, the next
// revision number (1, 2, 3…, never reused, even after pruning), stores r
// and, in the same transaction, prunes the oldest revisions beyond
// Options.HistoryLimit. It returns r as stored. It writes.
func (s *Store) PutRevision(r model.ConfigRevision) (model.ConfigRevision, error) {
	err := s.update(func(tx *bbolt.Tx) error {
		b := tx.Bucket(bucketRevisions)
		var err error
		if r.Seq, err = b.NextSequence(); err != nil {
			return err
		}
		v, err := json.Marshal(r)
		if err != nil {
			return err
		}
		if err := b.Put(seqKey(r.Seq), v); err != nil {
			return err
		}
		return pruneRevisions(b, s.opts.HistoryLimit)
	})
	if err != nil {
		return model.ConfigRevision{}, fmt.Errorf("store: put revision: %w", err)
	}
	return r, nil
}

// pruneRevisions deletes the oldest revisions of b so that at most limit
// remain.
func pruneRevisions(b *bbolt.Bucket, limit int) error {
	for _, k := range staleKeys(b, limit) {
		if err := b.Delete(k); err != nil {
			return err
		}
	}
	return nil
}

// Revisions reads config revisions, newest first: only those with Seq <
// before when before > 0, and at most limit of them (50 when limit <= 0).
// None gives an empty slice. To page, pass the Seq of the last revision
// of a page as the next call's before.
func (s *Store) Revisions(before uint64, limit int) ([]model.ConfigRevision, error) {
	if limit <= 0 {
		limit = defaultPageSize
	}
	out := []model.ConfigRevision{}
	err := s.view(func(tx *bbolt.Tx) error {
		c := tx.Bucket(bucketRevisions).Cursor()
		for k, v := newestBefore(c, before); k != nil && len(out) < limit; k, v = c.Prev() {
			var r model.ConfigRevision
			if err := json.Unmarshal(v, &r); err != nil {
				return fmt.Errorf("seq %d: %w", binary.BigEndian.Uint64(k), err)
			}
			out = append(out, r)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: revisions: %w", err)
	}
	return out, nil
}
