package store

import (
	"path/filepath"
	"testing"

	"github.com/stackd/stackd/daemon"
	"github.com/stackd/stackd/daemon/storetest"
)

// TestContract runs the daemon.Store contract that the etcd store runs
// too.
func TestContract(t *testing.T) {
	storetest.Run(t, func(t *testing.T, limits storetest.Limits) (daemon.Store, func(string)) {
		return openTest(t, Options{HistoryLimit: limits.History, LogLimit: limits.Log}), func(string) {}
	})
}

// TestPullRequests runs the review.Store contract, and reads the records
// again after the file was closed and opened.
func TestPullRequests(t *testing.T) {
	s := openTest(t, Options{})
	storetest.RunPullRequests(t, s)
	path := s.Path()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openAt(t, path, Options{})
	if got, err := s.PullRequests(); err != nil || len(got) != 1 || got[0].View.Number != 2 {
		t.Errorf("PullRequests after a reopen = %+v, %v", got, err)
	}
}

// TestMigrateV5PullRequests: a file of schema version 5, the last
// without a bucket of pull requests, gets one at Open.
func TestMigrateV5PullRequests(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	atVersion(5, func() {
		s := openAt(t, path, Options{})
		if hasBucket(t, s, bucketPRs) {
			t.Fatal("a version 5 store has a bucket of pull requests")
		}
		mustClose(t, s)
	})
	s := openAt(t, path, Options{})
	if got, err := s.PullRequests(); err != nil || len(got) != 0 {
		t.Errorf("PullRequests of a migrated store = %+v, %v; want none", got, err)
	}
	if err := s.PutPullRequest(storetest.PRRecord(1, "abc")); err != nil {
		t.Error(err)
	}
}
