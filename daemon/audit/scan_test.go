package audit

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stackd/stackd/daemon/access"
	"github.com/stackd/stackd/daemon/model"
)

// scanEntries runs a scan of f over es, stored newest first as the
// stores store them; it returns the Seqs selected and how many entries
// were offered before the scan ended.
func scanEntries(t *testing.T, f Filter, es []model.AuditEntry) ([]uint64, int) {
	t.Helper()
	s := NewScan(f)
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
	at := func(seq uint64, minutes float64, actor, stack string) model.AuditEntry {
		return model.AuditEntry{Seq: seq, Time: t0.Add(time.Duration(minutes * float64(time.Minute))),
			Principal: model.Principal{Kind: model.PrincipalUser, Name: actor, Groups: []string{"web"}}, Action: access.ActionSync, Stack: stack,
			Path: "/api/v1/stacks/" + stack + "/sync", Outcome: model.AuditAllowed, Reason: `"name":"bob" "stack":"api"`}
	}
	es := []model.AuditEntry{
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
		f       Filter
		want    []uint64
		offered int
	}{
		{"all", Filter{}, []uint64{7, 6, 5, 4, 3, 2, 1}, 7},
		{"limit", Filter{Limit: 2}, []uint64{7, 6}, 2},
		{"stack, not a prefix of another", Filter{Stack: "web"}, []uint64{6, 5, 1}, 7},
		{"stack escaped by json", Filter{Stack: "a<b>&c"}, []uint64{4}, 7},
		{"actor escaped by json", Filter{Actor: `o"brien <&>`}, []uint64{3}, 7},
		{"actor not unicode-folded", Filter{Actor: "alvaro"}, []uint64{}, 7},
		{"actor unicode", Filter{Actor: "álvaro"}, []uint64{6}, 7},
		{"a reason quoting fields matches nothing", Filter{Actor: "bob", Stack: "api"}, []uint64{}, 7},
		{"stack and actor", Filter{Actor: "bob", Stack: "web2"}, []uint64{2}, 7},
		{"before", Filter{Before: 5, Limit: 2}, []uint64{4, 3}, 5},
		{"since", Filter{Since: t0.Add(2 * time.Minute)}, []uint64{7, 6, 5, 4, 3}, 7},
		// Entries 5 and 3 are older than Since but within the slack; entry 2
		// (t0+1m) is past it.
		{"since scans past a step of the clock", Filter{Since: t0.Add(165 * time.Second)}, []uint64{7, 6, 4}, 6},
		{"since stops early", Filter{Since: t0.Add(10 * time.Minute)}, []uint64{7, 6}, 3},
		{"since stops early without a match", Filter{Since: t0.Add(10 * time.Minute), Stack: "none"}, []uint64{}, 3},
		{"since past everything", Filter{Since: t0.Add(time.Hour)}, []uint64{}, 1},
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
		{0, PageDefault}, {-5, PageDefault}, {1, 1}, {1001, 1001},
		{PageMax, PageMax}, {PageMax + 1, PageMax}, {1 << 40, PageMax},
	} {
		if got := NewScan(Filter{Limit: tc.in}).limit; got != tc.want {
			t.Errorf("limit of a scan with Limit %d = %d, want %d", tc.in, got, tc.want)
		}
	}
}

func TestAuditScanBadEntry(t *testing.T) {
	s := NewScan(Filter{})
	if more, err := s.Add([]byte(`{"seq":1,"time":`)); more || err == nil || !strings.Contains(err.Error(), "audit entry") {
		t.Errorf("Add of broken JSON = %v, %v", more, err)
	}
	// An entry that cannot match is skipped undecoded, and its time,
	// unreadable, ends no scan.
	s = NewScan(Filter{Stack: "web", Since: time.Now()})
	if more, err := s.Add([]byte(`{"seq":1,"time":"yesterday"`)); !more || err != nil {
		t.Errorf("Add of a broken entry that does not match = %v, %v; want true, nil", more, err)
	}
}

func TestEntryTime(t *testing.T) {
	t0 := time.Date(2025, 3, 1, 12, 0, 0, 123456789, time.FixedZone("x", 3600))
	v, _ := json.Marshal(model.AuditEntry{Seq: 1 << 63, Time: t0})
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
