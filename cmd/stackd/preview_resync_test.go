package main

import (
	"fmt"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stackd/stackd/cluster/etcdtest"
	"github.com/stackd/stackd/daemon/model"
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
	t.Parallel()
	toolchainBin(t)
	gates := newGates(t)
	g, programs := busyRig(t, "1s")
	g.in.waitStack("busy", "the first deploy", 2*time.Minute, isReady)

	merged := &pullRequest{repo: "acme/infra", name: "infra", number: 21}
	deleted := &pullRequest{repo: "acme/infra", name: "infra", number: 22}
	for pr, version := range map[*pullRequest]string{merged: "v2", deleted: "v3"} {
		g.push(programs, pr, map[string]string{"app/Pulumi.yaml": program(version)})
		g.hook(pr, "opened")
		g.waitStatus(pr, "stackd/app")
		g.waitComment(pr)
	}

	// The long update, held at its gate until the stop waits for it,
	// keeps the preview queued until the stop interrupts it.
	gates.close("update", "busy")
	busyAgain(g, programs)
	gates.waitHeld("update", "busy", 2*time.Minute)
	queued := &pullRequest{repo: "acme/infra", name: "infra", number: 23}
	g.queue(programs, queued, "v4", "opened")

	flags := g.in.flags
	g.stopWhile(func() { gates.open("update", "busy") })
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

// TestE2EClusterPullRequestResync: a cluster catches up with the
// webhooks it missed too. Two replicas (processes) with a real etcd
// preview two pull requests; the whole cluster stops, one pull request
// is merged meanwhile, and once the replicas are back neither lists it;
// a push to the other whose webhook is lost is previewed at the next
// check, in the same comment.
func TestE2EClusterPullRequestResync(t *testing.T) {
	t.Parallel()
	toolchainBin(t)
	etcd := etcdtest.Start(t, 1)
	e := newClusterEnv(t, etcd.Endpoints())
	g := newForgeRig(t, review.GitHub)
	programs := g.repo("infra")
	programs.commit(map[string]string{"app/Pulumi.yaml": program("v1")})
	if err := os.WriteFile(e.config, []byte(manifest("app", g.url("infra"), outDir(t), "hello")), 0o600); err != nil {
		t.Fatal(err)
	}
	flags := append(forgeFlagsFor(t, g), "--preview-resync-interval", "2s")
	n1, n2 := e.start("node-1", flags...), e.start("node-2", flags...)
	e.waitAll(n1, 1, "app deployed", 3*time.Minute, func(v model.StackView) bool { return isReady(v) && v.Holder != "" })

	merged := &pullRequest{repo: "acme/infra", name: "infra", number: 31}
	pushed := &pullRequest{repo: "acme/infra", name: "infra", number: 32}
	for pr, to := range map[*pullRequest]*replica{merged: n1, pushed: n2} {
		g.push(programs, pr, map[string]string{"app/Pulumi.yaml": program(fmt.Sprintf("v%d", pr.number))})
		g.hookTo(to, pr, "opened")
		waitForge(t, g, fmt.Sprintf("the comment on #%d", pr.number), func() bool {
			cs := g.forge.Comments(pr.repo, pr.number)
			return len(cs) == 1 && strings.Contains(cs[0].Body, pr.head[:12])
		})
	}
	first := g.forge.Comments(pushed.repo, pushed.number)[0]

	e.stop(n1, syscall.SIGTERM)
	e.stop(n2, syscall.SIGTERM)
	g.forge.SetPullRequest(merged.repo, merged.number, forgetest.PullRequest{Head: merged.head, Merged: true})
	n1, n2 = e.start("node-1", flags...), e.start("node-2", flags...)
	listed := func(r *replica) map[int]string {
		var list struct{ PullRequests []review.PullRequest }
		if code, err := getJSON(r.url+"/api/v1/previews", &list); err != nil || code != http.StatusOK {
			return nil
		}
		out := map[int]string{}
		for _, pr := range list.PullRequests {
			out[pr.Number] = pr.HeadSHA
		}
		return out
	}
	waitFor(t, "the merged pull request no longer listed", 2*time.Minute, func() bool {
		for _, r := range []*replica{n1, n2} {
			l := listed(r)
			if _, still := l[merged.number]; l == nil || still || l[pushed.number] != pushed.head {
				return false
			}
		}
		return true
	})

	g.push(programs, pushed, map[string]string{"app/Pulumi.yaml": program("v33")}) // no webhook
	waitForge(t, g, "the missed push's comment", func() bool {
		cs := g.forge.Comments(pushed.repo, pushed.number)
		return len(cs) == 1 && strings.Contains(cs[0].Body, pushed.head[:12])
	})
	if c := g.forge.Comments(pushed.repo, pushed.number)[0]; c.ID != first.ID {
		t.Errorf("the missed push got comment %d, want the pull request's comment %d edited", c.ID, first.ID)
	}
	if sts := g.forge.Statuses(pushed.repo, pushed.head); len(sts) == 0 || sts[len(sts)-1].State != review.Success {
		t.Errorf("the missed push's statuses: %+v", sts)
	}
	waitFor(t, "the new head listed", time.Minute, func() bool {
		l := listed(n1)
		return l != nil && l[pushed.number] == pushed.head
	})
	g.noLeaks(forgeToken)
}

// TestE2EReviewStacksResync: a pull request closed while stackd is down
// has its review stack destroyed once stackd is back and finds it closed,
// long before the review stack's TTL (1h).
func TestE2EReviewStacksResync(t *testing.T) {
	t.Parallel()
	toolchainBin(t)
	g := newForgeRig(t, review.GitHub)
	programs := g.repo("infra")
	programs.commit(map[string]string{"app/Pulumi.yaml": reviewProgram("v1")})
	out := outDir(t)
	g.start("stacks:\n"+templateStack("app", g.url("infra"), out, "1h"), nil)
	g.in.waitStack("app", "first deploy", 2*time.Minute, isReady)
	dataDir := g.in.flags.dataDir

	pr := &pullRequest{repo: "acme/infra", name: "infra", number: 41}
	reviewFile := g.openReviewed(programs, pr, out)

	flags := g.in.flags
	g.in.stop()
	g.forge.SetPullRequest(pr.repo, pr.number, forgetest.PullRequest{Head: pr.head, Closed: true})
	flags.resyncInterval = time.Hour // the check at start alone
	g.in = startDaemonWith(g.t, "", flags.dataDir, func(f *runFlags) { *f = flags })

	waitFile(t, g, reviewFile, "")
	g.wait("the Pulumi stack app-pr-41 removed", func() bool { return len(stackStates(dataDir, "app-pr-41")) == 0 })
	g.wait("the comment saying it is destroyed", func() bool {
		cs := g.forge.Comments(pr.repo, pr.number)
		return len(cs) == 1 && strings.Contains(cs[0].Body, "| `app-pr-41` | `"+pr.head[:12]+"` | 🗑️ destroyed |")
	})
	g.wait("the closed pull request no longer listed once its review stack is destroyed", func() bool {
		_, listed := g.previewsOf()[pr.number]
		return !listed
	})
}
