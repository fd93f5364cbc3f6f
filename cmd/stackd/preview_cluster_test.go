package main

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stackd/stackd/cluster/etcdtest"
	"github.com/stackd/stackd/daemon/model"
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
// pull request. The diff of the push's preview waits at its gate
// (diff-app.txt): the holder is killed while its preview provably runs,
// and the other replica's preview is seen held in turn before it opens.
func TestE2EClusterPullRequest(t *testing.T) {
	t.Parallel()
	toolchainBin(t)
	etcd := etcdtest.Start(t, 1)
	e := newClusterEnv(t, etcd.Endpoints())
	g := newForgeRig(t, review.GitHub)
	programs := g.repo("infra")
	programs.commit(map[string]string{"app/Pulumi.yaml": program("v1")})
	gates := newGates(t)
	config := manifest("app", g.url("infra"), outDir(t), "hello") + "    envRefs:\n" + gates.envRef()
	if err := os.WriteFile(e.config, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	flags := forgeFlagsFor(t, g)
	n1, n2 := e.start("node-1", flags...), e.start("node-2", flags...)
	e.waitAll(n1, 1, "app deployed", 3*time.Minute, func(v model.StackView) bool { return isReady(v) && v.Holder != "" })

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

	// A push, to node-1; its holder is killed during the preview, whose
	// diff waits at its gate.
	first := pr.head
	gates.close("diff", "app.txt")
	g.push(programs, pr, map[string]string{"app/Pulumi.yaml": program("v3")})
	g.hookTo(n1, pr, "synchronize")
	pid := gates.waitHeld("diff", "app.txt", 2*time.Minute)
	victim := replicaOf(e, pid)
	if victim == nil {
		t.Fatalf("the provider %d holding the diff descends from no replica", pid)
	}
	waitFor(t, "the preview of the push running", time.Minute, func() bool {
		var list struct{ PullRequests []review.PullRequest }
		if code, err := getJSON(n1.url+"/api/v1/previews", &list); err != nil || code != http.StatusOK {
			return false
		}
		for _, p := range list.PullRequests {
			if p.Number == pr.number && p.HeadSHA == pr.head && len(p.Previews) == 1 && p.Previews[0].Result == review.Running {
				return true
			}
		}
		return false
	})
	if h := previewHolder(e, pr); h != victim {
		t.Fatalf("the preview of the push held in %v's provider; the pull request's holder is %v", victim, h)
	}
	killed := time.Now()
	e.stop(victim, syscall.SIGKILL)
	survivor := n1
	if victim == n1 {
		survivor = n2
	}
	t.Logf("%s previewed %s; killed it", victim.name, pr.head[:12])

	// The survivor takes the pull request over and runs the preview
	// again, held in turn: the one left running is aborted by then.
	again := gates.waitHeld("diff", "app.txt", 2*time.Minute, pid)
	if r := replicaOf(e, again); r != survivor {
		t.Fatalf("the diff held again by %d, of %v; want %s's", again, r, survivor.name)
	}
	var states, nodes []string
	for _, u := range e.updatesOf(survivor, "app") {
		if u.Type == model.UpdatePreview && u.Commit == pr.head {
			states, nodes = append(states, u.State), append(nodes, u.Node)
		}
	}
	if got, want := strings.Join(states, " "), model.UpdateAborted+" "+model.UpdateRunning; got != want {
		t.Errorf("previews of the second head while the survivor's runs: %q, want %q", got, want)
	}
	// Each record names the replica that ran it.
	if got, want := strings.Join(nodes, " "), victim.name+" "+survivor.name; got != want {
		t.Errorf("the replicas of the previews of the second head: %q, want %q", got, want)
	}
	gates.open("diff", "app.txt")

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
		if u.Type != model.UpdatePreview || u.Commit != pr.head {
			continue
		}
		switch u.State {
		case model.UpdateAborted:
			aborted++
		case model.UpdateSucceeded:
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

// workHolder is the replica whose log says it took pr's lease for work,
// an Event.WorkKey.
func workHolder(e *clusterEnv, work string) *replica {
	for _, r := range e.replicas {
		data, _ := os.ReadFile(r.log.Name())
		for _, line := range strings.Split(string(data), "\n") {
			if strings.Contains(line, "holding pull request") && strings.Contains(line, "work="+work) {
				return r
			}
		}
	}
	return nil
}

// replicaOf is the replica whose process pid descends from; nil if none.
func replicaOf(e *clusterEnv, pid int) *replica {
	for _, r := range e.replicas {
		if r.cmd != nil && slices.Contains(descendants(r.cmd.Process.Pid), pid) {
			return r
		}
	}
	return nil
}

// processGone reports whether the process pid has ended: it is gone, or
// a zombie that nothing reaped yet.
func processGone(pid int) bool {
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return true
	}
	fields := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+1:]))
	return len(fields) > 0 && fields[0] == "Z"
}

// backendStacks lists the stacks of the Pulumi backend at url.
func backendStacks(t *testing.T, url string) string {
	t.Helper()
	bin := toolchainBin(t)
	cmd := exec.Command(filepath.Join(bin, "pulumi"), "stack", "ls", "--all", "--non-interactive")
	cmd.Env = []string{"PATH=" + bin + ":/usr/bin:/bin", "HOME=" + t.TempDir(), "PULUMI_HOME=" + t.TempDir(),
		"PULUMI_SKIP_UPDATE_CHECK=true", "PULUMI_BACKEND_URL=" + url}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("pulumi stack ls: %v\n%s", err, out)
	}
	return string(out)
}

// TestE2EClusterReviewStacks is the acceptance of review stacks in a
// cluster: two replicas (processes) with a real etcd, a PostgreSQL
// backend and a fake GitHub. A pull request's review stack is deployed
// by the replica holding the pull request, and updated on a push sent to
// either. It closes while the deploy of its last push runs: the deploy
// is cancelled before its change is made, and the review stack
// destroyed. The closing is work of the pull request's holder, which is
// SIGKILLed in the middle of the destroy (its provider dies with it):
// the other takes the closing over once the lease expired and destroys
// it (the file is gone, the Pulumi stack removed), with still one
// comment, and the pull request is forgotten. The test holds the deploy
// and both destroys at their provider's gates. A pull request quiet past its template's TTL has its review
// stack destroyed by its holder, as the replicas ask (a sweep).
func TestE2EClusterReviewStacks(t *testing.T) {
	t.Parallel()
	toolchainBin(t)
	etcd := etcdtest.Start(t, 1)
	e := newClusterEnv(t, etcd.Endpoints())
	g := newForgeRig(t, review.GitHub)
	programs := g.repo("infra")
	programs.commit(map[string]string{"app/Pulumi.yaml": reviewProgram("v1"), "quick/Pulumi.yaml": reviewProgram("v1")})
	out := outDir(t)
	// app's files have gates: the test holds the review stack's update
	// and delete open.
	gates := newGates(t)
	config := "stacks:\n" + templateStack("app", g.url("infra"), out, "1h") + "    envRefs:\n" + gates.envRef() +
		templateStack("quick", g.url("infra"), out, "5s")
	if err := os.WriteFile(e.config, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	flags := forgeFlagsFor(t, g)
	n1, n2 := e.start("node-1", flags...), e.start("node-2", flags...)
	e.waitAll(n1, 2, "the templates deployed", 3*time.Minute, func(v model.StackView) bool { return isReady(v) && v.Holder != "" })

	pr := &pullRequest{repo: "acme/infra", name: "infra", number: 5}
	g.push(programs, pr, map[string]string{"app/Pulumi.yaml": reviewProgram("v2")})
	g.hookTo(n2, pr, "opened")
	reviewFile := filepath.Join(out, "app-pr-5.txt")
	if err := waitPath(reviewFile, "review v2", 3*time.Minute); err != nil {
		t.Fatal(err)
	}
	waitForge(t, g, "the comment saying it is deployed", func() bool {
		cs := g.forge.Comments(pr.repo, pr.number)
		return len(cs) == 1 && strings.Contains(cs[0].Body, "| `app-pr-5` | `"+pr.head[:12]+"` | ✅ deployed |")
	})
	if !strings.Contains(backendStacks(t, e.backend), "app-pr-5") {
		t.Error("the backend has no Pulumi stack app-pr-5")
	}
	// The leader alone reports the cluster's review stacks.
	waitFor(t, "the review stack counted once", time.Minute, func() bool {
		reports := 0
		for _, r := range []*replica{n1, n2} {
			if m := scrapeMetrics(t, r.url); strings.Contains(m, `stackd_review_stacks{state="deployed"} 1`+"\n") {
				reports++
			} else if strings.Contains(m, "stackd_review_stacks{") {
				return false
			}
		}
		return reports == 1
	})

	// A push, sent to the other replica, updates it.
	g.push(programs, pr, map[string]string{"app/Pulumi.yaml": reviewProgram("v3")})
	g.hookTo(n1, pr, "synchronize")
	if err := waitPath(reviewFile, "review v3", 3*time.Minute); err != nil {
		t.Fatal(err)
	}

	// The pull request closes while the deploy of its last push runs
	// (held at its update): the deploy is cancelled, its change never
	// made, and the review stack destroyed. The replica destroying it is
	// killed in the middle of the destroy (held at its delete).
	waitForge(t, g, "the comment saying v3 is deployed", func() bool {
		cs := g.forge.Comments(pr.repo, pr.number)
		return len(cs) == 1 && strings.Contains(cs[0].Body, "| `app-pr-5` | `"+pr.head[:12]+"` | ✅ deployed |")
	})
	gates.close("update", "app-pr-5.txt")
	gates.close("delete", "app-pr-5.txt")
	g.push(programs, pr, map[string]string{"app/Pulumi.yaml": reviewProgram("v4")})
	g.hookTo(n2, pr, "synchronize")
	gates.waitHeld("update", "app-pr-5.txt", 3*time.Minute)
	g.hookTo(n1, pr, "closed")
	closing := review.Event{HeadSHA: pr.head, Action: review.Closed}
	held := gates.waitHeld("delete", "app-pr-5.txt", 3*time.Minute)
	if data, err := os.ReadFile(reviewFile); err != nil || string(data) != "review v3" {
		t.Errorf("the review stack's file holds %q (%v) once the destroy runs, want the cancelled deploy's change never made", data, err)
	}
	victim := replicaOf(e, held)
	if victim == nil {
		t.Fatalf("no replica runs the destroy's provider %d", held)
	}
	e.stop(victim, syscall.SIGKILL)
	waitFor(t, "the killed replica's provider gone", time.Minute, func() bool { return processGone(held) })
	survivor := n1
	if victim == n1 {
		survivor = n2
	}
	killed := time.Now()
	gates.waitHeld("delete", "app-pr-5.txt", 3*time.Minute, held)
	if data, err := os.ReadFile(reviewFile); err != nil || string(data) != "review v3" {
		t.Errorf("the review stack's file holds %q (%v) once the survivor's destroy runs, want it as it was", data, err)
	}
	gates.open("delete", "app-pr-5.txt")
	if err := waitPath(reviewFile, "", 3*time.Minute); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s destroyed the review stack %s after %s was killed", survivor.name, time.Since(killed).Round(time.Millisecond), victim.name)
	if h := workHolder(e, closing.WorkKey()); h != survivor {
		t.Errorf("the replica that logged taking the closing over is %v, want %s", h, survivor.name)
	}
	waitFor(t, "the Pulumi stack app-pr-5 removed", time.Minute, func() bool {
		return !strings.Contains(backendStacks(t, e.backend), "app-pr-5")
	})
	waitForge(t, g, "the comment saying it is destroyed", func() bool {
		cs := g.forge.Comments(pr.repo, pr.number)
		return len(cs) == 1 && strings.Contains(cs[0].Body, "| `app-pr-5` | `"+pr.head[:12]+"` | 🗑️ destroyed |")
	})
	waitFor(t, "the closed pull request forgotten", time.Minute, func() bool {
		var list struct{ PullRequests []review.PullRequest }
		code, err := getJSON(survivor.url+"/api/v1/previews", &list)
		return err == nil && code == http.StatusOK && len(list.PullRequests) == 0
	})

	// Both replicas again; a pull request goes quiet past quick's TTL.
	both := []*replica{survivor, e.start(victim.name, flags...)}
	quiet := &pullRequest{repo: "acme/infra", name: "infra", number: 6}
	g.push(programs, quiet, map[string]string{"quick/Pulumi.yaml": reviewProgram("v2")})
	opened := time.Now()
	g.hookTo(survivor, quiet, "opened")
	quietFile := filepath.Join(out, "quick-pr-6.txt")
	if err := waitPath(quietFile, "review v2", 3*time.Minute); err != nil {
		t.Fatal(err)
	}
	// Events that repeat the head commit, to either replica, are activity:
	// it lives on past its TTL counted from the opening.
	last := opened
	for i := range 8 {
		quiet.delivery = i + 1
		last = time.Now() // the touch is later
		g.hookTo(both[i%2], quiet, "synchronize")
		time.Sleep(1500 * time.Millisecond)
	}
	if _, err := os.Stat(quietFile); err != nil {
		t.Fatalf("the review stack was destroyed %v after the opening while its pull request was active: %v", time.Since(opened).Round(time.Millisecond), err)
	}
	if err := waitPath(quietFile, "", 3*time.Minute); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(last); took < 5*time.Second {
		t.Errorf("the quiet review stack was destroyed %v after the pull request's last event, before its TTL", took)
	}
	t.Logf("the quiet review stack was destroyed %v after its pull request's last event (TTL 5s), %v after its opening",
		time.Since(last).Round(time.Millisecond), time.Since(opened).Round(time.Millisecond))
	swept := false
	for _, r := range e.replicas {
		data, _ := os.ReadFile(r.log.Name())
		swept = swept || strings.Contains(string(data), "/sweep-")
	}
	if !swept {
		t.Error("no replica logged holding a sweep")
	}
	g.noLeaks(forgeToken)
}
