package store

import (
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/stackd/stackd/daemon/model"
	"github.com/stackd/stackd/daemon/storetest"
)

// putRevisions appends n revisions and returns them as stored.
func putRevisions(t testing.TB, s *Store, n int) []model.ConfigRevision {
	t.Helper()
	var out []model.ConfigRevision
	for range n {
		r, err := s.PutRevision(storetest.NewRevision("git"))
		if err != nil {
			t.Fatalf("PutRevision: %v", err)
		}
		out = append(out, r)
	}
	return out
}

// storedRevisions counts the records of the revisions bucket.
func storedRevisions(t *testing.T, s *Store) int {
	t.Helper()
	n := 0
	err := s.view(func(tx *bbolt.Tx) error {
		n = tx.Bucket(bucketRevisions).Stats().KeyN
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestPutRevision(t *testing.T) {
	s := openTest(t, Options{})
	if revs, err := s.Revisions(0, 0); err != nil || revs == nil || len(revs) != 0 {
		t.Errorf("Revisions of a new store = %#v, %v; want empty non-nil", revs, err)
	}
	in := storetest.NewRevision("start")
	in.Seq = 42 // ignored: the store assigns it
	in.Applied, in.Error = false, "stacks.yaml:3:5: unknown field"
	got, err := s.PutRevision(in)
	if err != nil {
		t.Fatal(err)
	}
	want := in
	want.Seq = 1
	if !reflect.DeepEqual(got, want) {
		t.Errorf("PutRevision = %+v, want %+v", got, want)
	}
	if revs, err := s.Revisions(0, 0); err != nil || !reflect.DeepEqual(revs, []model.ConfigRevision{want}) {
		t.Errorf("Revisions = %+v, %v; want [%+v]", revs, err, want)
	}
}

func TestRevisionPages(t *testing.T) {
	s := openTest(t, Options{})
	stored := putRevisions(t, s, 5)
	for _, tc := range []struct {
		before uint64
		limit  int
		want   []uint64
	}{
		{0, 0, []uint64{5, 4, 3, 2, 1}},
		{0, -1, []uint64{5, 4, 3, 2, 1}},
		{0, 2, []uint64{5, 4}},
		{4, 2, []uint64{3, 2}},
		{2, 2, []uint64{1}},
		{1, 2, []uint64{}},
		{6, 1, []uint64{5}},
		{99, 10, []uint64{5, 4, 3, 2, 1}},
	} {
		revs, err := s.Revisions(tc.before, tc.limit)
		if err != nil || !reflect.DeepEqual(storetest.RevSeqs(revs), tc.want) {
			t.Errorf("Revisions(%d, %d) = %v, %v; want %v", tc.before, tc.limit, storetest.RevSeqs(revs), err, tc.want)
		}
	}
	if revs, _ := s.Revisions(4, 1); len(revs) != 1 || !reflect.DeepEqual(revs[0], stored[2]) {
		t.Errorf("Revisions(4, 1) = %+v, want [%+v]", revs, stored[2])
	}
}

// TestRevisionsDefaultPage: a limit <= 0 means defaultPageSize.
func TestRevisionsDefaultPage(t *testing.T) {
	s := openTest(t, Options{})
	putRevisions(t, s, defaultPageSize+10)
	revs, err := s.Revisions(0, 0)
	if err != nil || len(revs) != defaultPageSize || revs[0].Seq != defaultPageSize+10 {
		t.Errorf("Revisions(0, 0) = %d revisions from %v, %v; want %d from %d",
			len(revs), storetest.RevSeqs(revs)[:min(1, len(revs))], err, defaultPageSize, defaultPageSize+10)
	}
}

// TestRevisionRetention: PutRevision keeps the newest HistoryLimit
// revisions, and a Seq is never reused, even after pruning and reopening.
func TestRevisionRetention(t *testing.T) {
	for _, tc := range []struct {
		name       string
		limit, put int
		want       []uint64
	}{
		{"under", 3, 2, []uint64{2, 1}},
		{"at", 3, 3, []uint64{3, 2, 1}},
		{"over", 3, 5, []uint64{5, 4, 3}},
		{"one", 1, 4, []uint64{4}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), FileName)
			opts := Options{HistoryLimit: tc.limit}
			s := openAt(t, path, opts)
			putRevisions(t, s, tc.put)
			checkRevisions(t, s, tc.want)
			mustClose(t, s)

			s = openAt(t, path, opts)
			checkRevisions(t, s, tc.want)
			next := putRevisions(t, s, 1)[0]
			if next.Seq != uint64(tc.put+1) {
				t.Errorf("Seq after reopening = %d, want %d", next.Seq, tc.put+1)
			}
			want := append([]uint64{next.Seq}, tc.want...)
			checkRevisions(t, s, want[:min(len(want), tc.limit)])
		})
	}
}

func checkRevisions(t *testing.T, s *Store, want []uint64) {
	t.Helper()
	revs, err := s.Revisions(0, 0)
	if err != nil || !reflect.DeepEqual(storetest.RevSeqs(revs), want) {
		t.Errorf("Revisions = %v, %v; want %v", storetest.RevSeqs(revs), err, want)
	}
	if n := storedRevisions(t, s); n != len(want) {
		t.Errorf("%d revisions stored, want %d", n, len(want))
	}
}

// TestRevisionsConcurrent: concurrent PutRevision calls get distinct
// sequence numbers.
func TestRevisionsConcurrent(t *testing.T) {
	s := openTest(t, Options{})
	const writers, each = 4, 10
	var wg sync.WaitGroup
	seen := make(chan uint64, writers*each)
	for range writers {
		wg.Go(func() {
			for range each {
				r, err := s.PutRevision(storetest.NewRevision("watch"))
				if err != nil {
					t.Error(err)
					return
				}
				seen <- r.Seq
			}
		})
	}
	wg.Wait()
	close(seen)
	got := map[uint64]bool{}
	for seq := range seen {
		if got[seq] || seq < 1 || seq > writers*each {
			t.Errorf("Seq %d repeated or out of range", seq)
		}
		got[seq] = true
	}
	if len(got) != writers*each {
		t.Errorf("%d distinct Seqs, want %d", len(got), writers*each)
	}
}

// TestRevisionsCheckAndReopen: a store with revisions passes Check and
// Open's verification, read-write and read-only.
func TestRevisionsCheckAndReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	s := openAt(t, path, Options{HistoryLimit: 5})
	newest := putRevisions(t, s, 8)[7]
	if err := s.Check(); err != nil {
		t.Fatalf("Check: %v", err)
	}
	mustClose(t, s)
	for _, ro := range []bool{false, true} {
		s := openAt(t, path, Options{ReadOnly: ro, HistoryLimit: 5})
		if err := s.Check(); err != nil {
			t.Errorf("Check (ReadOnly=%v): %v", ro, err)
		}
		revs, err := s.Revisions(0, 0)
		if want := []uint64{8, 7, 6, 5, 4}; err != nil || !reflect.DeepEqual(storetest.RevSeqs(revs), want) {
			t.Fatalf("Revisions (ReadOnly=%v) = %v, %v; want %v", ro, storetest.RevSeqs(revs), err, want)
		}
		if !reflect.DeepEqual(revs[0], newest) {
			t.Errorf("newest revision (ReadOnly=%v) = %+v, want %+v", ro, revs[0], newest)
		}
		mustClose(t, s)
	}
}

// TestPutRevisionReadOnly: PutRevision fails on a read-only store, as
// every writer does, and changes nothing.
func TestPutRevisionReadOnly(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	s := openAt(t, path, Options{})
	putRevisions(t, s, 1)
	mustClose(t, s)
	sum := fileSum(t, path)

	ro := openAt(t, path, Options{ReadOnly: true})
	r, err := ro.PutRevision(storetest.NewRevision("reload"))
	if !errors.Is(err, bolterrors.ErrDatabaseReadOnly) || !strings.HasPrefix(err.Error(), "store: put revision: ") {
		t.Errorf("PutRevision on a read-only store = %+v, %v", r, err)
	}
	if r.Seq != 0 {
		t.Errorf("failed PutRevision returned Seq %d", r.Seq)
	}
	if revs, err := ro.Revisions(0, 0); err != nil || !reflect.DeepEqual(storetest.RevSeqs(revs), []uint64{1}) {
		t.Errorf("Revisions = %v, %v; want [1]", storetest.RevSeqs(revs), err)
	}
	mustClose(t, ro)
	if fileSum(t, path) != sum {
		t.Error("a read-only PutRevision changed the file")
	}
}

// TestBackupRevisions: a backup holds the revisions and their counter.
func TestBackupRevisions(t *testing.T) {
	s := openTest(t, Options{})
	stored := putRevisions(t, s, 3)
	dst := filepath.Join(t.TempDir(), "backup.db")
	if err := BackupFile(s, dst); err != nil {
		t.Fatal(err)
	}
	putRevisions(t, s, 1) // after the backup: not in it

	b := openAt(t, dst, Options{})
	want := []model.ConfigRevision{stored[2], stored[1], stored[0]}
	if revs, err := b.Revisions(0, 0); err != nil || !reflect.DeepEqual(revs, want) {
		t.Errorf("Revisions of the backup = %+v, %v; want %+v", revs, err, want)
	}
	if r := putRevisions(t, b, 1)[0]; r.Seq != 4 {
		t.Errorf("next Seq in the backup = %d, want 4", r.Seq)
	}
}
