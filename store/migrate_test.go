package store

import (
	"encoding/json"
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"go.etcd.io/bbolt"

	"github.com/stackd/stackd/daemon/model"
	"github.com/stackd/stackd/daemon/storetest"
)

func TestSchemaVersion(t *testing.T) {
	if latestVersion() != schemaVersion {
		t.Errorf("last migration is to %d, schemaVersion is %d", latestVersion(), schemaVersion)
	}
	for i, m := range migrations {
		if m.to != i+1 || m.name == "" || m.fn == nil {
			t.Errorf("migrations[%d] = {%d %q}: want to = %d, a name and a function", i, m.to, m.name, i+1)
		}
	}
}

// TestBuckets: a new store holds exactly topBuckets, each created by a
// migration this build has.
func TestBuckets(t *testing.T) {
	want := map[string]bool{}
	for _, b := range topBuckets {
		want[string(b.name)] = true
		if b.since < 1 || b.since > schemaVersion {
			t.Errorf("bucket %q since version %d, outside 1..%d", b.name, b.since, schemaVersion)
		}
	}
	s := openTest(t, Options{})
	got := map[string]bool{}
	err := s.view(func(tx *bbolt.Tx) error {
		return tx.ForEach(func(name []byte, _ *bbolt.Bucket) error {
			got[string(name)] = true
			return nil
		})
	})
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("buckets of a new store = %v, %v; want %v", got, err, want)
	}
}

// atVersion runs fn with migrations cut to those up to version v: the
// stores fn opens are written as a stackd of schema version v would.
func atVersion(v int, fn func()) {
	saved := migrations
	defer func() { migrations = saved }()
	migrations = migrations[:v]
	fn()
}

// addMigration appends m to migrations for the test's duration.
func addMigration(t *testing.T, m migration) {
	saved := migrations
	migrations = append(migrations[:len(migrations):len(migrations)], m)
	t.Cleanup(func() { migrations = saved })
}

// markStacks is a fake migration to the version after this build's: it
// prefixes every stack's SpecHash with "v2:".
func markStacks(runs *int) migration {
	return migration{to: schemaVersion + 1, name: "mark stacks", fn: func(tx *bbolt.Tx) error {
		*runs++
		b := tx.Bucket(bucketStacks)
		recs := map[string]model.StackRecord{}
		err := b.ForEach(func(k, v []byte) error {
			var rec model.StackRecord
			err := json.Unmarshal(v, &rec)
			recs[string(k)] = rec
			return err
		})
		for k, rec := range recs {
			rec.SpecHash = "v2:" + rec.SpecHash
			v, _ := json.Marshal(rec)
			err = errors.Join(err, b.Put([]byte(k), v))
		}
		return err
	}}
}

// storeV1 writes a closed store of schema version 1, the first, with two
// stacks, an update of each and its log.
func storeV1(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), FileName)
	atVersion(1, func() {
		s := openAt(t, path, Options{})
		for _, name := range []string{"a", "b"} {
			if err := s.PutStack(storetest.Record(name, 1)); err != nil {
				t.Fatal(err)
			}
			u := begin(t, s, name)
			if err := s.PutLog(u.ID, []byte("log")); err != nil {
				t.Fatal(err)
			}
		}
		if v, err := s.SchemaVersion(); err != nil || v != 1 {
			t.Fatalf("SchemaVersion = %d, %v; want 1", v, err)
		}
		if hasBucket(t, s, bucketRevisions) {
			t.Fatal("a version 1 store has a revisions bucket")
		}
		mustClose(t, s)
	})
	return path
}

func hasBucket(t *testing.T, s *Store, name []byte) bool {
	t.Helper()
	has := false
	err := s.db.View(func(tx *bbolt.Tx) error {
		has = tx.Bucket(name) != nil
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return has
}

// TestMigrateV1 opens a version 1 file: Open migrates it to the current
// schema, keeping its records, and revisions work.
func TestMigrateV1(t *testing.T) {
	path := storeV1(t)
	s := openAt(t, path, Options{})
	if v, err := s.SchemaVersion(); err != nil || v != schemaVersion {
		t.Errorf("SchemaVersion = %d, %v; want %d", v, err, schemaVersion)
	}
	if revs, err := s.Revisions(0, 0); err != nil || revs == nil || len(revs) != 0 {
		t.Errorf("Revisions of a migrated store = %v, %v; want empty", revs, err)
	}
	r, err := s.PutRevision(storetest.NewRevision("start"))
	if err != nil || r.Seq != 1 {
		t.Fatalf("PutRevision = %+v, %v; want Seq 1", r, err)
	}
	if rec, err := s.Stack("a"); err != nil || rec.SpecHash != "sha256:a" {
		t.Errorf("Stack(a) = %+v, %v", rec, err)
	}
	if log, err := s.Log("b-1"); err != nil || string(log) != "log" {
		t.Errorf("Log(b-1) = %q, %v", log, err)
	}
	mustClose(t, s)

	s = openAt(t, path, Options{ReadOnly: true})
	if revs, err := s.Revisions(0, 0); err != nil || !reflect.DeepEqual(revs, []model.ConfigRevision{r}) {
		t.Errorf("Revisions after reopening = %+v, %v; want [%+v]", revs, err, r)
	}
}

func TestMigration(t *testing.T) {
	path := storeV1(t)
	runs := 0
	addMigration(t, markStacks(&runs))
	want := schemaVersion + 1
	for range 2 { // the second open finds the latest version, migrates nothing
		s := openAt(t, path, Options{})
		if v, err := s.SchemaVersion(); err != nil || v != want {
			t.Errorf("SchemaVersion = %d, %v; want %d", v, err, want)
		}
		if !hasBucket(t, s, bucketRevisions) {
			t.Error("migrating version 1 skipped the revisions bucket")
		}
		for _, name := range []string{"a", "b"} {
			rec, err := s.Stack(name)
			if err != nil || rec.SpecHash != "v2:sha256:"+name || rec.Status.Health == nil {
				t.Errorf("Stack(%s) = %+v, %v", name, rec, err)
			}
			if log, err := s.Log(name + "-1"); err != nil || string(log) != "log" {
				t.Errorf("Log(%s-1) = %q, %v", name, log, err)
			}
		}
		mustClose(t, s)
	}
	if runs != 1 {
		t.Errorf("migration ran %d times", runs)
	}
}

func TestMigrationFailureLeavesFile(t *testing.T) {
	path := storeV1(t)
	sum := fileSum(t, path)
	runs := 0
	m := markStacks(&runs)
	fn := m.fn
	m.fn = func(tx *bbolt.Tx) error {
		if err := fn(tx); err != nil {
			return err
		}
		return errors.New("boom")
	}
	addMigration(t, m)
	_, err := Open(path, Options{})
	if err == nil || !strings.Contains(err.Error(), "boom") || !strings.Contains(err.Error(), "mark stacks") {
		t.Errorf("Open with a failing migration: %v", err)
	}
	if fileSum(t, path) != sum {
		t.Errorf("a failed migration changed the file")
	}
}

// TestOldSchemaReadOnly: a read-only open does not migrate; the store
// can be checked and backed up, not read.
func TestOldSchemaReadOnly(t *testing.T) {
	path := storeV1(t)
	sum := fileSum(t, path)
	runs := 0
	addMigration(t, markStacks(&runs))
	s := openAt(t, path, Options{ReadOnly: true})
	if v, err := s.SchemaVersion(); err != nil || v != 1 {
		t.Errorf("SchemaVersion = %d, %v", v, err)
	}
	if _, err := s.Stacks(); err == nil || !strings.Contains(err.Error(), "older schema") {
		t.Errorf("Stacks on an old schema: %v", err)
	}
	if _, err := s.Revisions(0, 0); err == nil || !strings.Contains(err.Error(), "older schema") {
		t.Errorf("Revisions on an old schema: %v", err)
	}
	if _, err := s.PutRevision(storetest.NewRevision("start")); err == nil || !strings.Contains(err.Error(), "older schema") {
		t.Errorf("PutRevision on an old schema: %v", err)
	}
	if err := BackupFile(s, filepath.Join(t.TempDir(), "backup.db")); err != nil {
		t.Error(err)
	}
	if runs != 0 || fileSum(t, path) != sum {
		t.Errorf("read-only open migrated (%d runs) or changed the file", runs)
	}
}

func TestNewerSchemaRefused(t *testing.T) {
	path := storeV1(t)
	db, err := bbolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bbolt.Tx) error {
		return tx.Bucket(bucketMeta).Put(keySchemaVersion, []byte("99"))
	})
	if err := errors.Join(err, db.Close()); err != nil {
		t.Fatal(err)
	}
	sum := fileSum(t, path)
	for _, ro := range []bool{false, true} {
		_, err := Open(path, Options{ReadOnly: ro})
		if err == nil || !strings.Contains(err.Error(), "newer stackd") || !strings.Contains(err.Error(), path) {
			t.Errorf("Open(ReadOnly=%v) of a version 99 file: %v", ro, err)
		}
		if fileSum(t, path) != sum {
			t.Fatalf("Open(ReadOnly=%v) changed a newer file", ro)
		}
	}
}
