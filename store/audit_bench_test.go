package store

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"go.etcd.io/bbolt"

	"github.com/stackd/stackd/daemon/access"
	"github.com/stackd/stackd/daemon/storetest"
)

// BenchmarkPutAudit appends entries one by one, each in its own
// transaction synced to disk, as the web server records requests.
func BenchmarkPutAudit(b *testing.B) {
	s := openTest(b, Options{})
	e := storetest.NewAuditEntry("alice", access.ActionSync, "web", 0)
	b.ReportAllocs()
	start := time.Now()
	for b.Loop() {
		if _, err := s.PutAudit(e); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "entries/s")
}

// auditTrailSize is the trail the read benchmarks search: 90 days of an
// entry every 78 s.
const auditTrailSize = 100_000

// fillAudit writes n entries, a second apart from T0 on, over 50 stacks
// and 20 actors, in batches.
func fillAudit(b *testing.B, s *Store, n int) {
	b.Helper()
	for done := 0; done < n; {
		err := s.update(func(tx *bbolt.Tx) error {
			bk := tx.Bucket(bucketAudit)
			for end := min(n, done+10000); done < end; done++ {
				e := storetest.NewAuditEntry(fmt.Sprintf("user%d", done%20), access.ActionSync, fmt.Sprintf("stack-%d", done%50), 0)
				e.Time = storetest.T0.Add(time.Duration(done) * time.Second)
				var err error
				if e.Seq, err = bk.NextSequence(); err != nil {
					return err
				}
				v, _ := json.Marshal(e)
				if err := bk.Put(seqKey(e.Seq), v); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAuditFilter reads the first page of a filter over a trail of
// 100 000 entries: one that matches often (the newest page of every
// entry, of one stack), one that matches rarely (a stack and an actor:
// every 100th entry), one that matches nothing (every entry is read),
// and a recent Since that ends the scan early.
func BenchmarkAuditFilter(b *testing.B) {
	s := openTest(b, Options{})
	fillAudit(b, s, auditTrailSize)
	storetest.BenchAuditFilter(b, s, storetest.T0.Add(auditTrailSize*time.Second))
}

// BenchmarkOpenAudit measures Open's consistency pass over a store whose
// only content is a trail of 100 000 entries.
func BenchmarkOpenAudit(b *testing.B) {
	path := filepath.Join(b.TempDir(), FileName)
	s := openAt(b, path, Options{})
	fillAudit(b, s, auditTrailSize)
	mustClose(b, s)
	for b.Loop() {
		s, err := Open(path, Options{ReadOnly: true})
		if err != nil {
			b.Fatal(err)
		}
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPruneAudit deletes a day of a trail of an entry a second: the
// hourly prune's work at a high rate of requests.
func BenchmarkPruneAudit(b *testing.B) {
	for b.Loop() {
		b.StopTimer()
		s := openTest(b, Options{})
		fillAudit(b, s, 2*86400)
		b.StartTimer()
		n, err := s.PruneAudit(storetest.T0.Add(24 * time.Hour))
		if err != nil || n != 86400 {
			b.Fatalf("PruneAudit = %d, %v", n, err)
		}
	}
}
