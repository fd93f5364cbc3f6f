package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stackd/stackd/daemon/model"
	"github.com/stackd/stackd/daemon/review"
)

// busyStack is a stack of the programs repository at url whose update
// takes duration (clusterProgram in slow/), deployed after stack after:
// while it runs, a daemon with one worker previews nothing.
func busyStack(url, after, duration string) string {
	return fmt.Sprintf(`  - name: busy
    stack: busy
    projectRepo: %s
    branch: main
    repoDir: slow
    resyncFrequencySeconds: 1
    config:
      duration: %q
    prerequisites:
      - name: %s
`, url, duration, after)
}

// busyProgram is clusterProgram whose Sleep waits at the gates
// create-busy and update-busy of the test's gates (newGates): open unless
// the test closes them.
var busyProgram = strings.Replace(clusterProgram, "duration: ${duration}\n", "duration: ${duration}\n      gate: busy\n", 1)

// busyRig starts a daemon with one worker and two stacks of the
// repository infra: app, and busy, whose updates take duration, and wait
// at the gates create-busy and update-busy of newGates(t) while the test
// holds them closed (a test closes create-busy before busyRig to hold
// the first deploy).
func busyRig(t *testing.T, duration string) (*forgeRig, *repo) {
	g := newForgeRig(t, review.GitHub)
	programs := g.repo("infra")
	programs.commit(map[string]string{"app/Pulumi.yaml": program("v1"), "slow/Pulumi.yaml": busyProgram})
	g.start(manifest("app", g.url("infra"), outDir(t), "hello")+busyStack(g.url("infra"), "app", duration)+
		"    envRefs:\n"+newGates(t).envRef(), func(f *runFlags) {
		f.maxConcurrent = 1
	})
	return g, programs
}

// busyAgain changes busy's program and waits until its long update runs:
// the previews asked for meanwhile wait behind it (one worker). A test
// that needs it to run on closes the gate update-busy first.
func busyAgain(g *forgeRig, programs *repo) {
	g.t.Helper()
	again := strings.Replace(busyProgram, "duration: ${duration}\n", "duration: ${duration}\n      trigger: again\n", 1)
	programs.commit(map[string]string{"slow/Pulumi.yaml": again})
	g.in.waitStack("busy", "the long update running again", 2*time.Minute, func(v model.StackView) bool {
		return v.Status.CurrentUpdate != nil
	})
}

// queue pushes app at version to pr, sends the event action and waits for
// the pending status of the preview it queued.
func (g *forgeRig) queue(programs *repo, pr *pullRequest, version, action string) {
	g.t.Helper()
	g.push(programs, pr, map[string]string{"app/Pulumi.yaml": program(version)})
	g.hook(pr, action)
	g.wait("the queued preview's pending status", func() bool { return len(g.forge.Statuses(pr.repo, pr.head)) > 0 })
}

// TestE2EPullRequestSuperseded: a push that supersedes a commit whose
// preview is still queued (the one worker runs a long update) ends that
// commit's status with "Superseded by <new sha>" in the forge's error
// state, rather than leaving it pending; the new commit is previewed and
// the pull request keeps one comment. Closing the pull request during a
// queued preview ends its status the same way. The long update is held
// at busy's gate (create-busy, then update-busy) until the queued
// preview's status is final.
func TestE2EPullRequestSuperseded(t *testing.T) {
	t.Parallel()
	toolchainBin(t)
	gates := newGates(t)
	gates.close("create", "busy")
	g, programs := busyRig(t, "1s")
	gates.waitHeld("create", "busy", 2*time.Minute)

	pr := &pullRequest{repo: "acme/infra", name: "infra", number: 5}
	g.push(programs, pr, map[string]string{"app/Pulumi.yaml": program("v2")})
	g.hook(pr, "opened")
	first := pr.head
	g.wait("the queued preview's pending status", func() bool {
		sts := g.forge.Statuses(pr.repo, first)
		return len(sts) > 0 && sts[0].State == review.Pending
	})
	g.push(programs, pr, map[string]string{"app/Pulumi.yaml": program("v3")})
	g.hook(pr, "synchronize")
	var last review.Status
	g.wait("the superseded commit's final status", func() bool {
		sts := g.forge.Statuses(pr.repo, first)
		last = sts[len(sts)-1]
		return last.State != review.Pending
	})
	want := review.Status{Context: "stackd/app", State: review.Error, Description: "Superseded by " + pr.head}
	if last != want {
		t.Errorf("the superseded commit's last status is %+v, want %+v", last, want)
	}
	gates.open("create", "busy")
	if st := g.waitStatus(pr, "stackd/app"); st.State != review.Success {
		t.Errorf("the new head's status: %+v", st)
	}
	g.waitComment(pr)

	// Closed while queued: the long update runs again for a new commit.
	gates.close("update", "busy")
	busyAgain(g, programs)
	gates.waitHeld("update", "busy", 2*time.Minute)
	g.queue(programs, pr, "v4", "synchronize")
	g.hook(pr, "closed")
	g.wait("the closed pull request's final status", func() bool {
		sts := g.forge.Statuses(pr.repo, pr.head)
		last = sts[len(sts)-1]
		return last.State != review.Pending
	})
	if want := (review.Status{Context: "stackd/app", State: review.Error, Description: "Pull request closed"}); last != want {
		t.Errorf("the closed pull request's last status is %+v, want %+v", last, want)
	}
	gates.open("update", "busy")
	if cs := g.forge.Comments(pr.repo, pr.number); len(cs) != 1 {
		t.Errorf("%d comments, want one", len(cs))
	}
}

// restart stops the rig's daemon and starts it again on the same data
// dir, with the same flags.
func (g *forgeRig) restart() {
	g.t.Helper()
	flags := g.in.flags
	g.in.stop()
	g.in = startDaemonWith(g.t, "", flags.dataDir, func(f *runFlags) { *f = flags })
}

// restartWhile is restart that calls during once the stop waits for the
// daemon's running operations (see stopWhile).
func (g *forgeRig) restartWhile(during func()) {
	g.t.Helper()
	flags := g.in.flags
	g.stopWhile(during)
	g.in = startDaemonWith(g.t, "", flags.dataDir, func(f *runFlags) { *f = flags })
}

// stopWhile stops the rig's daemon and calls during once the stop has
// begun and waits for the running operations: say, to release an update
// held at its gate, which the stop drains.
func (g *forgeRig) stopWhile(during func()) {
	g.t.Helper()
	a := g.in.app
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		g.in.stop()
	}()
	deadline := time.Now().Add(time.Minute)
	for !a.d.ConfigStatus().Stopping {
		if time.Now().After(deadline) {
			g.t.Fatal("timed out waiting for the stop to wait for the running operations")
		}
		time.Sleep(50 * time.Millisecond)
	}
	during()
	<-stopped
}

// previewsOf is the pull requests GET /api/v1/previews lists, by number.
func (g *forgeRig) previewsOf() map[int]review.PullRequest {
	g.t.Helper()
	var res struct {
		PullRequests []review.PullRequest `json:"pullRequests"`
	}
	g.in.get("/api/v1/previews", &res)
	out := map[int]review.PullRequest{}
	for _, pr := range res.PullRequests {
		out[pr.Number] = pr
	}
	return out
}

// TestE2EPullRequestRestart: the open pull requests outlive a restart.
// One previewed before the stop is listed again with its preview; one
// whose preview the stop interrupted (queued behind a long update) is
// listed, previewed after the start, and still has one comment.
func TestE2EPullRequestRestart(t *testing.T) {
	t.Parallel()
	toolchainBin(t)
	gates := newGates(t)
	g, programs := busyRig(t, "1s")
	g.in.waitStack("busy", "the first deploy", 2*time.Minute, isReady)

	done := &pullRequest{repo: "acme/infra", name: "infra", number: 7}
	g.push(programs, done, map[string]string{"app/Pulumi.yaml": program("v2")})
	g.hook(done, "opened")
	g.waitStatus(done, "stackd/app")
	g.waitComment(done)

	// The long update, held at its gate, until the stop has interrupted
	// the preview queued behind it and waits for it.
	gates.close("update", "busy")
	busyAgain(g, programs)
	gates.waitHeld("update", "busy", 2*time.Minute)
	queued := &pullRequest{repo: "acme/infra", name: "infra", number: 8}
	g.queue(programs, queued, "v3", "opened")
	g.restartWhile(func() { gates.open("update", "busy") })

	listed := g.previewsOf()
	if pr := listed[done.number]; pr.HeadSHA != done.head || len(pr.Previews) != 1 || pr.Previews[0].Result != review.Succeeded {
		t.Errorf("after the restart, #%d is listed as %+v, want its succeeded preview at %s", done.number, pr, done.head)
	}
	if pr := listed[queued.number]; pr.HeadSHA != queued.head {
		t.Errorf("after the restart, #%d is listed as %+v, want it at %s", queued.number, pr, queued.head)
	}
	if st := g.waitStatus(queued, "stackd/app"); st.State != review.Success {
		t.Errorf("the interrupted preview, run again: %+v", st)
	}
	g.waitComment(queued)
	if pr := g.previewsOf()[queued.number]; len(pr.Previews) != 1 || pr.Previews[0].Result != review.Succeeded {
		t.Errorf("#%d after its preview: %+v", queued.number, pr)
	}
	if cs := g.forge.Comments(done.repo, done.number); len(cs) != 1 {
		t.Errorf("#%d has %d comments, want one", done.number, len(cs))
	}
}
