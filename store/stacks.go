package store

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/stackd/stackd/daemon/model"
)

// PutStack writes (creates or replaces) the record of stack rec.Name.
// It writes.
func (s *Store) PutStack(rec model.StackRecord) error {
	if rec.Name == "" {
		return errors.New("store: put stack: empty name")
	}
	v, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("store: put stack %s: %w", rec.Name, err)
	}
	err = s.update(func(tx *bbolt.Tx) error {
		return tx.Bucket(bucketStacks).Put([]byte(rec.Name), v)
	})
	if err != nil {
		return fmt.Errorf("store: put stack %s: %w", rec.Name, err)
	}
	return nil
}

// Stack reads the record of stack name; the error wraps ErrNotFound when
// there is none.
func (s *Store) Stack(name string) (model.StackRecord, error) {
	var rec model.StackRecord
	err := s.view(func(tx *bbolt.Tx) error {
		v := tx.Bucket(bucketStacks).Get([]byte(name))
		if v == nil {
			return ErrNotFound
		}
		return json.Unmarshal(v, &rec)
	})
	if err != nil {
		return model.StackRecord{}, fmt.Errorf("store: stack %s: %w", name, err)
	}
	return rec, nil
}

// Stacks reads every stack record, sorted by name (byte order).
func (s *Store) Stacks() ([]model.StackRecord, error) {
	recs := []model.StackRecord{}
	err := s.view(func(tx *bbolt.Tx) error {
		return tx.Bucket(bucketStacks).ForEach(func(k, v []byte) error {
			var rec model.StackRecord
			if err := json.Unmarshal(v, &rec); err != nil {
				return fmt.Errorf("%s: %w", k, err)
			}
			recs = append(recs, rec)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("store: stacks: %w", err)
	}
	return recs, nil
}

// DeleteStack removes the record of stack name, its whole update history,
// its logs, its resources and its last preview, in one transaction; a missing stack is not an error. The
// stack's update counter is kept, so a stack of the same name added later
// continues its numbering and update IDs are never reused. It writes.
func (s *Store) DeleteStack(name string) error {
	err := s.update(func(tx *bbolt.Tx) error {
		key := []byte(name)
		if err := tx.Bucket(bucketStacks).Delete(key); err != nil {
			return err
		}
		if err := tx.Bucket(bucketResources).Delete(key); err != nil {
			return err
		}
		if err := tx.Bucket(bucketPreviews).Delete(key); err != nil {
			return err
		}
		if err := deleteNested(tx.Bucket(bucketLogs), key); err != nil {
			return err
		}
		return resetHistory(tx.Bucket(bucketUpdates), key)
	})
	if err != nil {
		return fmt.Errorf("store: delete stack %s: %w", name, err)
	}
	return nil
}

// deleteNested deletes the nested bucket key of parent, if any.
func deleteNested(parent *bbolt.Bucket, key []byte) error {
	err := parent.DeleteBucket(key)
	if errors.Is(err, bolterrors.ErrBucketNotFound) {
		return nil
	}
	return err
}

// resetHistory empties a stack's updates bucket but keeps its sequence.
func resetHistory(updates *bbolt.Bucket, key []byte) error {
	b := updates.Bucket(key)
	if b == nil {
		return nil
	}
	seq := b.Sequence()
	if err := updates.DeleteBucket(key); err != nil {
		return err
	}
	b, err := updates.CreateBucket(key)
	if err != nil {
		return err
	}
	return b.SetSequence(seq)
}

// Meta reads the metadata value of key; the error wraps ErrNotFound when
// there is none.
func (s *Store) Meta(key string) ([]byte, error) {
	var value []byte
	err := s.view(func(tx *bbolt.Tx) error {
		v := tx.Bucket(bucketMeta).Get([]byte(metaPrefix + key))
		if v == nil {
			return ErrNotFound
		}
		value = append([]byte{}, v...)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: meta %s: %w", key, err)
	}
	return value, nil
}

// MetaKeys lists the keys of the metadata values, sorted.
func (s *Store) MetaKeys() ([]string, error) {
	keys := []string{}
	err := s.view(func(tx *bbolt.Tx) error {
		c := tx.Bucket(bucketMeta).Cursor()
		for k, _ := c.Seek([]byte(metaPrefix)); k != nil && strings.HasPrefix(string(k), metaPrefix); k, _ = c.Next() {
			keys = append(keys, strings.TrimPrefix(string(k), metaPrefix))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("store: meta keys: %w", err)
	}
	return keys, nil
}

// PutMeta writes (creates or replaces) the metadata value of key. Keys
// live in their own namespace, apart from the store's own metadata such
// as the schema version. It writes.
func (s *Store) PutMeta(key string, value []byte) error {
	err := s.update(func(tx *bbolt.Tx) error {
		return tx.Bucket(bucketMeta).Put([]byte(metaPrefix+key), value)
	})
	if err != nil {
		return fmt.Errorf("store: put meta %s: %w", key, err)
	}
	return nil
}
