package preview

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stackd/stackd/daemon/review"
	"github.com/stackd/stackd/daemon/scrub"
)

func TestResyncEvent(t *testing.T) {
	const head, next = "aaaa1111", "bbbb2222"
	opened := review.Event{Forge: review.GitHub, Action: review.Opened, Repo: "acme/infra", Number: 7,
		URLs: []string{"https://github.com/acme/infra.git"}, BaseBranch: "main", HeadSHA: head, HeadBranch: "feature",
		Author: "alice", Title: "Change things"}
	with := func(ev review.Event, action review.Action, sha string) review.Event {
		ev.Action, ev.HeadSHA = action, sha
		return ev
	}
	closing := with(opened, review.Closed, head)
	swept := opened
	swept.Sweep = 1700000000
	tests := []struct {
		name  string
		rec   review.Event
		state review.PullRequestState
		want  review.Event // zero: nothing to do
	}{
		{"open at the recorded head", opened, review.PullRequestState{Open: true, HeadSHA: head}, review.Event{}},
		{"open, the forge names no head", opened, review.PullRequestState{Open: true}, review.Event{}},
		{"open at a new head", opened, review.PullRequestState{Open: true, HeadSHA: next}, with(opened, review.Pushed, next)},
		{"pushed record, a newer head", with(opened, review.Pushed, head), review.PullRequestState{Open: true, HeadSHA: next}, with(opened, review.Pushed, next)},
		{"closed", opened, review.PullRequestState{HeadSHA: head}, closing},
		{"closed after a push it missed too", opened, review.PullRequestState{HeadSHA: next}, closing},
		{"merged", opened, review.PullRequestState{Merged: true, HeadSHA: head}, closing},
		{"gone (404)", opened, review.PullRequestState{Gone: true}, closing},
		{"swept record, closed", swept, review.PullRequestState{}, closing},
		{"swept record, a new head", swept, review.PullRequestState{Open: true, HeadSHA: next}, with(opened, review.Pushed, next)},
		{"swept record, up to date", swept, review.PullRequestState{Open: true, HeadSHA: head}, review.Event{}},
		{"closing in progress, forge says closed", closing, review.PullRequestState{}, review.Event{}},
		{"closing in progress, forge says open elsewhere", closing, review.PullRequestState{Open: true, HeadSHA: next}, review.Event{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := resyncEvent(review.Record{Event: tc.rec}, tc.state)
			if ok != (tc.want.Action != "") {
				t.Fatalf("resyncEvent = %+v, %v; want an event: %v", got, ok, tc.want.Action != "")
			}
			if ok && got.Key() != tc.rec.Key() {
				t.Errorf("event of %s, want %s", got.Key(), tc.rec.Key())
			}
			if ok && !reflect.DeepEqual(got, tc.want) {
				t.Errorf("resyncEvent =\n%+v\nwant\n%+v", got, tc.want)
			}
		})
	}
}

// stateForge is a review.Forge that tells pull requests' states, for
// the resync's handling of its answers; it writes nothing.
type stateForge struct {
	review.Forge
	mu     sync.Mutex
	states map[int]review.PullRequestState
	errs   map[int]error
	asked  []int
	// statuses are those set, "sha context state description".
	statuses []string
}

func (f *stateForge) SetStatus(_ context.Context, _, sha string, st review.Status) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.statuses = append(f.statuses, sha+" "+st.Context+" "+string(st.State)+" "+st.Description)
	return nil
}

func (f *stateForge) PullRequestState(_ context.Context, _ string, number int) (review.PullRequestState, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked = append(f.asked, number)
	return f.states[number], f.errs[number]
}

// redactingDaemon is a Daemon that knows secrets, and nothing else.
type redactingDaemon struct {
	Daemon
	red *scrub.Redactor
}

func (d redactingDaemon) Redactor() *scrub.Redactor { return d.red }

// TestResyncPass: a pass asks the forge about each open pull request
// once; the forge's error leaves it open and is logged scrubbed, a 404
// closes it like a closed webhook, one up to date stays, and one whose
// closing is in progress is not asked about.
func TestResyncPass(t *testing.T) {
	const secret = "s3cret-of-the-daemon"
	f := &stateForge{
		states: map[int]review.PullRequestState{2: {Gone: true}, 3: {Open: true, HeadSHA: "head3"}},
		errs:   map[int]error{1: errors.New("github: get the state of acme/infra#1: 502 Bad Gateway, token " + secret)},
	}
	var logs bytes.Buffer
	p := New(Options{Daemon: redactingDaemon{red: scrub.NewRedactor(secret)}, Forges: review.Forges{"github.com": f},
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	defer p.Stop(context.Background())
	for n := 1; n <= 4; n++ {
		ev := review.Event{Forge: review.GitHub, Action: review.Opened, Repo: "acme/infra", Number: n,
			URLs: []string{"https://github.com/acme/infra.git"}, HeadSHA: fmt.Sprintf("head%d", n)}
		if n == 4 {
			ev.Action = review.Closed
		}
		p.prs[ev.Key()] = &pullRequest{ev: ev, view: viewOf(ev), ended: ev.HeadSHA}
	}
	p.resyncPass(t.Context())

	if !slices.Equal(sorted(f.asked), []int{1, 2, 3}) {
		t.Errorf("asked about %v, want 1, 2 and 3 once each", f.asked)
	}
	var open []int
	for _, v := range p.PullRequests() {
		open = append(open, v.Number)
	}
	if got := sorted(open); !slices.Equal(got, []int{1, 3, 4}) {
		t.Errorf("open after the pass: %v, want 1 (error), 3 (up to date) and 4 (closing, left to its closing)", got)
	}
	if !strings.Contains(logs.String(), "cannot check a pull request's state") || strings.Contains(logs.String(), secret) {
		t.Errorf("the forge's error is not logged, or not scrubbed:\n%s", logs.String())
	}
}

func sorted(s []int) []int {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

// TestResyncEndsLeftStatuses: a pull request closed while a stop had
// interrupted its round gets the statuses that round left queued,
// running or cancelled by the stop (which leaves them pending) ended, as
// the round that Start runs again may be cancelled before it sets its
// own; a finished preview's status stays.
func TestResyncEndsLeftStatuses(t *testing.T) {
	f := &stateForge{states: map[int]review.PullRequestState{5: {HeadSHA: "head5"}, 6: {}}}
	p := New(Options{Daemon: redactingDaemon{red: scrub.NewRedactor()}, Forges: review.Forges{"github.com": f}})
	defer p.Stop(context.Background())
	previews := []review.Preview{{Stack: "app", Result: review.Queued}, {Stack: "db", Result: review.Running},
		{Stack: "web", Result: review.Succeeded}, {Stack: "api", Result: review.Cancelled}}
	for n, ended := range map[int]string{5: "", 6: "head6"} {
		ev := review.Event{Forge: review.GitHub, Action: review.Pushed, Repo: "acme/infra", Number: n,
			URLs: []string{"https://github.com/acme/infra.git"}, HeadSHA: fmt.Sprintf("head%d", n)}
		pr := &pullRequest{ev: ev, view: viewOf(ev), ended: ended}
		pr.view.Previews = slices.Clone(previews)
		p.prs[ev.Key()] = pr
	}
	p.resyncPass(t.Context())
	want := []string{"head5 stackd/app error Pull request closed", "head5 stackd/db error Pull request closed",
		"head5 stackd/api error Pull request closed"}
	if !slices.Equal(f.statuses, want) {
		t.Errorf("statuses set: %q, want %q", f.statuses, want)
	}
	if n := len(p.PullRequests()); n != 0 {
		t.Errorf("%d pull requests left open, want none", n)
	}
}
