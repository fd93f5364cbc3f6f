package web

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/stackd/stackd/daemon/review"
	"github.com/stackd/stackd/model"
)

func TestReviewStackState(t *testing.T) {
	for _, tt := range []struct {
		op     review.Op
		result string
		want   string
	}{
		{review.Create, review.Running, "deploying"},
		{review.Update, review.Running, "deploying"},
		{review.Create, review.Succeeded, "deployed"},
		{review.Update, review.Succeeded, "deployed"},
		{review.Create, review.Failed, "failed"},
		{review.Update, review.Failed, "failed"},
		{review.Destroy, review.Running, "destroying"},
		{review.Destroy, review.Failed, "destroy_failed"},
		{review.Destroy, review.Succeeded, ""},
	} {
		if got := reviewStackState(review.ReviewStack{Op: tt.op, Result: tt.result}); got != tt.want {
			t.Errorf("%s %s: state %q, want %q", tt.op, tt.result, got, tt.want)
		}
	}
}

// TestMetricsPullRequests: the gauges count the pull requests listed and
// their review stacks by state, every state reported; in a cluster only
// the leader reports them.
func TestMetricsPullRequests(t *testing.T) {
	prs := []review.PullRequest{
		{Number: 1, ReviewStacks: []review.ReviewStack{{Op: review.Create, Result: review.Succeeded}, {Op: review.Update, Result: review.Running}}},
		{Number: 2, ReviewStacks: []review.ReviewStack{{Op: review.Create, Result: review.Succeeded}}},
		{Number: 3, Closed: true, ReviewStacks: []review.ReviewStack{
			{Op: review.Destroy, Result: review.Failed}, {Op: review.Destroy, Result: review.Succeeded}}},
	}
	scrapeWith := func(api *fakeAPI, list func() []review.PullRequest) string {
		reg := prometheus.NewRegistry()
		m := NewMetrics(reg, api, "test")
		m.SetPullRequests(list)
		_, url := startWith(t, Options{API: api, Registry: reg, Metrics: m})
		return scrape(t, url)
	}
	body := scrapeWith(&fakeAPI{}, func() []review.PullRequest { return prs })
	for _, want := range []string{
		`stackd_pull_requests{state="open"} 2`, `stackd_pull_requests{state="closing"} 1`,
		`stackd_review_stacks{state="deployed"} 2`, `stackd_review_stacks{state="deploying"} 1`,
		`stackd_review_stacks{state="destroy_failed"} 1`, `stackd_review_stacks{state="failed"} 0`,
		`stackd_review_stacks{state="destroying"} 0`,
	} {
		if !strings.Contains(body, want+"\n") {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if body := scrapeWith(&fakeAPI{}, nil); strings.Contains(body, "stackd_pull_requests") || strings.Contains(body, "stackd_review_stacks") {
		t.Error("/metrics reports pull requests without previews")
	}
	follower := &fakeAPI{cluster: model.ClusterStatus{Node: "node-1", Session: true, Leader: "node-2"}}
	if body := scrapeWith(follower, func() []review.PullRequest { return prs }); strings.Contains(body, "stackd_pull_requests") {
		t.Error("a replica that does not lead reports the cluster's pull requests")
	}
	leader := &fakeAPI{cluster: model.ClusterStatus{Node: "node-2", Session: true, Leader: "node-2"}}
	if body := scrapeWith(leader, func() []review.PullRequest { return prs }); !strings.Contains(body, `stackd_pull_requests{state="open"} 2`+"\n") {
		t.Error("the leader does not report the cluster's pull requests")
	}
}
