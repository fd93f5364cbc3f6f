package main

import (
	"strings"
	"testing"
	"time"

	"github.com/stackd/stackd/daemon"
	"github.com/stackd/stackd/daemon/review"
	"github.com/stackd/stackd/forge/forgetest"
)

// TestE2EPullRequestResync: stackd catches up with the pull-request
// webhooks it missed. While it is down, one previewed pull request is
// merged, one is deleted (the forge answers 404) and one, whose preview
// the stop left queued, is closed: after the start none of them is
// listed, and the queued one's commit keeps no pending status. A push
// whose webhook is lost while it runs is previewed at the next check
// (--preview-resync-interval), in the same comment.
func TestE2EPullRequestResync(t *testing.T) {
	toolchainBin(t)
	g, programs := busyRig(t, "10s")
	g.in.waitStack("busy", "the first deploy", 2*time.Minute, isReady)

	merged := &pullRequest{repo: "acme/infra", name: "infra", number: 21}
	deleted := &pullRequest{repo: "acme/infra", name: "infra", number: 22}
	for pr, version := range map[*pullRequest]string{merged: "v2", deleted: "v3"} {
		g.push(programs, pr, map[string]string{"app/Pulumi.yaml": program(version)})
		g.hook(pr, "opened")
		g.waitStatus(pr, "stackd/app")
		g.waitComment(pr)
	}

	again := strings.Replace(clusterProgram, "duration: ${duration}\n", "duration: ${duration}\n      trigger: again\n", 1)
	programs.commit(map[string]string{"slow/Pulumi.yaml": again})
	g.in.waitStack("busy", "the long update running", 2*time.Minute, func(v daemon.StackView) bool {
		return v.Status.CurrentUpdate != nil
	})
	queued := &pullRequest{repo: "acme/infra", name: "infra", number: 23}
	g.push(programs, queued, map[string]string{"app/Pulumi.yaml": program("v4")})
	g.hook(queued, "opened")
	g.wait("the queued preview's pending status", func() bool { return len(g.forge.Statuses(queued.repo, queued.head)) > 0 })

	flags := g.in.flags
	g.in.stop()
	g.forge.SetPullRequest(merged.repo, merged.number, forgetest.PullRequest{Head: merged.head, Merged: true})
	g.forge.DeletePullRequest(deleted.repo, deleted.number)
	g.forge.SetPullRequest(queued.repo, queued.number, forgetest.PullRequest{Head: queued.head, Closed: true})
	flags.resyncInterval = 2 * time.Second
	g.in = startDaemonWith(g.t, "", flags.dataDir, func(f *runFlags) { *f = flags })

	g.wait("the closed pull requests no longer listed", func() bool {
		listed := g.previewsOf()
		_, a := listed[merged.number]
		_, b := listed[deleted.number]
		_, c := listed[queued.number]
		return !a && !b && !c
	})
	var last review.Status
	g.wait("the closed pull request's final status", func() bool {
		sts := g.forge.Statuses(queued.repo, queued.head)
		last = sts[len(sts)-1]
		return last.State != review.Pending
	})
	if want := (review.Status{Context: "stackd/app", State: review.Error, Description: "Pull request closed"}); last != want {
		t.Errorf("the closed pull request's last status is %+v, want %+v", last, want)
	}
	for _, pr := range []*pullRequest{merged, deleted} {
		if sts := g.forge.Statuses(pr.repo, pr.head); sts[len(sts)-1].State != review.Success {
			t.Errorf("#%d's last status changed after its preview: %+v", pr.number, sts)
		}
	}
	if logs := g.in.logs.String(); strings.Count(logs, "a pull request closed while its webhook was missed") != 3 {
		t.Errorf("want three closings caught up with in the log:\n%s", logs)
	}

	pushed := &pullRequest{repo: "acme/infra", name: "infra", number: 24}
	g.push(programs, pushed, map[string]string{"app/Pulumi.yaml": program("v5")})
	g.hook(pushed, "opened")
	first := g.waitComment(pushed)
	old := pushed.head
	g.push(programs, pushed, map[string]string{"app/Pulumi.yaml": program("v6")}) // no webhook
	if st := g.waitStatus(pushed, "stackd/app"); st.State != review.Success {
		t.Errorf("the missed push's preview: %+v", st)
	}
	if c := g.waitComment(pushed); c.ID != first.ID {
		t.Errorf("the missed push got comment %d, want the pull request's comment %d edited", c.ID, first.ID)
	}
	if pr := g.previewsOf()[pushed.number]; pr.HeadSHA != pushed.head {
		t.Errorf("#%d is listed at %s, want the new head %s (was %s)", pushed.number, pr.HeadSHA, pushed.head, old)
	}
}
