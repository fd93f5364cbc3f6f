package metrics

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/stackd/stackd/daemon/model"
	"github.com/stackd/stackd/daemon/review"
	"github.com/stackd/stackd/web/webtest"
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
	scrapeWith := func(api *fakeState, list func() []review.PullRequest) string {
		reg := prometheus.NewRegistry()
		m := New(reg, api, "test")
		m.SetPullRequests(list)
		url := serve(t, reg, m)
		return webtest.Scrape(t, url)
	}
	body := scrapeWith(&fakeState{}, func() []review.PullRequest { return prs })
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
	if body := scrapeWith(&fakeState{}, nil); strings.Contains(body, "stackd_pull_requests") || strings.Contains(body, "stackd_review_stacks") {
		t.Error("/metrics reports pull requests without previews")
	}
	follower := &fakeState{cluster: model.ClusterStatus{Node: "node-1", Session: true, Leader: "node-2"}}
	if body := scrapeWith(follower, func() []review.PullRequest { return prs }); strings.Contains(body, "stackd_pull_requests") {
		t.Error("a replica that does not lead reports the cluster's pull requests")
	}
	leader := &fakeState{cluster: model.ClusterStatus{Node: "node-2", Session: true, Leader: "node-2"}}
	if body := scrapeWith(leader, func() []review.PullRequest { return prs }); !strings.Contains(body, `stackd_pull_requests{state="open"} 2`+"\n") {
		t.Error("the leader does not report the cluster's pull requests")
	}
}

func TestMetricsPreviews(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m := New(reg, &fakeState{}, "1.2.3")
	url := serve(t, reg, m)
	body := webtest.Scrape(t, url)
	for _, want := range []string{`stackd_previews_total{result="succeeded"} 0`, `stackd_previews_total{result="failed"} 0`,
		`stackd_previews_total{result="cancelled"} 0`, "stackd_preview_duration_seconds_count 0",
		`stackd_review_stack_operations_total{op="create",result="succeeded"} 0`, `stackd_review_stack_operations_total{op="destroy",result="failed"} 0`} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics before any preview lacks %q", want)
		}
	}
	var obs review.Observer = m
	obs.PreviewDone(review.Succeeded, 42*time.Second)
	obs.PreviewDone(review.Failed, 3*time.Second)
	obs.PreviewDone(review.Succeeded, 90*time.Second)
	m.ReviewStackDone(review.Create, review.Succeeded)
	m.ReviewStackDone(review.Destroy, review.Failed)
	m.ReviewStackDone(review.Destroy, review.Failed)
	// The cached scrape is not served again: the next one has them.
	body = webtest.Scrape(t, url)
	for _, want := range []string{`stackd_previews_total{result="succeeded"} 2`, `stackd_previews_total{result="failed"} 1`,
		`stackd_previews_total{result="cancelled"} 0`, "stackd_preview_duration_seconds_count 3",
		`stackd_preview_duration_seconds_bucket{le="5"} 1`, `stackd_preview_duration_seconds_bucket{le="60"} 2`,
		`stackd_preview_duration_seconds_bucket{le="120"} 3`, "stackd_preview_duration_seconds_sum 135",
		`stackd_review_stack_operations_total{op="create",result="succeeded"} 1`, `stackd_review_stack_operations_total{op="destroy",result="failed"} 2`,
		`stackd_review_stack_operations_total{op="update",result="succeeded"} 0`} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}
