package daemon

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
)

// scanEntries runs a scan of f over es, stored newest first as the
// stores store them; it returns the Seqs selected and how many entries
// were offered before the scan ended.
func scanEntries(t *testing.T, f AuditFilter, es []AuditEntry) ([]uint64, int) {
	t.Helper()
	s := NewAuditScan(f)
	offered := 0
	for i := len(es) - 1; i >= 0; i-- {
		v, err := json.Marshal(es[i])
		if err != nil {
			t.Fatal(err)
		}
		offered++
		more, err := s.Add(v)
		if err != nil {
			t.Fatal(err)
		}
		if !more {
			break
		}
	}
	seqs := []uint64{}
	for _, e := range s.Entries {
		seqs = append(seqs, e.Seq)
	}
	return seqs, offered
}

func TestAuditScan(t *testing.T) {
	t0 := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	at := func(seq uint64, minutes float64, actor, stack string) AuditEntry {
		return AuditEntry{Seq: seq, Time: t0.Add(time.Duration(minutes * float64(time.Minute))),
			Principal: Principal{Kind: PrincipalUser, Name: actor, Groups: []string{"web"}}, Action: ActionSync, Stack: stack,
			Path: "/api/v1/stacks/" + stack + "/sync", Outcome: AuditAllowed, Reason: `"name":"bob" "stack":"api"`}
	}
	es := []AuditEntry{
		at(1, 0, "alice", "web"),
		at(2, 1, "bob", "web2"),
		at(3, 2, `o"brien <&>`, "api"),
		at(4, 3, "bob", "a<b>&c"),
		at(5, 2.5, "alice", "web"), // the clock went back 30s
		at(6, 10, "álvaro", "web"),
		at(7, 11, "", ""),
	}
	for _, tc := range []struct {
		name    string
		f       AuditFilter
		want    []uint64
		offered int
	}{
		{"all", AuditFilter{}, []uint64{7, 6, 5, 4, 3, 2, 1}, 7},
		{"limit", AuditFilter{Limit: 2}, []uint64{7, 6}, 2},
		{"stack, not a prefix of another", AuditFilter{Stack: "web"}, []uint64{6, 5, 1}, 7},
		{"stack escaped by json", AuditFilter{Stack: "a<b>&c"}, []uint64{4}, 7},
		{"actor escaped by json", AuditFilter{Actor: `o"brien <&>`}, []uint64{3}, 7},
		{"actor not unicode-folded", AuditFilter{Actor: "alvaro"}, []uint64{}, 7},
		{"actor unicode", AuditFilter{Actor: "álvaro"}, []uint64{6}, 7},
		{"a reason quoting fields matches nothing", AuditFilter{Actor: "bob", Stack: "api"}, []uint64{}, 7},
		{"stack and actor", AuditFilter{Actor: "bob", Stack: "web2"}, []uint64{2}, 7},
		{"before", AuditFilter{Before: 5, Limit: 2}, []uint64{4, 3}, 5},
		{"since", AuditFilter{Since: t0.Add(2 * time.Minute)}, []uint64{7, 6, 5, 4, 3}, 7},
		// Entries 5 and 3 are older than Since but within the slack; entry 2
		// (t0+1m) is past it.
		{"since scans past a step of the clock", AuditFilter{Since: t0.Add(165 * time.Second)}, []uint64{7, 6, 4}, 6},
		{"since stops early", AuditFilter{Since: t0.Add(10 * time.Minute)}, []uint64{7, 6}, 3},
		{"since stops early without a match", AuditFilter{Since: t0.Add(10 * time.Minute), Stack: "none"}, []uint64{}, 3},
		{"since past everything", AuditFilter{Since: t0.Add(time.Hour)}, []uint64{}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, offered := scanEntries(t, tc.f, es)
			if !reflect.DeepEqual(got, tc.want) || offered != tc.offered {
				t.Errorf("scan of %+v = %v after %d entries; want %v after %d", tc.f, got, offered, tc.want, tc.offered)
			}
		})
	}
}

func TestAuditScanLimit(t *testing.T) {
	for _, tc := range []struct{ in, want int }{
		{0, AuditPageDefault}, {-5, AuditPageDefault}, {1, 1}, {1001, 1001},
		{AuditPageMax, AuditPageMax}, {AuditPageMax + 1, AuditPageMax}, {1 << 40, AuditPageMax},
	} {
		if got := NewAuditScan(AuditFilter{Limit: tc.in}).limit; got != tc.want {
			t.Errorf("limit of a scan with Limit %d = %d, want %d", tc.in, got, tc.want)
		}
	}
}

func TestAuditScanBadEntry(t *testing.T) {
	s := NewAuditScan(AuditFilter{})
	if more, err := s.Add([]byte(`{"seq":1,"time":`)); more || err == nil || !strings.Contains(err.Error(), "audit entry") {
		t.Errorf("Add of broken JSON = %v, %v", more, err)
	}
	// An entry that cannot match is skipped undecoded, and its time,
	// unreadable, ends no scan.
	s = NewAuditScan(AuditFilter{Stack: "web", Since: time.Now()})
	if more, err := s.Add([]byte(`{"seq":1,"time":"yesterday"`)); !more || err != nil {
		t.Errorf("Add of a broken entry that does not match = %v, %v; want true, nil", more, err)
	}
}

func TestEntryTime(t *testing.T) {
	t0 := time.Date(2025, 3, 1, 12, 0, 0, 123456789, time.FixedZone("x", 3600))
	v, _ := json.Marshal(AuditEntry{Seq: 1 << 63, Time: t0})
	for _, tc := range []struct {
		v    string
		want time.Time
		ok   bool
	}{
		{string(v), t0, true},
		{`{"time":"2025-03-01T12:00:00Z","seq":1}`, time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC), true}, // not where Marshal puts it
		{`{"seq":1}`, time.Time{}, false},
		{`not json`, time.Time{}, false},
	} {
		got, ok := entryTime([]byte(tc.v))
		if !got.Equal(tc.want) || ok != tc.ok {
			t.Errorf("entryTime(%s) = %v, %v; want %v, %v", tc.v, got, ok, tc.want, tc.ok)
		}
	}
}
