package store

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/stackd/stackd/daemon"
	"go.etcd.io/bbolt"
)

// PutResources replaces the resources of stack. It writes.
func (s *Store) PutResources(stack string, r daemon.Resources) error {
	if stack == "" {
		return errors.New("store: put resources: empty stack name")
	}
	v, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("store: put resources of %s: %w", stack, err)
	}
	err = s.update(func(tx *bbolt.Tx) error {
		return tx.Bucket(bucketResources).Put([]byte(stack), v)
	})
	if err != nil {
		return fmt.Errorf("store: put resources of %s: %w", stack, err)
	}
	return nil
}

// Resources reads the resources of stack; the error wraps ErrNotFound
// when there are none.
func (s *Store) Resources(stack string) (daemon.Resources, error) {
	var r daemon.Resources
	err := s.view(func(tx *bbolt.Tx) error {
		v := tx.Bucket(bucketResources).Get([]byte(stack))
		if v == nil {
			return ErrNotFound
		}
		return json.Unmarshal(v, &r)
	})
	if err != nil {
		return daemon.Resources{}, fmt.Errorf("store: resources of %s: %w", stack, err)
	}
	return r, nil
}
