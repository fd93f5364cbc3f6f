// Package storetest is the contract of daemon.Store as tests: the BoltDB
// store and the etcd store run the same suite, so that they cannot drift
// apart.
package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stackd/stackd/daemon"
	"github.com/stackd/stackd/daemon/model"
)

// Limits are the retention settings a store is opened with.
type Limits struct {
	// History is how many updates per stack, and config revisions, are
	// kept; Log how many bytes of each log.
	History, Log int
}

// Factory opens a new, empty store with limits. Hold makes the store's
// replica hold a stack before the suite writes about it (a no-op for a
// store that serves a single replica).
type Factory func(t *testing.T, limits Limits) (s daemon.Store, hold func(stack string))

// Run runs the whole contract against stores from open.
func Run(t *testing.T, open Factory) {
	for _, tc := range []struct {
		name string
		fn   func(*testing.T, Factory)
	}{
		{"Records", testRecords},
		{"Updates", testUpdates},
		{"Pages", testPages},
		{"NotFound", testNotFound},
		{"Retention", testRetention},
		{"LogLimit", testLogLimit},
		{"RunningUpdates", testRunningUpdates},
		{"DeleteStack", testDeleteStack},
		{"Revisions", testRevisions},
		{"RevisionRetention", testRevisionRetention},
		{"ConcurrentUpdates", testConcurrentUpdates},
		{"Audit", RunAudit},
		{"Resources", testResources},
		{"DriftFold", testDriftFold},
		{"DriftFoldStacks", testDriftFoldStacks},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, open) })
	}
}

// T0 is the time the records of the suite carry.
var T0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// Record is a stack record with every part of a status filled in.
func Record(name string, gen int64) model.StackRecord {
	return model.StackRecord{
		Name:       name,
		Generation: gen,
		SpecHash:   "sha256:" + name,
		Status: model.StackStatus{
			ObservedGeneration: gen,
			Conditions: []model.Condition{{
				Type: model.ConditionReady, Status: "True", Reason: "ProcessingCompleted",
				ObservedGeneration: gen, LastTransitionTime: T0,
			}},
			Outputs:    map[string]json.RawMessage{"url": json.RawMessage(`"https://example.com"`)},
			LastUpdate: &model.LastUpdate{Name: name + "-1", State: model.UpdateSucceeded, LastResyncTime: T0},
			Health:     &model.Health{Status: "Healthy"},
		},
	}
}

// NewUpdate is a running up of stack with every field set.
func NewUpdate(stack string) model.Update {
	return model.Update{
		Stack: stack, Type: model.UpdateUp, Reason: "New commit detected",
		Commit: "abc123", StartTime: T0, State: model.UpdateRunning,
		Changes: map[string]int{"create": 2},
	}
}

func begin(t *testing.T, s daemon.Store, stack string) model.Update {
	t.Helper()
	u, err := s.BeginUpdate(NewUpdate(stack))
	if err != nil {
		t.Fatalf("BeginUpdate(%s): %v", stack, err)
	}
	return u
}

// Seqs lists the updates' sequence numbers.
func Seqs(us []model.Update) []uint64 {
	out := []uint64{}
	for _, u := range us {
		out = append(out, u.Seq)
	}
	return out
}

// WantNotFound fails t unless err wraps model.ErrNotFound.
func WantNotFound(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, model.ErrNotFound) {
		t.Errorf("%s: got %v, want model.ErrNotFound", what, err)
	}
}

func holdAll(hold func(string), names ...string) {
	for _, n := range names {
		hold(n)
	}
}

func testRecords(t *testing.T, open Factory) {
	s, hold := open(t, Limits{})
	names := []string{"web.prod", "api", "db-eu-1"}
	holdAll(hold, names...)
	for _, name := range names {
		if err := s.PutStack(Record(name, 3)); err != nil {
			t.Fatal(err)
		}
	}
	recs, err := s.Stacks()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range recs {
		got = append(got, r.Name)
	}
	if want := []string{"api", "db-eu-1", "web.prod"}; !reflect.DeepEqual(got, want) {
		t.Errorf("Stacks names = %v, want %v", got, want)
	}
	if rec, err := s.Stack("web.prod"); err != nil || !reflect.DeepEqual(rec, Record("web.prod", 3)) {
		t.Errorf("Stack(web.prod) = %+v, %v", rec, err)
	}
	if err := s.PutMeta("config_revision", []byte("r42")); err != nil {
		t.Fatal(err)
	}
	if v, err := s.Meta("config_revision"); err != nil || string(v) != "r42" {
		t.Errorf("Meta = %q, %v", v, err)
	}
}

func testUpdates(t *testing.T, open Factory) {
	s, hold := open(t, Limits{})
	holdAll(hold, "api", "db-eu-1")
	for i := 1; i <= 3; i++ {
		if u := begin(t, s, "api"); u.Seq != uint64(i) || u.ID != fmt.Sprintf("api-%d", i) {
			t.Errorf("update %d: Seq %d, ID %q", i, u.Seq, u.ID)
		}
	}
	u := begin(t, s, "db-eu-1")
	u.State, u.EndTime, u.Message = model.UpdateSucceeded, T0.Add(time.Minute), "done"
	if err := s.PutUpdate(u); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Update("db-eu-1-1"); err != nil || !reflect.DeepEqual(got, u) {
		t.Errorf("Update(db-eu-1-1) = %+v, %v; want %+v", got, err, u)
	}
	if err := s.PutLog("api-2", []byte("line 1\nline 2\n")); err != nil {
		t.Fatal(err)
	}
	if log, err := s.Log("api-2"); err != nil || string(log) != "line 1\nline 2\n" {
		t.Errorf("Log(api-2) = %q, %v", log, err)
	}
	if log, err := s.Log("api-3"); err != nil || log == nil || len(log) != 0 {
		t.Errorf("Log(api-3) = %#v, %v; want empty non-nil", log, err)
	}
}

func testPages(t *testing.T, open Factory) {
	s, hold := open(t, Limits{})
	hold("api")
	for range 5 {
		begin(t, s, "api")
	}
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
		if err != nil || !reflect.DeepEqual(Seqs(us), tc.want) {
			t.Errorf("Updates(api, %d, %d) = %v, %v; want %v", tc.before, tc.limit, Seqs(us), err, tc.want)
		}
	}
	if us, err := s.Updates("nope", 0, 0); err != nil || us == nil || len(us) != 0 {
		t.Errorf("Updates(nope) = %v, %v; want empty", us, err)
	}
	if us, err := s.Updates("ap", 0, 0); err != nil || len(us) != 0 {
		t.Errorf("Updates(ap) = %v, %v; want empty (no prefix match)", Seqs(us), err)
	}
}

func testNotFound(t *testing.T, open Factory) {
	s, hold := open(t, Limits{})
	holdAll(hold, "a", "b")
	begin(t, s, "a")
	_, err := s.Stack("a")
	WantNotFound(t, "Stack", err)
	_, err = s.Meta("x")
	WantNotFound(t, "Meta", err)
	for _, id := range []string{"a-2", "b-1", "a", "a-0", "a-01", "-1", "a-x", ""} {
		_, err = s.Update(id)
		WantNotFound(t, "Update("+id+")", err)
		_, err = s.Log(id)
		WantNotFound(t, "Log("+id+")", err)
		WantNotFound(t, "PutLog("+id+")", s.PutLog(id, []byte("x")))
	}
	WantNotFound(t, "PutUpdate", s.PutUpdate(model.Update{Stack: "a", Seq: 2}))
	WantNotFound(t, "PutUpdate", s.PutUpdate(model.Update{Stack: "b", Seq: 1}))
	if err := s.DeleteStack("b"); err != nil {
		t.Errorf("DeleteStack(b) with nothing stored = %v", err)
	}
	if err := s.PutStack(model.StackRecord{}); err == nil {
		t.Error("PutStack with no name succeeded")
	}
	if _, err := s.BeginUpdate(model.Update{}); err == nil {
		t.Error("BeginUpdate with no stack succeeded")
	}
}

func testRetention(t *testing.T, open Factory) {
	s, hold := open(t, Limits{History: 3})
	hold("a-b")
	for range 5 {
		u := begin(t, s, "a-b")
		if err := s.PutLog(u.ID, []byte(u.ID)); err != nil {
			t.Fatal(err)
		}
	}
	if us, err := s.Updates("a-b", 0, 0); err != nil || !reflect.DeepEqual(Seqs(us), []uint64{5, 4, 3}) {
		t.Errorf("Updates = %v, %v; want [5 4 3]", Seqs(us), err)
	}
	for _, id := range []string{"a-b-1", "a-b-2"} {
		_, err := s.Log(id)
		WantNotFound(t, "Log("+id+")", err)
		WantNotFound(t, "PutLog("+id+")", s.PutLog(id, []byte("x")))
	}
	WantNotFound(t, "PutUpdate(a-b-1)", s.PutUpdate(model.Update{Stack: "a-b", Seq: 1}))
	if log, err := s.Log("a-b-3"); err != nil || string(log) != "a-b-3" {
		t.Errorf("Log(a-b-3) = %q, %v", log, err)
	}
	if u := begin(t, s, "a-b"); u.Seq != 6 {
		t.Errorf("next seq = %d, want 6", u.Seq)
	}
}

func testLogLimit(t *testing.T, open Factory) {
	s, hold := open(t, Limits{Log: 100})
	hold("a")
	id := begin(t, s, "a").ID
	long := make([]byte, 1000)
	for i := range long {
		long[i] = 'a' + byte(i%26)
	}
	if err := s.PutLog(id, long); err != nil {
		t.Fatal(err)
	}
	want := "[… 900 bytes truncated …]\n" + string(long[900:])
	if got, _ := s.Log(id); string(got) != want {
		t.Errorf("long log stored as %q, want %q", got, want)
	}
	// A cut inside a UTF-8 character drops the character's remaining bytes.
	if err := s.PutLog(id, []byte(strings.Repeat("€", 40))); err != nil {
		t.Fatal(err)
	}
	want = "[… 21 bytes truncated …]\n" + strings.Repeat("€", 33)
	if got, _ := s.Log(id); string(got) != want {
		t.Errorf("utf-8 log stored as %q, want %q", got, want)
	}
}

func testRunningUpdates(t *testing.T, open Factory) {
	s, hold := open(t, Limits{})
	holdAll(hold, "a", "b", "c")
	for _, stack := range []string{"b", "a"} {
		for i := range 3 {
			u := begin(t, s, stack)
			if i == 1 {
				u.State = model.UpdateSucceeded
				if err := s.PutUpdate(u); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	u := begin(t, s, "c")
	u.State = model.UpdateFailed
	if err := s.PutUpdate(u); err != nil {
		t.Fatal(err)
	}
	running, err := s.RunningUpdates()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, u := range running {
		got = append(got, u.ID)
	}
	if want := []string{"a-1", "a-3", "b-1", "b-3"}; !reflect.DeepEqual(got, want) {
		t.Errorf("RunningUpdates = %v, want %v", got, want)
	}
}

func testDeleteStack(t *testing.T, open Factory) {
	s, hold := open(t, Limits{})
	holdAll(hold, "a", "a-1", "b")
	for _, name := range []string{"a", "a-1", "b"} {
		if err := s.PutStack(Record(name, 1)); err != nil {
			t.Fatal(err)
		}
		for range 2 {
			u := begin(t, s, name)
			if err := s.PutLog(u.ID, []byte("log of "+u.ID)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := s.DeleteStack("a"); err != nil {
		t.Fatal(err)
	}
	_, err := s.Stack("a")
	WantNotFound(t, "Stack(a)", err)
	if us, err := s.Updates("a", 0, 0); err != nil || len(us) != 0 {
		t.Errorf("Updates(a) = %v, %v", Seqs(us), err)
	}
	_, err = s.Log("a-1")
	WantNotFound(t, "Log(a-1)", err)
	for _, name := range []string{"a-1", "b"} {
		if _, err := s.Stack(name); err != nil {
			t.Errorf("Stack(%s): %v", name, err)
		}
		if log, err := s.Log(name + "-2"); err != nil || string(log) != "log of "+name+"-2" {
			t.Errorf("Log(%s-2) = %q, %v", name, log, err)
		}
	}
	// The counter survives: IDs of a deleted stack are never reused.
	if u := begin(t, s, "a"); u.Seq != 3 {
		t.Errorf("seq after delete = %d, want 3", u.Seq)
	}
}

// NewRevision is an applied config revision with every field set.
func NewRevision(trigger string) model.ConfigRevision {
	return model.ConfigRevision{
		Time: T0, Trigger: trigger, Applied: true,
		Sources: []model.RevisionSource{
			{Source: "https://git.example.com/infra.git", Commit: "abc123"},
			{Source: "/etc/stackd/extra.yaml"},
		},
		Added: []string{"web"}, Changed: []string{"api", "db"},
	}
}

// RevSeqs lists the revisions' sequence numbers.
func RevSeqs(rs []model.ConfigRevision) []uint64 {
	out := []uint64{}
	for _, r := range rs {
		out = append(out, r.Seq)
	}
	return out
}

func testRevisions(t *testing.T, open Factory) {
	s, _ := open(t, Limits{})
	if revs, err := s.Revisions(0, 0); err != nil || revs == nil || len(revs) != 0 {
		t.Errorf("Revisions of a new store = %#v, %v; want empty non-nil", revs, err)
	}
	in := NewRevision("start")
	in.Seq = 42 // ignored: the store assigns it
	in.Applied, in.Error = false, "stacks.yaml:3:5: unknown field"
	got, err := s.PutRevision(in)
	want := in
	want.Seq = 1
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("PutRevision = %+v, %v; want %+v", got, err, want)
	}
	for range 4 {
		if _, err := s.PutRevision(NewRevision("git")); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		before uint64
		limit  int
		want   []uint64
	}{
		{0, 0, []uint64{5, 4, 3, 2, 1}},
		{0, 2, []uint64{5, 4}},
		{4, 2, []uint64{3, 2}},
		{1, 2, []uint64{}},
		{99, 10, []uint64{5, 4, 3, 2, 1}},
	} {
		revs, err := s.Revisions(tc.before, tc.limit)
		if err != nil || !reflect.DeepEqual(RevSeqs(revs), tc.want) {
			t.Errorf("Revisions(%d, %d) = %v, %v; want %v", tc.before, tc.limit, RevSeqs(revs), err, tc.want)
		}
	}
	if revs, _ := s.Revisions(2, 1); len(revs) != 1 || !reflect.DeepEqual(revs[0], want) {
		t.Errorf("Revisions(2, 1) = %+v, want [%+v]", revs, want)
	}
}

func testRevisionRetention(t *testing.T, open Factory) {
	s, _ := open(t, Limits{History: 3})
	for range 5 {
		if _, err := s.PutRevision(NewRevision("git")); err != nil {
			t.Fatal(err)
		}
	}
	if revs, err := s.Revisions(0, 0); err != nil || !reflect.DeepEqual(RevSeqs(revs), []uint64{5, 4, 3}) {
		t.Errorf("Revisions = %v, %v; want [5 4 3]", RevSeqs(revs), err)
	}
}

// testConcurrentUpdates: updates begun at once get distinct sequence
// numbers, with none lost.
func testConcurrentUpdates(t *testing.T, open Factory) {
	s, hold := open(t, Limits{})
	hold("a")
	var wg sync.WaitGroup
	var mu sync.Mutex
	got := map[uint64]bool{}
	for range 8 {
		wg.Go(func() {
			for range 5 {
				u, err := s.BeginUpdate(NewUpdate("a"))
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				got[u.Seq] = true
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(got) != 40 {
		t.Errorf("40 updates got %d distinct Seqs", len(got))
	}
	if us, _ := s.Updates("a", 0, 1); len(us) != 1 || us[0].Seq != 40 {
		t.Errorf("newest update = %v, want seq 40", Seqs(us))
	}
}
