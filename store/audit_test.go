package store

import (
	"encoding/json"
	"errors"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/stackd/stackd/daemon/access"
	"github.com/stackd/stackd/daemon/audit"
	"github.com/stackd/stackd/daemon/model"
	"github.com/stackd/stackd/daemon/storetest"
)

// putAudit appends n entries, a minute apart from T0 on, and returns
// them as stored.
func putAudit(t testing.TB, s *Store, n int) []model.AuditEntry {
	t.Helper()
	var out []model.AuditEntry
	for i := range n {
		e, err := s.PutAudit(storetest.NewAuditEntry("alice", access.ActionSync, "web", i))
		if err != nil {
			t.Fatalf("PutAudit: %v", err)
		}
		out = append(out, e)
	}
	return out
}

// TestMigrateV2Audit: a file of schema version 2, the last without an
// audit bucket, gets one at Open, and keeps its revisions.
func TestMigrateV2Audit(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	var rev model.ConfigRevision
	atVersion(2, func() {
		s := openAt(t, path, Options{})
		rev = putRevisions(t, s, 1)[0]
		if hasBucket(t, s, bucketAudit) {
			t.Fatal("a version 2 store has an audit bucket")
		}
		mustClose(t, s)
	})
	s := openAt(t, path, Options{})
	if v, err := s.SchemaVersion(); err != nil || v != schemaVersion {
		t.Errorf("SchemaVersion = %d, %v; want %d", v, err, schemaVersion)
	}
	if es, err := s.Audit(audit.Filter{}); err != nil || len(es) != 0 {
		t.Errorf("Audit of a migrated store = %v, %v; want empty", es, err)
	}
	if e := putAudit(t, s, 1)[0]; e.Seq != 1 {
		t.Errorf("first entry of a migrated store has Seq %d", e.Seq)
	}
	if revs, err := s.Revisions(0, 0); err != nil || !reflect.DeepEqual(revs, []model.ConfigRevision{rev}) {
		t.Errorf("Revisions after migration = %+v, %v; want [%+v]", revs, err, rev)
	}
}

// TestAuditReopen: the trail survives a restart, passes Check and Open's
// verification, and reads (not writes) on a read-only store.
func TestAuditReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), FileName)
	s := openAt(t, path, Options{})
	stored := putAudit(t, s, 5)
	mustClose(t, s)
	sum := fileSum(t, path)

	ro := openAt(t, path, Options{ReadOnly: true})
	es, err := ro.Audit(audit.Filter{Limit: 2})
	if want := []model.AuditEntry{stored[4], stored[3]}; err != nil || !reflect.DeepEqual(es, want) {
		t.Errorf("Audit of a reopened store = %+v, %v; want %+v", es, err, want)
	}
	if _, err := ro.PutAudit(stored[0]); !errors.Is(err, bolterrors.ErrDatabaseReadOnly) || !strings.HasPrefix(err.Error(), "store: put audit entry: ") {
		t.Errorf("PutAudit on a read-only store: %v", err)
	}
	if n, err := ro.PruneAudit(time.Now()); !errors.Is(err, bolterrors.ErrDatabaseReadOnly) || n != 0 {
		t.Errorf("PruneAudit on a read-only store = %d, %v", n, err)
	}
	mustClose(t, ro)
	if fileSum(t, path) != sum {
		t.Error("a read-only store changed the file")
	}

	s = openAt(t, path, Options{})
	if e := putAudit(t, s, 1)[0]; e.Seq != 6 {
		t.Errorf("next Seq after reopening = %d, want 6", e.Seq)
	}
}

// TestBackupAudit: a backup holds the trail and its counter.
func TestBackupAudit(t *testing.T) {
	s := openTest(t, Options{})
	stored := putAudit(t, s, 3)
	dst := filepath.Join(t.TempDir(), "backup.db")
	if err := BackupFile(s, dst); err != nil {
		t.Fatal(err)
	}
	putAudit(t, s, 1) // after the backup: not in it

	b := openAt(t, dst, Options{})
	want := []model.AuditEntry{stored[2], stored[1], stored[0]}
	if es, err := b.Audit(audit.Filter{}); err != nil || !reflect.DeepEqual(es, want) {
		t.Errorf("Audit of the backup = %+v, %v; want %+v", es, err, want)
	}
	if e := putAudit(t, b, 1)[0]; e.Seq != 4 {
		t.Errorf("next Seq in the backup = %d, want 4", e.Seq)
	}
}

// TestPruneAuditBatches: a prune of more entries than one transaction
// deletes goes on in the next ones, and counts them all.
func TestPruneAuditBatches(t *testing.T) {
	s := openTest(t, Options{})
	const n = pruneBatch*2 + 5
	err := s.update(func(tx *bbolt.Tx) error { // one transaction: fast
		b := tx.Bucket(bucketAudit)
		for i := range n + 3 {
			seq, _ := b.NextSequence()
			e := storetest.NewAuditEntry("ci", "sync", "web", i)
			e.Seq = seq
			v, _ := json.Marshal(e)
			if err := b.Put(seqKey(seq), v); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	got, err := s.PruneAudit(storetest.T0.Add(n * time.Minute))
	if err != nil || got != n {
		t.Errorf("PruneAudit = %d, %v; want %d", got, err, n)
	}
	es, err := s.Audit(audit.Filter{})
	if want := []uint64{n + 3, n + 2, n + 1}; err != nil || !reflect.DeepEqual(storetest.AuditSeqs(es), want) {
		t.Errorf("Audit after pruning = %v, %v; want %v", storetest.AuditSeqs(es), err, want)
	}
}

// TestPruneAuditClockStep: PruneAudit stops at the first entry that is
// not older, even if an older one follows (the clock stepped back); a
// later prune takes it. Audit with Since scans on past a step of less
// than audit.Slack.
func TestPruneAuditClockStep(t *testing.T) {
	s := openTest(t, Options{})
	at := func(d time.Duration) time.Time { return storetest.T0.Add(d) }
	// seq 3 was recorded after the clock went back 30s
	for _, d := range []time.Duration{0, 300 * time.Minute, 299*time.Minute + 30*time.Second, 301 * time.Minute} {
		e := storetest.NewAuditEntry("ci", "sync", "web", 0)
		e.Time = at(d)
		if _, err := s.PutAudit(e); err != nil {
			t.Fatal(err)
		}
	}
	since := at(299*time.Minute + 45*time.Second)
	es, err := s.Audit(audit.Filter{Since: since})
	if err != nil || !reflect.DeepEqual(storetest.AuditSeqs(es), []uint64{4, 2}) {
		t.Errorf("Audit(Since T0+299m45s) = %v, %v; want [4 2]", storetest.AuditSeqs(es), err)
	}
	if n, err := s.PruneAudit(since); err != nil || n != 1 {
		t.Errorf("PruneAudit(T0+299m45s) = %d, %v; want 1", n, err)
	}
	if es, _ := s.Audit(audit.Filter{}); !reflect.DeepEqual(storetest.AuditSeqs(es), []uint64{4, 3, 2}) {
		t.Errorf("Audit after pruning = %v, want [4 3 2]", storetest.AuditSeqs(es))
	}
	if n, err := s.PruneAudit(at(6 * time.Hour)); err != nil || n != 3 {
		t.Errorf("PruneAudit(T0+6h) = %d, %v; want 3", n, err)
	}
}
