package store

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stackd/stackd/daemon/storetest"
)

func BenchmarkPutStack(b *testing.B) {
	s := openTest(b, Options{})
	rec := storetest.Record("bench", 1)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		rec.Name = fmt.Sprintf("stack-%d", i%100)
		if err := s.PutStack(rec); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBeginUpdate appends to one stack's history, past the default
// HistoryLimit, so most iterations also prune one update and its log.
func BenchmarkBeginUpdate(b *testing.B) {
	s := openTest(b, Options{})
	b.ReportAllocs()
	for b.Loop() {
		u, err := s.BeginUpdate(storetest.NewUpdate("bench"))
		if err != nil {
			b.Fatal(err)
		}
		if u.Seq == 1 || u.Seq%10 == 0 {
			if err := s.PutLog(u.ID, []byte("log")); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkPutRevision appends past the default HistoryLimit, so most
// iterations also prune one revision.
func BenchmarkPutRevision(b *testing.B) {
	s := openTest(b, Options{})
	r := storetest.NewRevision("git")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.PutRevision(r); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkOpen measures Open's consistency pass (see verify) on stores of
// growing size: stacks × updates per stack, log bytes per update.
func BenchmarkOpen(b *testing.B) {
	for _, size := range []struct{ stacks, updates, logBytes int }{
		{0, 0, 0},
		{50, 100, 4 << 10},
		{500, 100, 1 << 10},
		{10, 100, 256 << 10},
	} {
		name := fmt.Sprintf("%dx%d-%dKiB", size.stacks, size.updates, size.logBytes>>10)
		b.Run(name, func(b *testing.B) {
			path := filepath.Join(b.TempDir(), FileName)
			fillStore(b, path, size.stacks, size.updates, size.logBytes)
			for b.Loop() {
				s, err := Open(path, Options{ReadOnly: true})
				if err != nil {
					b.Fatal(err)
				}
				if err := s.Close(); err != nil {
					b.Fatal(err)
				}
			}
			if fi, err := os.Stat(path); err == nil {
				b.ReportMetric(float64(fi.Size())/(1<<20), "MiB")
			}
		})
	}
}

func fillStore(b *testing.B, path string, stacks, updates, logBytes int) {
	s, err := Open(path, Options{})
	if err != nil {
		b.Fatal(err)
	}
	s.db.NoSync = true // a fixture: no need to wait for the disk
	log := bytes.Repeat([]byte("a log line of some length\n"), logBytes/26+1)[:logBytes]
	for i := range stacks {
		name := fmt.Sprintf("stack-%d", i)
		if err := s.PutStack(storetest.Record(name, 1)); err != nil {
			b.Fatal(err)
		}
		for range updates {
			u, err := s.BeginUpdate(storetest.NewUpdate(name))
			if err == nil {
				err = s.PutLog(u.ID, log)
			}
			if err != nil {
				b.Fatal(err)
			}
		}
	}
	s.db.NoSync = false
	if err := s.db.Sync(); err != nil {
		b.Fatal(err)
	}
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
}
