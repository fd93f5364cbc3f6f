package store

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"

	"go.etcd.io/bbolt"

	"github.com/stackd/stackd/daemon/model"
)

// defaultPageSize is the number of records Updates and Revisions return
// when their limit is not positive.
const defaultPageSize = 50

// BeginUpdate records the start of an update of stack u.Stack: it assigns
// u.Seq, the stack's next sequence number (1, 2, 3…, never reused, even
// after pruning or DeleteStack), and u.ID = "<stack>-<seq>", stores u,
// and, in the same transaction, prunes the stack's oldest updates and
// their logs beyond Options.HistoryLimit. It returns u as stored. It
// writes.
func (s *Store) BeginUpdate(u model.Update) (model.Update, error) {
	if u.Stack == "" {
		return model.Update{}, errors.New("store: begin update: empty stack name")
	}
	err := s.update(func(tx *bbolt.Tx) error {
		b, err := tx.Bucket(bucketUpdates).CreateBucketIfNotExists([]byte(u.Stack))
		if err != nil {
			return err
		}
		if u.Seq, err = b.NextSequence(); err != nil {
			return err
		}
		u.ID = model.UpdateID(u.Stack, u.Seq)
		v, err := json.Marshal(u)
		if err != nil {
			return err
		}
		if err := b.Put(seqKey(u.Seq), v); err != nil {
			return err
		}
		return prune(tx, b, []byte(u.Stack), s.opts.HistoryLimit)
	})
	if err != nil {
		return model.Update{}, fmt.Errorf("store: begin update of %s: %w", u.Stack, err)
	}
	return u, nil
}

// prune deletes the oldest updates of history b (stack's), and their
// logs, so that at most limit remain.
func prune(tx *bbolt.Tx, b *bbolt.Bucket, stack []byte, limit int) error {
	logs := tx.Bucket(bucketLogs).Bucket(stack)
	for _, k := range staleKeys(b, limit) {
		if err := b.Delete(k); err != nil {
			return err
		}
		if logs == nil {
			continue
		}
		if err := logs.Delete(k); err != nil {
			return err
		}
	}
	return nil
}

// staleKeys returns copies of the keys of b, oldest first, that are not
// among its newest limit (keys in byte order); none when b holds limit or
// fewer.
func staleKeys(b *bbolt.Bucket, limit int) [][]byte {
	c := b.Cursor()
	k, _ := c.Last()
	for i := 1; i < limit && k != nil; i++ {
		k, _ = c.Prev()
	}
	if k == nil {
		return nil // limit or fewer
	}
	oldest := bytes.Clone(k)
	var stale [][]byte
	for k, _ := c.First(); k != nil && bytes.Compare(k, oldest) < 0; k, _ = c.Next() {
		stale = append(stale, bytes.Clone(k))
	}
	return stale
}

// PutUpdate overwrites the stored update (u.Stack, u.Seq) with u; u.ID is
// set from them. The error wraps ErrNotFound when that update was never
// begun or has been pruned. When model.Folds says u absorbs the stack's
// record before it (an unchanged drift check), u is stored as
// model.Fold of the two, and that record and its log are deleted, in the
// same transaction. It writes.
func (s *Store) PutUpdate(u model.Update) error {
	u.ID = model.UpdateID(u.Stack, u.Seq)
	err := s.update(func(tx *bbolt.Tx) error {
		b := history(tx, u.Stack)
		if b == nil || b.Get(seqKey(u.Seq)) == nil {
			return ErrNotFound
		}
		u, err := foldPrevious(tx, b, u)
		if err != nil {
			return err
		}
		v, err := json.Marshal(u)
		if err != nil {
			return err
		}
		return b.Put(seqKey(u.Seq), v)
	})
	if err != nil {
		return fmt.Errorf("store: put update %s: %w", u.ID, err)
	}
	return nil
}

// foldPrevious returns u folded with the record before it in history b
// when model.Folds says so, having deleted that record and its log; else
// u as it is.
func foldPrevious(tx *bbolt.Tx, b *bbolt.Bucket, u model.Update) (model.Update, error) {
	if u.Type != model.UpdateDrift || u.State == model.UpdateRunning {
		return u, nil // spares reading the record before it
	}
	c := b.Cursor()
	if k, _ := c.Seek(seqKey(u.Seq)); k == nil {
		return u, nil
	}
	k, v := c.Prev()
	if k == nil {
		return u, nil
	}
	var prev model.Update
	if err := json.Unmarshal(v, &prev); err != nil {
		return model.Update{}, fmt.Errorf("seq %d: %w", binary.BigEndian.Uint64(k), err)
	}
	if !model.Folds(prev, u) {
		return u, nil
	}
	key := bytes.Clone(k)
	if err := b.Delete(key); err != nil {
		return model.Update{}, err
	}
	if logs := tx.Bucket(bucketLogs).Bucket([]byte(u.Stack)); logs != nil {
		if err := logs.Delete(key); err != nil {
			return model.Update{}, err
		}
	}
	return model.Fold(prev, u), nil
}

// PutLog stores (or replaces) the log of update id. A log longer than
// Options.LogLimit keeps its last LogLimit bytes (fewer if that cuts a
// UTF-8 character), after a line "[… N bytes truncated …]\n". The error
// wraps ErrNotFound when the update does not exist. It writes.
func (s *Store) PutLog(id string, log []byte) error {
	stack, seq, err := model.ParseUpdateID(id)
	if err != nil {
		return fmt.Errorf("store: put log %s: %w", id, err)
	}
	log = model.TruncateLog(log, s.opts.LogLimit)
	err = s.update(func(tx *bbolt.Tx) error {
		if b := history(tx, stack); b == nil || b.Get(seqKey(seq)) == nil {
			return ErrNotFound
		}
		logs, err := tx.Bucket(bucketLogs).CreateBucketIfNotExists([]byte(stack))
		if err != nil {
			return err
		}
		return logs.Put(seqKey(seq), log)
	})
	if err != nil {
		return fmt.Errorf("store: put log %s: %w", id, err)
	}
	return nil
}

// Update reads update id; the error wraps ErrNotFound when it does not
// exist (or id is not an update ID).
func (s *Store) Update(id string) (model.Update, error) {
	stack, seq, err := model.ParseUpdateID(id)
	if err != nil {
		return model.Update{}, fmt.Errorf("store: update %s: %w", id, err)
	}
	var u model.Update
	err = s.view(func(tx *bbolt.Tx) error {
		b := history(tx, stack)
		if b == nil {
			return ErrNotFound
		}
		v := b.Get(seqKey(seq))
		if v == nil {
			return ErrNotFound
		}
		return json.Unmarshal(v, &u)
	})
	if err != nil {
		return model.Update{}, fmt.Errorf("store: update %s: %w", id, err)
	}
	return u, nil
}

// Log reads the log of update id: an empty slice when the update exists
// but has no log yet; the error wraps ErrNotFound when the update does
// not exist.
func (s *Store) Log(id string) ([]byte, error) {
	stack, seq, err := model.ParseUpdateID(id)
	if err != nil {
		return nil, fmt.Errorf("store: log %s: %w", id, err)
	}
	log := []byte{}
	err = s.view(func(tx *bbolt.Tx) error {
		if b := history(tx, stack); b == nil || b.Get(seqKey(seq)) == nil {
			return ErrNotFound
		}
		if logs := tx.Bucket(bucketLogs).Bucket([]byte(stack)); logs != nil {
			log = append(log, logs.Get(seqKey(seq))...)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: log %s: %w", id, err)
	}
	return log, nil
}

// Updates reads stack's updates, newest first: only those with Seq <
// before when before > 0, and at most limit of them (50 when limit <= 0).
// A stack without updates gives an empty slice. To page, pass the Seq of
// the last update of a page as the next call's before.
func (s *Store) Updates(stack string, before uint64, limit int) ([]model.Update, error) {
	if limit <= 0 {
		limit = defaultPageSize
	}
	out := []model.Update{}
	err := s.view(func(tx *bbolt.Tx) error {
		b := history(tx, stack)
		if b == nil {
			return nil
		}
		c := b.Cursor()
		for k, v := newestBefore(c, before); k != nil && len(out) < limit; k, v = c.Prev() {
			var u model.Update
			if err := json.Unmarshal(v, &u); err != nil {
				return fmt.Errorf("seq %d: %w", binary.BigEndian.Uint64(k), err)
			}
			out = append(out, u)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: updates of %s: %w", stack, err)
	}
	return out, nil
}

// newestBefore positions c on the last key below before (the last key
// when before is 0).
func newestBefore(c *bbolt.Cursor, before uint64) ([]byte, []byte) {
	if before == 0 {
		return c.Last()
	}
	if k, _ := c.Seek(seqKey(before)); k != nil {
		return c.Prev()
	}
	return c.Last()
}

// RunningUpdates reads every update, of every stack, whose State is
// model.UpdateRunning, ordered by stack then Seq. At start these belong
// to a stackd that died; the caller marks them aborted with PutUpdate.
func (s *Store) RunningUpdates() ([]model.Update, error) {
	out := []model.Update{}
	err := s.view(func(tx *bbolt.Tx) error {
		updates := tx.Bucket(bucketUpdates)
		return updates.ForEachBucket(func(stack []byte) error {
			return updates.Bucket(stack).ForEach(func(k, v []byte) error {
				var head struct{ State string }
				if err := json.Unmarshal(v, &head); err != nil || head.State != model.UpdateRunning {
					return err
				}
				var u model.Update
				if err := json.Unmarshal(v, &u); err != nil {
					return err
				}
				out = append(out, u)
				return nil
			})
		})
	})
	if err != nil {
		return nil, fmt.Errorf("store: running updates: %w", err)
	}
	return out, nil
}

// history returns the updates bucket of stack, nil if it has none.
func history(tx *bbolt.Tx, stack string) *bbolt.Bucket {
	return tx.Bucket(bucketUpdates).Bucket([]byte(stack))
}

func seqKey(seq uint64) []byte {
	return binary.BigEndian.AppendUint64(nil, seq)
}
