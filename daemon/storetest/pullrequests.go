package storetest

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/stackd/stackd/daemon/review"
)

// PRRecord is the record of pull request number of acme/infra at head,
// with every part filled in.
func PRRecord(number int, head string) review.Record {
	ev := review.Event{Forge: review.GitHub, Action: review.Opened, Repo: "acme/infra", URLs: []string{"https://github.com/acme/infra.git"},
		Number: number, BaseBranch: "main", HeadSHA: head, HeadBranch: "feature", Author: "alice", Title: "Change things",
		WebURL: "https://github.com/acme/infra/pull/1"}
	return review.Record{Event: ev, Comment: 4242, Done: head,
		View: review.PullRequest{Key: ev.Key(), Forge: ev.Forge, Repo: ev.Repo, Number: number, Title: ev.Title, Author: ev.Author,
			WebURL: ev.WebURL, BaseBranch: "main", HeadSHA: head, UpdatedAt: T0, Removed: []string{"old"},
			Previews: []review.Preview{{Stack: "app", Update: "app-00000000000000000007", Result: review.Succeeded,
				Changes: map[string]int{"update": 1}, Duration: 3000000000, Unresolved: []string{"config.token"}}}}}
}

// RunPullRequests checks a review.Store: records are written, read back
// whole, replaced and deleted.
func RunPullRequests(t *testing.T, s review.Store) {
	t.Helper()
	if got, err := s.PullRequests(); err != nil || len(got) != 0 {
		t.Fatalf("PullRequests of an empty store = %+v, %v", got, err)
	}
	a, b := PRRecord(1, strings.Repeat("a", 40)), PRRecord(2, strings.Repeat("b", 40))
	for _, rec := range []review.Record{a, b} {
		if err := s.PutPullRequest(rec); err != nil {
			t.Fatal(err)
		}
	}
	a.Event.HeadSHA, a.Done = strings.Repeat("c", 40), ""
	if err := s.PutPullRequest(a); err != nil {
		t.Fatal(err)
	}
	got, err := s.PullRequests()
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(got, func(x, y review.Record) int { return x.View.Number - y.View.Number })
	if want := []review.Record{a, b}; !reflect.DeepEqual(got, want) {
		t.Errorf("PullRequests = %+v\nwant %+v", got, want)
	}
	for _, key := range []string{a.View.Key, a.View.Key} { // deleting twice is fine
		if err := s.DeletePullRequest(key); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := s.PullRequests(); err != nil || len(got) != 1 || got[0].View.Key != b.View.Key {
		t.Errorf("PullRequests after a delete = %+v, %v; want only %s", got, err, b.View.Key)
	}
	if err := s.PutPullRequest(review.Record{}); err == nil {
		t.Error("a record without a key was written")
	}
}
