package main

import (
	"bytes"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stackd/stackd/daemon/access"
	"github.com/stackd/stackd/daemon/audit"
	"github.com/stackd/stackd/daemon/model"
	"github.com/stackd/stackd/daemon/storetest"
	"github.com/stackd/stackd/store"
)

func TestRetentionFlag(t *testing.T) {
	for _, c := range []struct {
		in   string
		want time.Duration
		text string
		bad  bool
	}{
		{in: "90d", want: 90 * 24 * time.Hour, text: "90d"},
		{in: "2160h", want: 90 * 24 * time.Hour, text: "90d"},
		{in: "36h", want: 36 * time.Hour, text: "36h0m0s"},
		{in: "0", want: 0, text: "0s"},
		{in: "0d", want: 0, text: "0s"},
		{in: " 7d ", want: 7 * 24 * time.Hour, text: "7d"},
		{in: "1.5d", bad: true},
		{in: "-1h", bad: true},
		{in: "-1d", bad: true},
		{in: "d", bad: true},
		{in: "99999999d", bad: true},
		{in: "forever", bad: true},
		{in: "", bad: true},
	} {
		var r retention
		err := r.Set(c.in)
		if c.bad {
			if err == nil {
				t.Errorf("%q: want an error, got %v", c.in, time.Duration(r))
			}
			continue
		}
		if err != nil || time.Duration(r) != c.want || r.String() != c.text {
			t.Errorf("%q: got %v %q %v, want %v %q", c.in, time.Duration(r), r.String(), err, c.want, c.text)
		}
	}
}

// TestAuditRetentionFlag: 90 days unless the flag or its environment
// variable says otherwise.
func TestAuditRetentionFlag(t *testing.T) {
	parse := func(args ...string) (runFlags, error) {
		var f runFlags
		fs := newFlagSet("run")
		f.define(fs)
		return f, parseFlags(fs, "run", args, &bytes.Buffer{})
	}
	if f, err := parse(); err != nil || time.Duration(f.auditRetention) != 2160*time.Hour {
		t.Errorf("default --audit-retention = %v, %v; want 2160h", time.Duration(f.auditRetention), err)
	}
	if f, err := parse("--audit-retention", "30d"); err != nil || time.Duration(f.auditRetention) != 720*time.Hour {
		t.Errorf("--audit-retention 30d = %v, %v", time.Duration(f.auditRetention), err)
	}
	t.Setenv("STACKD_AUDIT_RETENTION", "0")
	if f, err := parse(); err != nil || f.auditRetention != 0 {
		t.Errorf("STACKD_AUDIT_RETENTION=0: %v, %v", time.Duration(f.auditRetention), err)
	}
	if _, err := parse("--audit-retention", "-5d"); err == nil || !strings.Contains(err.Error(), "audit-retention") {
		t.Errorf("--audit-retention -5d: %v", err)
	}
}

// openTrail opens a BoltDB store in a temporary data dir with entries
// of the given ages.
func openTrail(t *testing.T, ages ...time.Duration) *store.Store {
	t.Helper()
	st, err := store.Open(filepath.Join(t.TempDir(), store.FileName), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, age := range ages {
		e := storetest.NewAuditEntry("alice", access.ActionSync, "app", 0)
		e.Time = time.Now().Add(-age)
		if _, err := st.PutAudit(e); err != nil {
			t.Fatal(err)
		}
	}
	return st
}

func trailLen(t *testing.T, st *store.Store) int {
	t.Helper()
	es, err := st.Audit(audit.Filter{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	return len(es)
}

// TestPruneAuditAtStart: stackd run deletes the entries older than
// --audit-retention as it starts, logs how many, and stops pruning before
// the store closes.
func TestPruneAuditAtStart(t *testing.T) {
	const day = 24 * time.Hour
	st := openTrail(t, 400*day, 91*day, 89*day, time.Hour)
	var f auditFlags
	fs := newFlagSet("run")
	f.define(fs)
	var logs syncBuffer
	closeStore := f.pruneAudit(st, st.Close, slog.New(slog.NewTextHandler(&logs, nil)))
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(logs.String(), "pruned the audit trail") && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := trailLen(t, st); n != 2 {
		t.Errorf("%d entries after the first prune, want 2", n)
	}
	if out := logs.String(); !strings.Contains(out, "entries=2") || !strings.Contains(out, "retention=90d") {
		t.Errorf("log of the prune: %s", out)
	}
	if err := closeStore(); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Audit(audit.Filter{}); err == nil {
		t.Error("the store is still open after closeStore")
	}
}

// TestPruneAuditForever: with --audit-retention 0 nothing is pruned.
func TestPruneAuditForever(t *testing.T) {
	st := openTrail(t, 10000*24*time.Hour)
	defer st.Close()
	var f auditFlags
	fs := newFlagSet("run")
	f.define(fs)
	if err := fs.Parse([]string{"--audit-retention", "0"}); err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	closeStore := f.pruneAudit(st, func() error { return nil }, slog.New(slog.NewTextHandler(&logs, nil)))
	if err := closeStore(); err != nil {
		t.Fatal(err)
	}
	if n := trailLen(t, st); n != 1 || logs.String() != "" {
		t.Errorf("%d entries, log %q; want 1 and no log", n, logs.String())
	}
}

// TestPrunerPeriodic: the pruner prunes again every period, as entries
// age past the retention; stop waits for it.
func TestPrunerPeriodic(t *testing.T) {
	st := openTrail(t)
	defer st.Close()
	var mu sync.Mutex
	clock := time.Now()
	now := func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	if _, err := st.PutAudit(model.AuditEntry{Time: clock, Action: access.ActionSync, Outcome: model.AuditAllowed}); err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	stop := startPruner(st, time.Hour, 10*time.Millisecond, now, slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	defer stop()
	time.Sleep(50 * time.Millisecond)
	if n := trailLen(t, st); n != 1 {
		t.Fatalf("an entry younger than the retention was pruned (%d left)", n)
	}
	mu.Lock()
	clock = clock.Add(2 * time.Hour) // the entry is now past the retention
	mu.Unlock()
	deadline := time.Now().Add(10 * time.Second)
	for trailLen(t, st) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the entry was not pruned; log: %s", logs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	stop()
	if out := logs.String(); !strings.Contains(out, "nothing to prune") || !strings.Contains(out, "entries=1") {
		t.Errorf("log: %s", out)
	}
}
