package storetest

import (
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/stackd/stackd/daemon/access"
	"github.com/stackd/stackd/daemon/audit"
	"github.com/stackd/stackd/daemon/model"
)

// RunAudit runs the contract of audit.Log against the stores from
// open, which must implement it. Run runs it too.
func RunAudit(t *testing.T, open Factory) {
	for _, tc := range []struct {
		name string
		fn   func(*testing.T, audit.Log)
	}{
		{"Append", testAuditAppend},
		{"Filter", testAuditFilter},
		{"Pages", testAuditPages},
		{"DefaultLimit", testAuditDefaultLimit},
		{"Prune", testAuditPrune},
		{"Concurrent", testAuditConcurrent},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, _ := open(t, Limits{})
			a, ok := s.(audit.Log)
			if !ok {
				t.Fatalf("%T does not implement audit.Log", s)
			}
			tc.fn(t, a)
		})
	}
}

// NewAuditEntry is an entry of the trail with every field set: actor
// did action on stack at T0 plus minutes.
func NewAuditEntry(actor, action, stack string, minutes int) model.AuditEntry {
	return model.AuditEntry{
		Time: T0.Add(time.Duration(minutes) * time.Minute),
		Principal: model.Principal{Kind: model.PrincipalUser, Name: actor, Subject: "sub-" + actor,
			Groups: []string{"platform", "oncall"}},
		Action: action, Stack: stack,
		Method: "POST", Path: "/api/v1/stacks/" + stack + "/" + action,
		Remote: "192.0.2.7:51234", Outcome: model.AuditDenied, Status: 403,
		Reason: `user "` + actor + `" may not ` + action + " stack " + stack, Node: "node-1",
	}
}

// AuditSeqs lists the entries' sequence numbers.
func AuditSeqs(es []model.AuditEntry) []uint64 {
	out := []uint64{}
	for _, e := range es {
		out = append(out, e.Seq)
	}
	return out
}

// putAudit appends es and returns them as stored.
func putAudit(t *testing.T, a audit.Log, es ...model.AuditEntry) []model.AuditEntry {
	t.Helper()
	out := make([]model.AuditEntry, 0, len(es))
	for _, e := range es {
		got, err := a.PutAudit(e)
		if err != nil {
			t.Fatalf("PutAudit: %v", err)
		}
		out = append(out, got)
	}
	return out
}

func wantAudit(t *testing.T, a audit.Log, f audit.Filter, want []uint64) []model.AuditEntry {
	t.Helper()
	got, err := a.Audit(f)
	if err != nil || !reflect.DeepEqual(AuditSeqs(got), want) {
		t.Errorf("Audit(%+v) = %v, %v; want %v", f, AuditSeqs(got), err, want)
	}
	return got
}

// testAuditAppend: entries get increasing Seqs, read back newest first
// exactly as they were put; a zero time is set to now.
func testAuditAppend(t *testing.T, a audit.Log) {
	if got, err := a.Audit(audit.Filter{}); err != nil || got == nil || len(got) != 0 {
		t.Errorf("Audit of a new store = %#v, %v; want empty non-nil", got, err)
	}
	in := NewAuditEntry("alice", access.ActionSync, "web", 0)
	in.Seq = 42 // ignored: the store assigns it
	got, err := a.PutAudit(in)
	want := in
	want.Seq = 1
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("PutAudit = %+v, %v; want %+v", got, err, want)
	}
	token := model.AuditEntry{Time: T0.Add(time.Second), Principal: model.Principal{Kind: model.PrincipalToken, Name: "ci"},
		Action: access.ActionReload, Outcome: model.AuditAllowed, Status: 202}
	stored := putAudit(t, a, token)
	if stored[0].Seq <= want.Seq {
		t.Errorf("second entry has Seq %d, not above %d", stored[0].Seq, want.Seq)
	}
	entries := wantAudit(t, a, audit.Filter{}, []uint64{stored[0].Seq, 1})
	if len(entries) == 2 && (!reflect.DeepEqual(entries[1], want) || !reflect.DeepEqual(entries[0], stored[0])) {
		t.Errorf("entries read back = %+v\nwant %+v", entries, []model.AuditEntry{stored[0], want})
	}

	before := time.Now()
	now, err := a.PutAudit(model.AuditEntry{Principal: model.Principal{Kind: model.PrincipalAnonymous},
		Action: "sign-in", Outcome: model.AuditUnauthenticated, Status: 401})
	if err != nil || now.Time.Before(before) || now.Time.After(time.Now()) {
		t.Errorf("PutAudit without a time = %+v, %v; want the time set to now", now, err)
	}
	if es, _ := a.Audit(audit.Filter{Limit: 1}); len(es) != 1 || !es[0].Time.Equal(now.Time) {
		t.Errorf("newest entry = %+v, want time %v", es, now.Time)
	}
}

// testAuditFilter: the filter's stack, actor and since select entries,
// together or alone, newest first.
func testAuditFilter(t *testing.T, a audit.Log) {
	putAudit(t, a,
		NewAuditEntry("alice", access.ActionSync, "web", 0),   // 1
		NewAuditEntry("ci", access.ActionSync, "web", 1),      // 2
		NewAuditEntry("alice", access.ActionPause, "api", 2),  // 3
		NewAuditEntry("bob", access.ActionSync, "web", 3),     // 4
		NewAuditEntry("ci", access.ActionCancel, "api", 4),    // 5
		NewAuditEntry("alice", access.ActionReload, "", 5),    // 6
		NewAuditEntry("alice", access.ActionSync, "web2", 6),  // 7
		NewAuditEntry("alicia", access.ActionSync, "web", 7),  // 8
		NewAuditEntry("ci", access.ActionSync, "web", 8),      // 9
		NewAuditEntry("alice", access.ActionSync, "web", 120), // 10
	)
	for _, tc := range []struct {
		f    audit.Filter
		want []uint64
	}{
		{audit.Filter{}, []uint64{10, 9, 8, 7, 6, 5, 4, 3, 2, 1}},
		{audit.Filter{Stack: "web"}, []uint64{10, 9, 8, 4, 2, 1}},
		{audit.Filter{Stack: "api"}, []uint64{5, 3}},
		{audit.Filter{Stack: "we"}, []uint64{}},
		{audit.Filter{Actor: "alice"}, []uint64{10, 7, 6, 3, 1}},
		{audit.Filter{Actor: "ci", Stack: "api"}, []uint64{5}},
		{audit.Filter{Since: T0.Add(4 * time.Minute)}, []uint64{10, 9, 8, 7, 6, 5}},
		{audit.Filter{Since: T0.Add(4*time.Minute + time.Second)}, []uint64{10, 9, 8, 7, 6}},
		{audit.Filter{Since: T0.Add(time.Hour)}, []uint64{10}},
		{audit.Filter{Since: T0.Add(3 * time.Hour)}, []uint64{}},
		{audit.Filter{Since: T0.Add(-time.Hour), Stack: "web", Actor: "ci"}, []uint64{9, 2}},
		{audit.Filter{Stack: "web", Limit: 2}, []uint64{10, 9}},
		{audit.Filter{Stack: "web", Before: 9, Limit: 2}, []uint64{8, 4}},
		{audit.Filter{Actor: "nobody"}, []uint64{}},
	} {
		wantAudit(t, a, tc.f, tc.want)
	}
}

// testAuditPages: Before and Limit page through the trail, with and
// without a filter, each entry once.
func testAuditPages(t *testing.T, a audit.Log) {
	const n = 30
	for i := range n {
		stack := "even"
		if i%2 == 1 {
			stack = "odd"
		}
		putAudit(t, a, NewAuditEntry("alice", access.ActionSync, stack, i))
	}
	for _, tc := range []struct {
		before uint64
		limit  int
		want   []uint64
	}{
		{0, 3, []uint64{30, 29, 28}},
		{28, 3, []uint64{27, 26, 25}},
		{3, 5, []uint64{2, 1}},
		{1, 5, []uint64{}},
		{99, 2, []uint64{30, 29}},
	} {
		wantAudit(t, a, audit.Filter{Before: tc.before, Limit: tc.limit}, tc.want)
	}
	for _, f := range []audit.Filter{{Limit: 7}, {Stack: "odd", Limit: 4}, {Stack: "even", Limit: 1}} {
		var seen []uint64
		for page := 0; ; page++ {
			if page > n {
				t.Fatalf("paging %+v does not end", f)
			}
			es, err := a.Audit(f)
			if err != nil {
				t.Fatal(err)
			}
			if len(es) > f.Limit {
				t.Fatalf("Audit(%+v) returned %d entries", f, len(es))
			}
			if len(es) == 0 {
				break
			}
			seen = append(seen, AuditSeqs(es)...)
			f.Before = es[len(es)-1].Seq
		}
		var want []uint64
		for seq := uint64(n); seq >= 1; seq-- {
			if f.Stack == "" || (f.Stack == "odd") == (seq%2 == 0) { // entry i has seq i+1
				want = append(want, seq)
			}
		}
		if !reflect.DeepEqual(seen, want) {
			t.Errorf("pages of %+v = %v, want %v", f, seen, want)
		}
	}
}

// testAuditDefaultLimit: a Limit of 0 or less returns 100 entries.
func testAuditDefaultLimit(t *testing.T, a audit.Log) {
	for i := range 105 {
		putAudit(t, a, NewAuditEntry("ci", access.ActionSync, "web", i))
	}
	for _, limit := range []int{0, -1} {
		es, err := a.Audit(audit.Filter{Limit: limit})
		if err != nil || len(es) != 100 || es[0].Seq != 105 || es[99].Seq != 6 {
			t.Errorf("Audit(Limit %d) = %d entries (%v), %v; want 105 down to 6", limit, len(es), AuditSeqs(es), err)
		}
	}
}

// testAuditPrune: PruneAudit deletes exactly the entries older than its
// time and counts them; Seqs are not reused after.
func testAuditPrune(t *testing.T, a audit.Log) {
	if n, err := a.PruneAudit(T0.Add(time.Hour)); err != nil || n != 0 {
		t.Errorf("PruneAudit of an empty trail = %d, %v", n, err)
	}
	for i := range 6 {
		putAudit(t, a, NewAuditEntry("ci", access.ActionSync, "web", 60*i)) // T0, T0+1h, … T0+5h
	}
	if n, err := a.PruneAudit(T0.Add(2 * time.Hour)); err != nil || n != 2 {
		t.Errorf("PruneAudit(T0+2h) = %d, %v; want 2", n, err)
	}
	wantAudit(t, a, audit.Filter{}, []uint64{6, 5, 4, 3})
	if n, err := a.PruneAudit(T0.Add(2 * time.Hour)); err != nil || n != 0 {
		t.Errorf("PruneAudit(T0+2h) again = %d, %v; want 0", n, err)
	}
	if n, err := a.PruneAudit(T0.Add(2*time.Hour + time.Nanosecond)); err != nil || n != 1 {
		t.Errorf("PruneAudit(T0+2h+1ns) = %d, %v; want 1 (entry 3, at T0+2h)", n, err)
	}
	if e := putAudit(t, a, NewAuditEntry("ci", access.ActionSync, "web", 600))[0]; e.Seq <= 6 {
		t.Errorf("entry after pruning has Seq %d, want above 6", e.Seq)
	}
	if n, err := a.PruneAudit(T0.Add(100 * time.Hour)); err != nil || n != 4 {
		t.Errorf("PruneAudit(T0+100h) = %d, %v; want 4", n, err)
	}
	wantAudit(t, a, audit.Filter{}, []uint64{})
}

// testAuditConcurrent: entries appended at once get distinct Seqs, with
// none lost.
func testAuditConcurrent(t *testing.T, a audit.Log) {
	var wg sync.WaitGroup
	var mu sync.Mutex
	got := map[uint64]bool{}
	for g := range 8 {
		wg.Go(func() {
			for i := range 5 {
				e, err := a.PutAudit(NewAuditEntry(fmt.Sprintf("user%d", g), access.ActionSync, "web", i))
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				got[e.Seq] = true
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(got) != 40 {
		t.Errorf("40 entries got %d distinct Seqs", len(got))
	}
	es, err := a.Audit(audit.Filter{Limit: 100})
	if err != nil || len(es) != 40 {
		t.Fatalf("Audit = %d entries, %v; want 40", len(es), err)
	}
	for i, e := range es {
		if !got[e.Seq] || (i > 0 && e.Seq >= es[i-1].Seq) {
			t.Errorf("entry %d has Seq %d: unknown, or not below the one before", i, e.Seq)
		}
	}
}
