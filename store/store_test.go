package store

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/stackd/stackd/daemon/model"
	"github.com/stackd/stackd/daemon/storetest"
)

// TestMain doubles as the lock holder of TestLockHeldByAnotherProcess: with
// STORE_TEST_HOLD_LOCK=path, the test binary opens that store, prints
// "locked" and holds it until its stdin closes.
func TestMain(m *testing.M) {
	if path := os.Getenv("STORE_TEST_HOLD_LOCK"); path != "" {
		os.Exit(holdLock(path))
	}
	os.Exit(m.Run())
}

func holdLock(path string) int {
	s, err := Open(path, Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println("locked")
	_, _ = io.Copy(io.Discard, os.Stdin)
	if err := s.Close(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// openTest opens a new store in a temporary directory.
func openTest(t testing.TB, opts Options) *Store {
	t.Helper()
	return openAt(t, filepath.Join(t.TempDir(), FileName), opts)
}

// openAt opens the store at path and registers a cleanup that checks it
// (unless the test closed it already) and closes it.
func openAt(t testing.TB, path string, opts Options) *Store {
	t.Helper()
	s, err := Open(path, opts)
	if err != nil {
		t.Fatalf("Open(%s): %v", path, err)
	}
	t.Cleanup(func() {
		if err := s.Check(); err != nil && !errors.Is(err, bolterrors.ErrDatabaseNotOpen) {
			t.Errorf("Check: %v", err)
		}
		if err := s.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return s
}

func mustClose(t testing.TB, s *Store) {
	t.Helper()
	if err := s.Check(); err != nil {
		t.Fatalf("Check: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

func begin(t testing.TB, s *Store, stack string) model.Update {
	t.Helper()
	u, err := s.BeginUpdate(storetest.NewUpdate(stack))
	if err != nil {
		t.Fatalf("BeginUpdate(%s): %v", stack, err)
	}
	return u
}

func TestPersistence(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	s := openAt(t, path, Options{})
	for _, name := range []string{"web.prod", "api", "db-eu-1"} {
		if err := s.PutStack(storetest.Record(name, 3)); err != nil {
			t.Fatal(err)
		}
	}
	for range 5 {
		begin(t, s, "api")
	}
	u := begin(t, s, "db-eu-1")
	u.State, u.EndTime, u.Message = model.UpdateSucceeded, storetest.T0.Add(time.Minute), "done"
	if err := s.PutUpdate(u); err != nil {
		t.Fatal(err)
	}
	if err := s.PutLog("api-2", []byte("line 1\nline 2\n")); err != nil {
		t.Fatal(err)
	}
	if err := s.PutMeta("config_revision", []byte("r42")); err != nil {
		t.Fatal(err)
	}
	mustClose(t, s)

	s = openAt(t, path, Options{})
	checkPersisted(t, s, u)
}

func checkPersisted(t *testing.T, s *Store, dbUpdate model.Update) {
	t.Helper()
	if v, err := s.SchemaVersion(); err != nil || v != schemaVersion {
		t.Errorf("SchemaVersion = %d, %v; want %d", v, err, schemaVersion)
	}
	recs, err := s.Stacks()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range recs {
		names = append(names, r.Name)
	}
	if want := []string{"api", "db-eu-1", "web.prod"}; !reflect.DeepEqual(names, want) {
		t.Errorf("Stacks names = %v, want %v", names, want)
	}
	if rec, err := s.Stack("web.prod"); err != nil || !reflect.DeepEqual(rec, storetest.Record("web.prod", 3)) {
		t.Errorf("Stack(web.prod) = %+v, %v", rec, err)
	}
	if got, err := s.Update("db-eu-1-1"); err != nil || !reflect.DeepEqual(got, dbUpdate) {
		t.Errorf("Update(db-eu-1-1) = %+v, %v; want %+v", got, err, dbUpdate)
	}
	if log, err := s.Log("api-2"); err != nil || string(log) != "line 1\nline 2\n" {
		t.Errorf("Log(api-2) = %q, %v", log, err)
	}
	if log, err := s.Log("api-3"); err != nil || log == nil || len(log) != 0 {
		t.Errorf("Log(api-3) = %#v, %v; want empty non-nil", log, err)
	}
	if v, err := s.Meta("config_revision"); err != nil || string(v) != "r42" {
		t.Errorf("Meta = %q, %v", v, err)
	}
	checkPages(t, s)
}

func checkPages(t *testing.T, s *Store) {
	t.Helper()
	for _, tc := range []struct {
		before uint64
		limit  int
		want   []uint64
	}{
		{0, 0, []uint64{5, 4, 3, 2, 1}},
		{0, 2, []uint64{5, 4}},
		{4, 2, []uint64{3, 2}},
		{2, 2, []uint64{1}},
		{1, 2, []uint64{}},
		{99, 1, []uint64{5}},
	} {
		us, err := s.Updates("api", tc.before, tc.limit)
		if err != nil || !reflect.DeepEqual(storetest.Seqs(us), tc.want) {
			t.Errorf("Updates(api, %d, %d) = %v, %v; want %v", tc.before, tc.limit, storetest.Seqs(us), err, tc.want)
		}
	}
	if us, err := s.Updates("api", 0, 1); err == nil && us[0].ID != "api-5" {
		t.Errorf("newest ID = %q", us[0].ID)
	}
	if us, err := s.Updates("nope", 0, 0); err != nil || us == nil || len(us) != 0 {
		t.Errorf("Updates(nope) = %v, %v; want empty", us, err)
	}
}

// TestNotFound: the store's own metadata (the schema version) is not a
// Meta value; the rest of not-found is the contract's (storetest).
func TestNotFound(t *testing.T) {
	s := openTest(t, Options{})
	_, err := s.Meta("schema_version")
	storetest.WantNotFound(t, "Meta(schema_version)", err)
}

func TestRetention(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	opts := Options{HistoryLimit: 3}
	s := openAt(t, path, opts)
	for i := 1; i <= 5; i++ {
		u := begin(t, s, "a-b")
		if want := fmt.Sprintf("a-b-%d", i); u.Seq != uint64(i) || u.ID != want {
			t.Fatalf("update %d: Seq %d ID %q", i, u.Seq, u.ID)
		}
		if err := s.PutLog(u.ID, []byte(u.ID)); err != nil {
			t.Fatal(err)
		}
	}
	checkRetained(t, s)
	mustClose(t, s)

	s = openAt(t, path, opts)
	checkRetained(t, s)
	if u := begin(t, s, "a-b"); u.Seq != 6 {
		t.Errorf("next seq after reopen = %d, want 6", u.Seq)
	}
	if us, _ := s.Updates("a-b", 0, 0); !reflect.DeepEqual(storetest.Seqs(us), []uint64{6, 5, 4}) {
		t.Errorf("after 6th: %v", storetest.Seqs(us))
	}
}

func checkRetained(t *testing.T, s *Store) {
	t.Helper()
	us, err := s.Updates("a-b", 0, 0)
	if err != nil || !reflect.DeepEqual(storetest.Seqs(us), []uint64{5, 4, 3}) {
		t.Errorf("Updates = %v, %v; want [5 4 3]", storetest.Seqs(us), err)
	}
	for _, id := range []string{"a-b-1", "a-b-2"} {
		_, err := s.Log(id)
		storetest.WantNotFound(t, "Log("+id+")", err)
		storetest.WantNotFound(t, "PutLog("+id+")", s.PutLog(id, []byte("x")))
		storetest.WantNotFound(t, "PutUpdate("+id+")", s.PutUpdate(model.Update{Stack: "a-b", Seq: 1}))
	}
	err = s.view(func(tx *bbolt.Tx) error {
		n := tx.Bucket(bucketLogs).Bucket([]byte("a-b")).Stats().KeyN
		if n != 3 {
			return fmt.Errorf("%d logs stored, want 3", n)
		}
		return nil
	})
	if err != nil {
		t.Error(err)
	}
	if log, err := s.Log("a-b-3"); err != nil || string(log) != "a-b-3" {
		t.Errorf("Log(a-b-3) = %q, %v", log, err)
	}
}

// TestDeleteStack: a deleted stack's log bucket goes with it, and its
// history's bucket stays empty for the sequence; the rest of deletion is
// the contract's (storetest).
func TestDeleteStack(t *testing.T) {
	s := openTest(t, Options{})
	u := begin(t, s, "a")
	if err := s.PutLog(u.ID, []byte("log")); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteStack("a"); err != nil {
		t.Fatal(err)
	}
	err := s.view(func(tx *bbolt.Tx) error {
		if tx.Bucket(bucketLogs).Bucket([]byte("a")) != nil {
			return errors.New("logs of a still stored")
		}
		// The history's bucket stays, empty, for its sequence counter.
		if n := tx.Bucket(bucketUpdates).Bucket([]byte("a")).Stats().KeyN; n != 0 {
			return fmt.Errorf("%d updates of a still stored", n)
		}
		return nil
	})
	if err != nil {
		t.Error(err)
	}
}

func TestReadOnly(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, FileName)
	_, err := Open(missing, Options{ReadOnly: true})
	if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), missing) {
		t.Errorf("read-only open of a missing file: %v", err)
	}
	if _, err := os.Stat(missing); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("read-only open created the file: %v", err)
	}
	if err := os.WriteFile(missing, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(missing, Options{ReadOnly: true}); err == nil || !strings.Contains(err.Error(), "empty") {
		t.Errorf("read-only open of an empty file: %v", err)
	}
	if fi, _ := os.Stat(missing); fi.Size() != 0 {
		t.Errorf("read-only open wrote %d bytes", fi.Size())
	}

	path := filepath.Join(dir, "rw.db")
	s := openAt(t, path, Options{})
	if err := s.PutStack(storetest.Record("a", 1)); err != nil {
		t.Fatal(err)
	}
	mustClose(t, s)
	ro := openAt(t, path, Options{ReadOnly: true})
	if _, err := ro.Stack("a"); err != nil {
		t.Error(err)
	}
	if err := ro.PutStack(storetest.Record("b", 1)); !errors.Is(err, bolterrors.ErrDatabaseReadOnly) {
		t.Errorf("PutStack on a read-only store: %v", err)
	}
	// Readers share the lock.
	ro2 := openAt(t, path, Options{ReadOnly: true, Timeout: 100 * time.Millisecond})
	if _, err := ro2.Stacks(); err != nil {
		t.Error(err)
	}
}
