package store

import (
	"encoding/json"
	"fmt"

	"github.com/stackd/stackd/daemon/review"
	"go.etcd.io/bbolt"
)

var _ review.Store = (*Store)(nil)

// PutPullRequest writes the record of an open pull request under its key.
func (s *Store) PutPullRequest(rec review.Record) error {
	if rec.View.Key == "" {
		return fmt.Errorf("store: put pull request: empty key")
	}
	v, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("store: put pull request %s: %w", rec.View.Key, err)
	}
	err = s.update(func(tx *bbolt.Tx) error { return tx.Bucket(bucketPRs).Put([]byte(rec.View.Key), v) })
	if err != nil {
		return fmt.Errorf("store: put pull request %s: %w", rec.View.Key, err)
	}
	return nil
}

// DeletePullRequest deletes the record of pull request key, if any.
func (s *Store) DeletePullRequest(key string) error {
	if err := s.update(func(tx *bbolt.Tx) error { return tx.Bucket(bucketPRs).Delete([]byte(key)) }); err != nil {
		return fmt.Errorf("store: delete pull request %s: %w", key, err)
	}
	return nil
}

// PullRequests reads the records of every open pull request, by key.
func (s *Store) PullRequests() ([]review.Record, error) {
	out := []review.Record{}
	err := s.view(func(tx *bbolt.Tx) error {
		return tx.Bucket(bucketPRs).ForEach(func(k, v []byte) error {
			var rec review.Record
			if err := json.Unmarshal(v, &rec); err != nil {
				return fmt.Errorf("%s: %w", k, err)
			}
			out = append(out, rec)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("store: pull requests: %w", err)
	}
	return out, nil
}
