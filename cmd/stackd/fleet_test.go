package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stackd/stackd/daemon/model"
)

// countingGit serves the repositories under a root over Git's smart HTTP
// protocol (git http-backend) and notes when each ref advertisement
// (GET …/info/refs: an ls-remote, or the start of a fetch) and each pack
// request (POST …/git-upload-pack: a fetch) arrived.
type countingGit struct {
	url string

	mu      sync.Mutex
	adverts []time.Time
	packs   int
}

func newCountingGit(t testing.TB, root string) *countingGit {
	t.Helper()
	backend := gitBackend(t, root)
	g := &countingGit{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g.mu.Lock()
		switch {
		case r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/info/refs"):
			g.adverts = append(g.adverts, time.Now())
		case r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/git-upload-pack"):
			g.packs++
		}
		g.mu.Unlock()
		backend.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	g.url = srv.URL
	return g
}

// counts returns the ref advertisements since since, and the pack
// requests in all.
func (g *countingGit) counts(since time.Time) ([]time.Time, int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []time.Time
	for _, at := range g.adverts {
		if !at.Before(since) {
			out = append(out, at)
		}
	}
	return out, g.packs
}

// rounds groups times into bursts separated by more than gap.
func rounds(times []time.Time, gap time.Duration) [][]time.Time {
	var out [][]time.Time
	for i, at := range times {
		if i == 0 || at.Sub(times[i-1]) > gap {
			out = append(out, nil)
		}
		out[len(out)-1] = append(out[len(out)-1], at)
	}
	return out
}

var remoteCallsRE = regexp.MustCompile(`(?m)^stackd_git_remote_calls_total\{op="ls-remote"\} (\d+)$`)

// lsRemotes reads stackd_git_remote_calls_total{op="ls-remote"}.
func (in *instance) lsRemotes() int {
	in.t.Helper()
	_, body := in.get("/metrics", nil)
	m := remoteCallsRE.FindSubmatch(body)
	if m == nil {
		in.t.Fatalf("/metrics has no ls-remote count:\n%s", body)
	}
	n, _ := strconv.Atoi(string(m[1]))
	return n
}

// TestE2EPollPerRepository: 50 stacks on 3 branches of one repository
// poll it with one ls-remote per period, not one per stack or branch; a
// commit on one branch runs only that branch's stacks.
func TestE2EPollPerRepository(t *testing.T) {
	toolchainBin(t)
	root := t.TempDir()
	r := &repo{t: t, dir: filepath.Join(root, "fleet")}
	r.git("init", "-q", "-b", "main", r.dir)
	fleetProgram := func(branch, version string) string {
		return "name: fleet\nruntime: yaml\noutputs:\n  branch: " + branch + "\n  version: " + version + "\n"
	}
	branches := []string{"main", "blue", "green"}
	for _, b := range branches {
		if b != "main" {
			r.git("checkout", "-q", "-b", b)
		}
		r.commit(map[string]string{"Pulumi.yaml": fleetProgram(b, "v1")})
	}
	g := newCountingGit(t, root)

	var sb strings.Builder
	sb.WriteString("stacks:\n")
	branchOf := map[string]string{}
	for i := range 50 {
		name := fmt.Sprintf("s%02d", i)
		branchOf[name] = branches[i%3]
		fmt.Fprintf(&sb, "  - {name: %s, stack: %s, projectRepo: %s/fleet, branch: %s, resyncFrequencySeconds: 1}\n",
			name, name, g.url, branches[i%3])
	}
	began := time.Now()
	in := startDaemonWith(t, sb.String(), "", func(f *runFlags) { f.maxConcurrent = 4 })
	for name, b := range branchOf {
		in.waitStack(name, "deployed", 5*time.Minute, func(v model.StackView) bool {
			return isReady(v) && output(v, "branch") == b
		})
	}
	t.Logf("50 stacks on 3 branches deployed in %s", time.Since(began).Round(time.Millisecond))

	// Idle: every ref advertisement is an ls-remote now (no fetch runs),
	// and each polling round makes exactly one.
	since, metricBefore := time.Now(), in.lsRemotes()
	_, packsBefore := g.counts(since)
	time.Sleep(6 * time.Second)
	adverts, packs := g.counts(since)
	metricAfter := in.lsRemotes()
	if packs != packsBefore {
		t.Fatalf("%d fetches while idle", packs-packsBefore)
	}
	rs := rounds(adverts, 400*time.Millisecond)
	for i, round := range rs {
		if len(round) != 1 {
			t.Errorf("polling round %d made %d ls-remotes, want 1", i+1, len(round))
		}
	}
	if len(rs) < 4 || len(rs) > 8 {
		t.Errorf("%d polling rounds in 6 s with a 1 s period", len(rs))
	}
	// The metric counts the same calls (give or take a round in flight at
	// either end).
	if d := metricAfter - metricBefore - len(adverts); d < -1 || d > 1 {
		t.Errorf("stackd_git_remote_calls_total{op=\"ls-remote\"} grew by %d, the server saw %d", metricAfter-metricBefore, len(adverts))
	}
	t.Logf("idle: %d ls-remotes in %d rounds of 6 s, for 50 stacks on 3 branches", len(adverts), len(rs))

	// A commit on blue runs blue's stacks and no other.
	before := map[string]int{}
	for name := range branchOf {
		before[name] = len(in.updates(name))
	}
	r.git("checkout", "-q", "blue")
	r.commit(map[string]string{"Pulumi.yaml": fleetProgram("blue", "v2")})
	for name, b := range branchOf {
		if b == "blue" {
			in.waitStack(name, "blue's new commit", 2*time.Minute, func(v model.StackView) bool {
				return isReady(v) && output(v, "version") == "v2"
			})
		}
	}
	time.Sleep(2 * time.Second) // time for a wrongly woken stack to start
	for name, b := range branchOf {
		got := len(in.updates(name))
		switch {
		case b == "blue" && got != before[name]+1:
			t.Errorf("%s (blue): %d updates after blue's commit, had %d", name, got, before[name])
		case b != "blue" && got != before[name]:
			t.Errorf("%s (%s): ran on blue's commit: %d updates, had %d", name, b, got, before[name])
		}
	}
}

// TestE2EPaths: in a monorepo, a commit that changes no file of a stack's
// paths (by default its repoDir) runs nothing: the stack shows the commit
// as skipped and stays Ready; a commit inside them runs the stack.
func TestE2EPaths(t *testing.T) {
	t.Parallel()
	toolchainBin(t)
	r := newRepo(t)
	r.commit(map[string]string{
		"infra/net/Pulumi.yaml": "name: net\nruntime: yaml\noutputs:\n  v: v1\n",
		"infra/app/Pulumi.yaml": "name: app\nruntime: yaml\noutputs:\n  v: v1\n",
		"shared/settings.json":  "{}",
		"README.md":             "monorepo",
	})
	config := "stacks:\n" +
		stackYAML("net", r, "    repoDir: /infra/net\n") +
		stackYAML("app", r, "    repoDir: infra/app\n    paths: [infra/app/**, shared/*.json]\n")
	in := startDaemonWith(t, config, "", nil)
	for _, name := range []string{"net", "app"} {
		in.waitStack(name, "deployed", 2*time.Minute, isReady)
	}
	count := func() (int, int) { return len(in.updates("net")), len(in.updates("app")) }

	// Outside both stacks' paths.
	readme := r.commit(map[string]string{"README.md": "monorepo, edited"})
	for _, name := range []string{"net", "app"} {
		v := in.waitStack(name, "the README commit skipped", time.Minute, func(v model.StackView) bool {
			sc := v.Status.SkippedCommit
			return sc != nil && sc.Commit == readme
		})
		if !isReady(v) || !strings.Contains(v.Status.SkippedCommit.Reason, "changes no file of paths") {
			t.Errorf("%s after a commit outside its paths: ready %t, skipped %+v", name, isReady(v), v.Status.SkippedCommit)
		}
	}
	if n, a := count(); n != 1 || a != 1 {
		t.Fatalf("a commit outside every stack's paths ran updates: net %d, app %d", n, a)
	}

	// Inside app's paths only (a file of shared/ that net does not use).
	r.commit(map[string]string{"shared/settings.json": `{"size": 2}`})
	in.waitStack("app", "the shared commit deployed", time.Minute, func(v model.StackView) bool {
		return len(in.updates("app")) == 2 && isReady(v)
	})
	in.waitStack("net", "the shared commit skipped", time.Minute, func(v model.StackView) bool {
		return v.Status.SkippedCommit != nil && v.Status.SkippedCommit.Commit != readme
	})

	// Inside net's repoDir.
	r.commit(map[string]string{"infra/net/Pulumi.yaml": "name: net\nruntime: yaml\noutputs:\n  v: v2\n"})
	in.waitStack("net", "the net commit deployed", time.Minute, func(v model.StackView) bool {
		return isReady(v) && output(v, "v") == "v2" && v.Status.SkippedCommit == nil
	})
	time.Sleep(2 * time.Second) // time for app to run, were it woken
	if n, a := count(); n != 2 || a != 2 {
		t.Errorf("updates after the three commits: net %d, app %d; want 2 and 2", n, a)
	}
}
