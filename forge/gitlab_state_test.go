package forge

import (
	"testing"

	"github.com/stackd/stackd/daemon/review"
)

func TestGitLabState(t *testing.T) {
	for _, tc := range []struct {
		state string
		want  review.PullRequestState
		err   bool
	}{
		{"opened", review.PullRequestState{Open: true}, false},
		{"locked", review.PullRequestState{Open: true}, false},
		{"closed", review.PullRequestState{}, false},
		{"merged", review.PullRequestState{Merged: true}, false},
		{"", review.PullRequestState{}, true},
		{"reopened", review.PullRequestState{}, true},
	} {
		got, err := gitlabState(tc.state)
		if got != tc.want || (err != nil) != tc.err {
			t.Errorf("gitlabState(%q) = %+v, %v; want %+v, error %v", tc.state, got, err, tc.want, tc.err)
		}
	}
}
