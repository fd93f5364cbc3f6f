package cluster

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stackd/stackd/daemon"
	"github.com/stackd/stackd/daemon/model"
	"github.com/stackd/stackd/daemon/review"
)

func TestDecidePRs(t *testing.T) {
	ev := func(head string) *review.Event { return &review.Event{HeadSHA: head} }
	closed := func(head string, sweep int64) *review.Event {
		return &review.Event{HeadSHA: head, Action: review.Closed, Sweep: sweep}
	}
	for _, tc := range []struct {
		name string
		st   prState
		want prWork
	}{
		{"work left, nobody holds it: take", prState{event: ev("b"), done: "a"}, prWork{take: []string{"k"}}},
		{"never run: take", prState{event: ev("b")}, prWork{take: []string{"k"}}},
		{"done", prState{event: ev("b"), done: "b"}, prWork{}},
		{"held elsewhere", prState{event: ev("b"), holder: "node-2"}, prWork{}},
		{"a take in flight", prState{event: ev("b"), taking: true}, prWork{}},
		{"held, newer event: deliver", prState{event: ev("c"), held: 7, holder: "node-1", sent: "b"},
			prWork{deliver: []review.Work{{Key: "k", Event: review.Event{HeadSHA: "c"}}}}},
		{"held, delivered", prState{event: ev("c"), held: 7, holder: "node-1", sent: "c"}, prWork{}},
		{"held, closed: deliver and release", prState{held: 7, holder: "node-1", sent: "c"},
			prWork{deliver: []review.Work{{Key: "k", Closed: true}}, release: []string{"k"}}},
		{"closed, not held", prState{done: "c"}, prWork{}},
		{"closed, its round done: take", prState{event: closed("b", 0), done: "b"}, prWork{take: []string{"k"}}},
		{"closing ran, destroys left: wait for a sweep", prState{event: closed("b", 0), done: "b/closed"}, prWork{}},
		{"closing swept: take", prState{event: closed("b", 9), done: "b/closed"}, prWork{take: []string{"k"}}},
		{"sweep asked: take", prState{event: &review.Event{HeadSHA: "b", Sweep: 9}, done: "b"}, prWork{take: []string{"k"}}},
		{"sweep done", prState{event: &review.Event{HeadSHA: "b", Sweep: 9}, done: "b/sweep-9"}, prWork{}},
		{"held, sweep asked: deliver", prState{event: &review.Event{HeadSHA: "b", Sweep: 9}, held: 7, holder: "node-1", sent: "b"},
			prWork{deliver: []review.Work{{Key: "k", Event: review.Event{HeadSHA: "b", Sweep: 9}}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := tc.st
			if got := decidePRs(map[string]*prState{"k": &st}); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("decidePRs = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// prReplica is a started Cluster and the pull-request work it received.
type prReplica struct {
	*Cluster
	name   string
	mu     sync.Mutex
	work   []review.Work
	closed bool
}

func joinPR(t *testing.T, eps []string, prefix, node string) *prReplica {
	t.Helper()
	c, err := Open(context.Background(), Options{Endpoints: eps, Prefix: prefix, Node: node, TTL: testTTL})
	if err != nil {
		t.Fatal(err)
	}
	c.Start()
	r := &prReplica{Cluster: c, name: node}
	go func() {
		for w := range c.PullRequestWork() {
			r.mu.Lock()
			r.work = append(r.work, w)
			r.mu.Unlock()
		}
	}()
	t.Cleanup(func() { r.close(t) })
	return r
}

func (r *prReplica) close(t *testing.T) {
	if r.closed {
		return
	}
	r.closed = true
	if err := r.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
}

func (r *prReplica) received() []review.Work {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]review.Work(nil), r.work...)
}

// holderOf waits until one of rs received work (an Event.WorkKey), and
// checks that the other did not.
func holderOf(t *testing.T, work string, rs ...*prReplica) (holder, other *prReplica, w review.Work) {
	t.Helper()
	head := work
	has := func(r *prReplica) (review.Work, bool) {
		for _, w := range r.received() {
			if w.Event.WorkKey() == work {
				return w, true
			}
		}
		return review.Work{}, false
	}
	eventually(t, "work of "+head, func() bool {
		for _, r := range rs {
			if _, ok := has(r); ok {
				return true
			}
		}
		return false
	})
	time.Sleep(300 * time.Millisecond) // time for a second, wrong delivery
	holder, other = rs[0], rs[1]
	if _, ok := has(rs[1]); ok {
		holder, other = rs[1], rs[0]
	}
	if _, ok := has(other); ok {
		t.Fatalf("both replicas received the work of %s", head)
	}
	w, _ = has(holder)
	return holder, other, w
}

// TestPullRequestLease: an event posted on either replica is run by one
// of them (never by a third that does not preview), which alone writes the pull request's record and previews; a
// newer event goes to that holder; a released pull request whose round
// is done is not taken again, until a sweep of its expired review stacks
// is asked, once for one expiry; when the holder dies, the other takes
// the work over with the record; closing is work for the holder, and
// deleting the event and record tells it.
func TestPullRequestLease(t *testing.T) {
	eps := etcd(t)
	prefix := newPrefix()
	a, b := joinPR(t, eps, prefix, "node-a"), joinPR(t, eps, prefix, "node-b")
	join(t, eps, prefix, "node-c", Options{}) // previews nothing: never takes a lease
	ev := review.Event{Forge: review.GitHub, Action: review.Opened, Repo: "acme/infra", Number: 3, HeadSHA: strings.Repeat("1", 40)}
	key := ev.Key()
	if err := a.PostPullRequest(ev); err != nil {
		t.Fatal(err)
	}
	holder, other, w := holderOf(t, ev.HeadSHA, a, b)
	if w.Key != key || w.Record != nil {
		t.Errorf("first work %+v, want the event without a record", w)
	}
	rec := review.Record{Event: ev, View: review.PullRequest{Key: key, Number: 3, HeadSHA: ev.HeadSHA}, Comment: 99}
	if err := other.PutPullRequest(rec); !errors.Is(err, daemon.ErrNotOwner) {
		t.Errorf("the other replica wrote the record: %v", err)
	}
	if _, err := other.BeginPullRequestPreview(key, model.Update{Stack: "app", Type: model.UpdatePreview}); !errors.Is(err, daemon.ErrNotOwner) {
		t.Errorf("the other replica recorded a preview: %v", err)
	}
	if err := holder.PutPullRequest(rec); err != nil {
		t.Fatal(err)
	}
	u, err := holder.BeginPullRequestPreview(key, model.Update{Stack: "app", Type: model.UpdatePreview, State: model.UpdateRunning, PullRequest: 3})
	if err != nil {
		t.Fatal(err)
	}
	u.State = model.UpdateSucceeded
	if err := holder.PutPullRequestPreview(key, u); err != nil {
		t.Fatal(err)
	}
	if err := holder.PutPullRequestPreviewLog(key, u.ID, []byte("previewed\n")); err != nil {
		t.Fatal(err)
	}

	// A newer push, received by the other replica, goes to the holder.
	ev.Action, ev.HeadSHA = review.Pushed, strings.Repeat("2", 40)
	if err := other.PostPullRequest(ev); err != nil {
		t.Fatal(err)
	}
	if h, _, _ := holderOf(t, ev.HeadSHA, a, b); h != holder {
		t.Fatalf("the newer event went to %s, not the holder %s", h.name, holder.name)
	}
	rec.Event, rec.View.HeadSHA, rec.Done = ev, ev.HeadSHA, ev.HeadSHA
	if err := holder.PutPullRequest(rec); err != nil {
		t.Fatal(err)
	}
	holder.ReleasePullRequest(key, strings.Repeat("1", 40)) // an older round: kept
	holder.ReleasePullRequest(key, ev.HeadSHA)
	time.Sleep(500 * time.Millisecond)
	if n := len(other.received()); n != 0 {
		t.Errorf("a pull request whose round is done was taken again: %+v", other.received())
	}

	// Sweeps: every replica may ask for the same expiry; one work comes.
	for _, r := range []*prReplica{a, b, a} {
		if err := r.SweepPullRequest(key, 1000); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.SweepPullRequest(key, 999); err != nil { // an older expiry
		t.Fatal(err)
	}
	swept := ev
	swept.Sweep = 1000
	sh, so, sw := holderOf(t, swept.WorkKey(), a, b)
	if sw.Event.Sweep != 1000 || sw.Record == nil || sw.Record.Done != ev.HeadSHA {
		t.Errorf("sweep work %+v, want sweep 1000 with the record", sw)
	}
	rec.Done = swept.WorkKey()
	if err := sh.PutPullRequest(rec); err != nil {
		t.Fatal(err)
	}
	sh.ReleasePullRequest(key, swept.WorkKey())
	time.Sleep(500 * time.Millisecond)
	sweeps := 0
	for _, r := range []*prReplica{sh, so} {
		for _, w := range r.received() {
			if w.Event.Sweep != 0 {
				sweeps++
			}
		}
	}
	if sweeps != 1 {
		t.Errorf("%d sweeps handed over, want one: %+v %+v", sweeps, sh.received(), so.received())
	}

	// A repeat of the head commit is a touch: work of its own, each time
	// with a later Touch; a Sweep or Touch in what came in is not kept.
	touches := func() (ws []review.Work) {
		for _, r := range []*prReplica{a, b} {
			for _, w := range r.received() {
				if w.Event.Touch != 0 {
					ws = append(ws, w)
				}
			}
		}
		return ws
	}
	before := time.Now().UnixMilli()
	repeat := ev
	repeat.Sweep, repeat.Touch = 5, 6
	for i, r := range []*prReplica{so, sh} {
		if err := r.PostPullRequest(repeat); err != nil {
			t.Fatal(err)
		}
		eventually(t, "the touch handed over", func() bool { return len(touches()) > i })
	}
	ts := touches()
	if len(ts) != 2 || ts[0].Event.Touch == ts[1].Event.Touch {
		t.Fatalf("touches handed over: %+v, want two of their own", ts)
	}
	for _, w := range ts {
		if w.Event.Touch < before || w.Event.Sweep != 0 || w.Event.HeadSHA != ev.HeadSHA || w.Event.Action != review.Pushed {
			t.Errorf("touch %+v, want the push of %s touched at %d or later", w.Event, ev.HeadSHA, before)
		}
	}

	// A third push; its holder dies before it is done.
	ev.HeadSHA = strings.Repeat("3", 40)
	if err := a.PostPullRequest(ev); err != nil {
		t.Fatal(err)
	}
	holder, other, _ = holderOf(t, ev.HeadSHA, a, b)
	holder.close(t)
	var taken review.Work
	eventually(t, "the take-over", func() bool {
		for _, w := range other.received() {
			if w.Event.HeadSHA == ev.HeadSHA {
				taken = w
				return true
			}
		}
		return false
	})
	if taken.Record == nil || taken.Record.Comment != 99 {
		t.Errorf("taken over with the record %+v, want the comment's ID 99", taken.Record)
	}
	if recs, err := other.PullRequests(); err != nil || len(recs) != 1 || recs[0].Comment != 99 {
		t.Errorf("PullRequests = %+v, %v", recs, err)
	}

	// Closed: the holder gets the closing as work and may record it
	// until it deletes the event and record; then it is told, and its
	// late writes are refused.
	closing := review.Event{Forge: ev.Forge, Repo: ev.Repo, Number: ev.Number, Action: review.Closed, HeadSHA: ev.HeadSHA}
	if err := other.PostPullRequest(closing); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the closing handed to the holder", func() bool {
		ws := other.received()
		return ws[len(ws)-1].Event.Action == review.Closed
	})
	rec.Event, rec.View.Closed = closing, true
	if err := other.PutPullRequest(rec); err != nil {
		t.Errorf("the holder cannot record the closing: %v", err)
	}
	if recs, err := other.PullRequests(); err != nil || len(recs) != 1 || !recs[0].View.Closed {
		t.Errorf("PullRequests while closing = %+v, %v", recs, err)
	}
	if err := other.DeletePullRequest(key); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the closing", func() bool {
		ws := other.received()
		return ws[len(ws)-1].Closed && ws[len(ws)-1].Key == key
	})
	if recs, err := other.PullRequests(); err != nil || len(recs) != 0 {
		t.Errorf("PullRequests after closing = %+v, %v", recs, err)
	}
	if err := other.PutPullRequest(rec); err == nil {
		t.Error("a closed pull request's record was written again")
	}
}
