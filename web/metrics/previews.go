package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/stackd/stackd/daemon/review"
)

// Descriptions of the gauges of pull requests and review stacks.
var (
	descPullRequests = prometheus.NewDesc("stackd_pull_requests",
		"Pull requests listed at /previews, by state: open, or closing (closed, listed until their review stacks are destroyed).", []string{"state"}, nil)
	descReviewStacks = prometheus.NewDesc("stackd_review_stacks",
		"Review stacks that exist (not destroyed), by state: deploying, deployed, failed (the deploy), destroying, destroy_failed (retried every minute).", []string{"state"}, nil)
)

// The values of the label "state" of the gauges above, each reported at
// every scrape so that a change moves a count rather than ending a series.
var (
	pullRequestStates = []string{"open", "closing"}
	reviewStackStates = []string{"deploying", "deployed", "failed", "destroying", "destroy_failed"}
)

// reviewStackState is the state stackd_review_stacks counts rs under;
// empty for one that is destroyed.
func reviewStackState(rs review.ReviewStack) string {
	destroy := rs.Op == review.Destroy
	switch {
	case destroy && rs.Result == review.Succeeded:
		return ""
	case destroy && rs.Result == review.Failed:
		return "destroy_failed"
	case destroy:
		return "destroying"
	case rs.Result == review.Succeeded:
		return "deployed"
	case rs.Result == review.Failed:
		return "failed"
	default:
		return "deploying"
	}
}

// pullRequestCounts counts prs by the states of the gauges above.
func pullRequestCounts(prs []review.PullRequest) (byState, reviews map[string]int) {
	byState, reviews = map[string]int{}, map[string]int{}
	for _, pr := range prs {
		if pr.Closed {
			byState["closing"]++
		} else {
			byState["open"]++
		}
		for _, rs := range pr.ReviewStacks {
			if s := reviewStackState(rs); s != "" {
				reviews[s]++
			}
		}
	}
	return byState, reviews
}

// SetPullRequests makes the scrapes report the pull requests and review
// stacks that list returns (the previewer's list); nil reports none. In
// a cluster, where every replica lists all of them (from etcd), the
// leader alone reports them, so that a sum over replicas counts each once.
func (m *Metrics) SetPullRequests(list func() []review.PullRequest) {
	if list == nil {
		m.prs.Store(nil)
		return
	}
	m.prs.Store(&list)
}

// prCollector reports the gauges of pull requests and review stacks.
type prCollector struct{ m *Metrics }

func (c prCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descPullRequests
	ch <- descReviewStacks
}

func (c prCollector) Collect(ch chan<- prometheus.Metric) {
	byState, reviews, ok := c.m.pullRequestGauges()
	if !ok {
		return
	}
	for _, s := range pullRequestStates {
		ch <- prometheus.MustNewConstMetric(descPullRequests, prometheus.GaugeValue, float64(byState[s]), s)
	}
	for _, s := range reviewStackStates {
		ch <- prometheus.MustNewConstMetric(descReviewStacks, prometheus.GaugeValue, float64(reviews[s]), s)
	}
}

// pullRequestGauges counts the pull requests and review stacks by state;
// ok is false when this replica does not report them.
func (m *Metrics) pullRequestGauges() (byState, reviews map[string]int, ok bool) {
	list := m.prs.Load()
	if list == nil {
		return nil, nil, false
	}
	if ref := m.api.Load(); ref != nil {
		if cs, clustered := ref.ClusterStatus(); clustered && (!cs.Session || cs.Leader == "" || cs.Leader != cs.Node) {
			return nil, nil, false // not the leader, or cut off from etcd: nothing to read
		}
	}
	byState, reviews = pullRequestCounts((*list)())
	return byState, reviews, true
}
