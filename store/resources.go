package store

import (
	"encoding/json"
	"fmt"

	"go.etcd.io/bbolt"

	"github.com/stackd/stackd/daemon/model"
)

// PutResources replaces the resources of stack. It writes.
func (s *Store) PutResources(stack string, r model.Resources) error {
	return s.putJSON(bucketResources, "resources", stack, r)
}

// Resources reads the resources of stack; the error wraps ErrNotFound
// when there are none.
func (s *Store) Resources(stack string) (model.Resources, error) {
	var r model.Resources
	return r, s.getJSON(bucketResources, "resources", stack, &r)
}

// PutPreview replaces the last preview of stack. It writes.
func (s *Store) PutPreview(stack string, p model.StackPreview) error {
	return s.putJSON(bucketPreviews, "preview", stack, p)
}

// Preview reads the last preview of stack; the error wraps ErrNotFound
// when there is none.
func (s *Store) Preview(stack string) (model.StackPreview, error) {
	var p model.StackPreview
	return p, s.getJSON(bucketPreviews, "preview", stack, &p)
}

// putJSON writes v as JSON under stack in bucket; what names it in errors.
func (s *Store) putJSON(bucket []byte, what, stack string, v any) error {
	if stack == "" {
		return fmt.Errorf("store: put %s: empty stack name", what)
	}
	data, err := json.Marshal(v)
	if err == nil {
		err = s.update(func(tx *bbolt.Tx) error { return tx.Bucket(bucket).Put([]byte(stack), data) })
	}
	if err != nil {
		return fmt.Errorf("store: put %s of %s: %w", what, stack, err)
	}
	return nil
}

// getJSON reads the JSON under stack in bucket into v; the error wraps
// ErrNotFound when there is none.
func (s *Store) getJSON(bucket []byte, what, stack string, v any) error {
	err := s.view(func(tx *bbolt.Tx) error {
		data := tx.Bucket(bucket).Get([]byte(stack))
		if data == nil {
			return ErrNotFound
		}
		return json.Unmarshal(data, v)
	})
	if err != nil {
		return fmt.Errorf("store: %s of %s: %w", what, stack, err)
	}
	return nil
}
