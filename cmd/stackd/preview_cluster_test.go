package main

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stackd/stackd/cluster/etcdtest"
	"github.com/stackd/stackd/daemon"
	"github.com/stackd/stackd/daemon/review"
)

// forgeFlagsFor are the flags of a replica that reports to g's forge.
func forgeFlagsFor(t *testing.T, g *forgeRig) []string {
	dir := t.TempDir()
	tokenFile, hookFile := filepath.Join(dir, "token"), filepath.Join(dir, "hook")
	for file, v := range map[string]string{tokenFile: forgeToken, hookFile: prHookSecret} {
		if err := os.WriteFile(file, []byte(v+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return []string{"--forge", string(g.kind) + "=" + g.forge.URL(), "--forge-token-file", g.forge.URL() + "=" + tokenFile,
		"--webhook-secret-file", hookFile, "--external-url", "http://stackd.example:8080"}
}

// hookTo posts pr's webhook of action to replica r.
func (g *forgeRig) hookTo(r *replica, pr *pullRequest, action string) {
	g.t.Helper()
	body, headers := prWebhook(g.kind, action, pr, g.url(pr.name), g.forge.URL())
	if code, raw := postJSONTo(g.t, r.url+"/api/v1/webhooks/git", body, headers, nil); code != http.StatusAccepted {
		g.t.Fatalf("pull-request webhook to %s: %d %s", r.name, code, raw)
	}
}

// waitForge waits until cond holds of the fake forge's state.
func waitForge(t *testing.T, g *forgeRig, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := g.forge.WaitFor(ctx, cond); err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

// previewHolder is the replica whose log says it holds pr at its head.
func previewHolder(e *clusterEnv, pr *pullRequest) *replica {
	for _, r := range e.replicas {
		data, _ := os.ReadFile(r.log.Name())
		for _, line := range strings.Split(string(data), "\n") {
			if strings.Contains(line, "holding pull request") && strings.Contains(line, pr.head) {
				return r
			}
		}
	}
	return nil
}

// TestE2EClusterPullRequest is the acceptance of previews in a cluster:
// two replicas (processes) with a real etcd, the real pulumi CLI and a
// fake GitHub. A webhook to either replica gives one set of statuses and
// one comment, written by the one replica that holds the pull request's
// lease; when that replica is SIGKILLed in the middle of the preview of
// a newer push, the other takes the pull request over once the lease
// expired, runs the preview again, and edits the same comment; the
// preview left running is recorded as aborted; every replica lists the
// pull request.
func TestE2EClusterPullRequest(t *testing.T) {
	toolchainBin(t)
	etcd := etcdtest.Start(t, 1)
	e := newClusterEnv(t, etcd.Endpoints())
	g := newForgeRig(t, review.GitHub)
	programs := g.repo("infra")
	programs.commit(map[string]string{"app/Pulumi.yaml": program("v1")})
	// Each diff of the stack's file takes 10s: a preview lasts long
	// enough to be interrupted.
	config := manifest("app", g.url("infra"), t.TempDir(), "hello") +
		"    envRefs:\n      STACKDTEST_DIFF_DELAY: {type: Literal, literal: {value: 10s}}\n"
	if err := os.WriteFile(e.config, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	flags := forgeFlagsFor(t, g)
	n1, n2 := e.start("node-1", flags...), e.start("node-2", flags...)
	e.waitAll(n1, 1, "app deployed", 3*time.Minute, func(v daemon.StackView) bool { return isReady(v) && v.Holder != "" })

	// A webhook to node-2: one set of statuses, one comment.
	pr := &pullRequest{repo: "acme/infra", name: "infra", number: 9}
	g.push(programs, pr, map[string]string{"app/Pulumi.yaml": program("v2")})
	g.hookTo(n2, pr, "opened")
	waitForge(t, g, "the comment on the first head", func() bool {
		cs := g.forge.Comments(pr.repo, pr.number)
		return len(cs) == 1 && strings.Contains(cs[0].Body, pr.head[:12])
	})
	sts := g.forge.Statuses(pr.repo, pr.head)
	if len(sts) != 2 || sts[0].State != review.Pending || sts[1].State != review.Success {
		t.Errorf("statuses of the first head %+v, want one pending then one success", sts)
	}
	if h := previewHolder(e, pr); h == nil {
		t.Error("no replica logged holding the pull request")
	}

	// A push, to node-1; its holder is killed during the preview.
	first := pr.head
	g.push(programs, pr, map[string]string{"app/Pulumi.yaml": program("v3")})
	g.hookTo(n1, pr, "synchronize")
	var victim *replica
	waitFor(t, "the preview of the push running", 2*time.Minute, func() bool {
		var list struct{ PullRequests []review.PullRequest }
		if code, err := getJSON(n1.url+"/api/v1/previews", &list); err != nil || code != http.StatusOK {
			return false
		}
		for _, p := range list.PullRequests {
			if p.Number == pr.number && p.HeadSHA == pr.head && len(p.Previews) == 1 && p.Previews[0].Result == review.Running {
				victim = previewHolder(e, pr)
				return victim != nil
			}
		}
		return false
	})
	time.Sleep(2 * time.Second) // inside the 10s diff
	killed := time.Now()
	e.stop(victim, syscall.SIGKILL)
	survivor := n1
	if victim == n1 {
		survivor = n2
	}
	t.Logf("%s previewed %s; killed it", victim.name, pr.head[:12])

	waitForge(t, g, "the survivor's final status", func() bool {
		sts := g.forge.Statuses(pr.repo, pr.head)
		return len(sts) > 0 && sts[len(sts)-1].State == review.Success
	})
	t.Logf("previewed again by %s %s after the kill", survivor.name, time.Since(killed).Round(time.Millisecond))
	waitForge(t, g, "the comment on the second head", func() bool {
		cs := g.forge.Comments(pr.repo, pr.number)
		return len(cs) == 1 && strings.Contains(cs[0].Body, pr.head[:12])
	})
	if h := previewHolder(e, pr); h != survivor && h != victim {
		t.Errorf("holder of the second head: %v", h)
	}
	if cs := g.forge.Comments(pr.repo, pr.number); len(cs) != 1 || cs[0].Edits < 1 || strings.Contains(cs[0].Body, first[:12]) {
		t.Errorf("comments %+v, want one, edited, about the second head", cs)
	}
	for _, st := range g.forge.Statuses(pr.repo, first) {
		if st.State == review.Error {
			t.Errorf("the first head's finished preview was marked superseded: %+v", st)
		}
	}

	// The history: the interrupted preview aborted, the second one
	// succeeded, none left running.
	var aborted, succeeded int
	for _, u := range e.updatesOf(survivor, "app") {
		if u.Type != daemon.UpdatePreview || u.Commit != pr.head {
			continue
		}
		switch u.State {
		case daemon.UpdateAborted:
			aborted++
		case daemon.UpdateSucceeded:
			succeeded++
		default:
			t.Errorf("preview %s of the second head is %s", u.ID, u.State)
		}
	}
	if aborted != 1 || succeeded != 1 {
		t.Errorf("previews of the second head: %d aborted, %d succeeded; want one each", aborted, succeeded)
	}
	var list struct{ PullRequests []review.PullRequest }
	if code, err := getJSON(survivor.url+"/api/v1/previews", &list); err != nil || code != http.StatusOK ||
		len(list.PullRequests) != 1 || list.PullRequests[0].HeadSHA != pr.head || list.PullRequests[0].Previews[0].Result != review.Succeeded {
		t.Errorf("GET /api/v1/previews of %s: %d %v %+v", survivor.name, code, err, list.PullRequests)
	}
	g.noLeaks(forgeToken)
}
