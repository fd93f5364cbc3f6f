package main

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
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

	"github.com/stackd/stackd/cluster"
	"github.com/stackd/stackd/cluster/etcdtest"
	"github.com/stackd/stackd/daemon/model"
)

// The cluster tests run stackd replicas as processes of their own, on
// loopback, with a real etcd (members embedded in the test process), a
// real PostgreSQL server as the shared Pulumi backend, real git and the
// real pulumi CLI with the test provider.
//
// clusterTTL is short, so that failovers take seconds, yet long enough
// for a busy machine: a replica gives its stacks up when etcd has not
// renewed its lease for two thirds of it, and etcd runs in this test
// process, under the race detector, beside the suite's other tests. With
// 4s, a replica renewing every 1.3s had to hear back within 1.3s more;
// with a build loop on both cores it did not, and gave its stacks up in
// the middle of their updates.

const (
	clusterTTL   = 9 * time.Second
	clusterGrace = 2 * time.Second
)

// clusterProgram is a Pulumi YAML program whose one resource takes the
// time its stack's config "duration" says.
const clusterProgram = `name: cluster
runtime: yaml
configuration:
  duration:
    type: String
resources:
  wait:
    type: stackdtest:index:Sleep
    properties:
      duration: ${duration}
outputs:
  duration: ${duration}
`

// gatedClusterProgram is clusterProgram whose Sleep's create and update
// wait at the gates "create-<Pulumi stack>" and "update-<Pulumi stack>"
// while the test holds them closed (clusterEnv.gates).
var gatedClusterProgram = strings.Replace(clusterProgram, "duration: ${duration}\n", "duration: ${duration}\n      gate: ${pulumi.stack}\n", 1)

// clusterEnv is what the replicas of one test share.
type clusterEnv struct {
	t          testing.TB
	exe, bin   string
	config     string
	endpoints  []string
	backend    string
	passphrase string
	dir        string
	replicas   map[string]*replica
	// maxConcurrent is each replica's --max-concurrent.
	maxConcurrent int
	// gates, when set before the first writeConfig, are every stack's
	// (its STACKDTEST_HOLD).
	gates *gates
}

// replica is one stackd process of the cluster.
type replica struct {
	name, url string
	dataDir   string
	addr      string
	cmd       *exec.Cmd
	log       *os.File
}

func newClusterEnv(t testing.TB, endpoints []string) *clusterEnv {
	t.Helper()
	e := &clusterEnv{t: t, bin: toolchainBin(t), exe: buildStackd(t), endpoints: endpoints,
		backend: startPostgres(t), dir: t.TempDir(), replicas: map[string]*replica{}, maxConcurrent: 3}
	e.config = filepath.Join(e.dir, "stackd.yaml")
	e.passphrase = filepath.Join(e.dir, "passphrase")
	if err := os.WriteFile(e.passphrase, []byte("shared by every replica\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, r := range e.replicas {
			e.stop(r, syscall.SIGKILL)
		}
		if t.Failed() {
			for _, r := range e.replicas {
				data, _ := os.ReadFile(r.log.Name())
				t.Logf("log of %s:\n%s", r.name, data)
			}
		}
	})
	return e
}

// writeConfig writes n stacks of r's main branch; durations overrides
// the default "1s" of some.
func (e *clusterEnv) writeConfig(r *repo, n int, durations map[string]string) []string {
	e.t.Helper()
	var names []string
	var sb strings.Builder
	for i := range n {
		name := fmt.Sprintf("c%02d", i)
		names = append(names, name)
		d := durations[name]
		if d == "" {
			d = "1s"
		}
		extra := fmt.Sprintf("    config: {duration: %q}\n", d)
		if e.gates != nil {
			extra += "    envRefs:\n" + e.gates.envRef()
		}
		sb.WriteString(stackYAML(name, r, extra))
	}
	e.writeStacks(sb.String())
	return names
}

// writeStacks replaces the config with one whose stacks: list is
// stacks, as one rename, so that no replica reads half of it.
func (e *clusterEnv) writeStacks(stacks string) {
	e.t.Helper()
	tmp := e.config + ".tmp"
	if err := os.WriteFile(tmp, []byte("stacks:\n"+stacks), 0o600); err != nil {
		e.t.Fatal(err)
	}
	if err := os.Rename(tmp, e.config); err != nil {
		e.t.Fatal(err)
	}
}

// start starts (or restarts) the replica name, with extra flags.
func (e *clusterEnv) start(name string, extra ...string) *replica {
	e.t.Helper()
	r := e.replicas[name]
	if r == nil {
		addr := freeAddr(e.t)
		r = &replica{name: name, addr: addr, url: "http://" + addr, dataDir: filepath.Join(e.dir, name)}
		log, err := os.Create(filepath.Join(e.dir, name+".log"))
		if err != nil {
			e.t.Fatal(err)
		}
		r.log = log
		e.replicas[name] = r
	}
	args := []string{"--cluster-etcd", strings.Join(e.endpoints, ","), "--node-name", name, "--advertise-url", r.url,
		"--cluster-lease-ttl", clusterTTL.String(), "--handover-grace", clusterGrace.String(),
		"--default-backend", e.backend, "--passphrase-file", e.passphrase, "--max-concurrent", strconv.Itoa(e.maxConcurrent)}
	r.cmd = startProcess(e.t, e.exe, e.bin, e.config, r.dataDir, r.addr, r.log, append(args, extra...)...)
	return r
}

// stop sends sig to r and waits for it to exit.
func (e *clusterEnv) stop(r *replica, sig syscall.Signal) {
	if r.cmd == nil {
		return
	}
	_ = r.cmd.Process.Signal(sig)
	_ = r.cmd.Wait()
	r.cmd = nil
}

// getJSON fetches url and decodes it into v; it returns the status.
func getJSON(url string, v any) (int, error) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode == http.StatusOK && v != nil {
		if err := json.Unmarshal(body, v); err != nil {
			return 0, err
		}
	}
	return resp.StatusCode, nil
}

// stacks lists r's view of every stack; nil when r does not answer.
func (r *replica) stacks() []model.StackView {
	var out struct{ Stacks []model.StackView }
	if code, err := getJSON(r.url+"/api/v1/stacks", &out); err != nil || code != http.StatusOK {
		return nil
	}
	return out.Stacks
}

// waitAll waits until every stack r lists satisfies cond, and r lists
// want stacks.
func (e *clusterEnv) waitAll(r *replica, want int, what string, timeout time.Duration, cond func(model.StackView) bool) []model.StackView {
	e.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		vs := r.stacks()
		if len(vs) == want && !slices.ContainsFunc(vs, func(v model.StackView) bool { return !cond(v) }) {
			return vs
		}
		if time.Now().After(deadline) {
			var bad []string
			for _, v := range vs {
				if !cond(v) {
					b, _ := json.Marshal(v.Status)
					bad = append(bad, v.Name+" ("+v.Holder+"): "+string(b))
				}
			}
			e.t.Fatalf("%s: timed out waiting for %s; %d stacks, not yet:\n%s", r.name, what, len(vs), strings.Join(bad, "\n"))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// updatesOf lists a stack's updates, oldest first, as r serves them.
func (e *clusterEnv) updatesOf(r *replica, stack string) []model.Update {
	e.t.Helper()
	var out struct{ Updates []model.Update }
	if code, err := getJSON(r.url+"/api/v1/stacks/"+stack+"/updates?limit=100", &out); err != nil || code != http.StatusOK {
		e.t.Fatalf("updates of %s from %s: %d %v", stack, r.name, code, err)
	}
	slices.Reverse(out.Updates)
	return out.Updates
}

// readyWith says whether a stack is Ready with its output duration d.
func readyWith(d string) func(model.StackView) bool {
	return func(v model.StackView) bool { return isReady(v) && output(v, "duration") == d && v.Holder != "" }
}

// checkNoOverlap fails when two updates of a stack overlap in time.
func (e *clusterEnv) checkNoOverlap(r *replica, names []string) {
	e.t.Helper()
	for _, name := range names {
		us := e.updatesOf(r, name)
		for i := 1; i < len(us); i++ {
			prev, cur := us[i-1], us[i]
			if prev.EndTime.IsZero() || cur.StartTime.Before(prev.EndTime) {
				e.t.Errorf("%s: update %s (%s, node %s) starts %s, before %s (node %s) ended at %s", name, cur.ID, cur.Type, cur.Node,
					cur.StartTime.Format(time.StampMilli), prev.ID, prev.Node, prev.EndTime.Format(time.StampMilli))
			}
		}
	}
}

// holders maps each stack to its holder, as r sees it.
func holders(vs []model.StackView) map[string]string {
	out := map[string]string{}
	for _, v := range vs {
		out[v.Name] = v.Holder
	}
	return out
}

// heldBy is the pid of the provider that last held the operation op of
// name at its gate and has not left it (0: none). A provider killed
// there stays named.
func heldBy(g *gates, op, name string) int {
	data, err := os.ReadFile(filepath.Join(g.dir, op+"-"+name+".held"))
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(string(data))
	return pid
}

// TestE2ECluster runs three replicas on 30 stacks: every stack deployed
// once by exactly one replica and shown alike by all; a replica killed in
// the middle of an update, another paused longer than its lease; then a
// rolling restart. Across it all, no stack has two updates overlapping.
func TestE2ECluster(t *testing.T) {
	t.Parallel()
	toolchainBin(t)
	etcd := etcdtest.Start(t, 1)
	e := newClusterEnv(t, etcd.Endpoints())
	e.gates = newGates(t)
	src := newRepo(t)
	src.commit(map[string]string{"Pulumi.yaml": gatedClusterProgram})
	names := e.writeConfig(src, 30, nil)
	nodes := []string{"node-1", "node-2", "node-3"}
	for _, n := range nodes {
		e.start(n)
	}

	// Deploy: every stack once, by one replica; every replica shows the
	// same thing.
	start := time.Now()
	first := e.waitAll(e.replicas["node-1"], 30, "30 stacks deployed", 5*time.Minute, readyWith("1s"))
	t.Logf("30 stacks deployed by 3 replicas in %s", time.Since(start).Round(time.Millisecond))
	owners := holders(first)
	for _, n := range nodes[1:] {
		vs := e.waitAll(e.replicas[n], 30, "30 stacks deployed", time.Minute, readyWith("1s"))
		for i, v := range vs {
			if v.Holder != first[i].Holder || v.Status.LastUpdate.Name != first[i].Status.LastUpdate.Name {
				t.Errorf("%s: %s shows holder %s and last update %s, node-1 shows %s and %s", v.Name, n, v.Holder,
					v.Status.LastUpdate.Name, first[i].Holder, first[i].Status.LastUpdate.Name)
			}
		}
	}
	per := map[string]int{}
	for _, name := range names {
		per[owners[name]]++
		if us := e.updatesOf(e.replicas["node-1"], name); len(us) != 1 || us[0].State != model.UpdateSucceeded || us[0].Node != owners[name] {
			t.Errorf("%s: updates %+v, want one succeeded by its holder %s", name, us, owners[name])
		}
	}
	var cs model.ClusterStatus
	if code, err := getJSON(e.replicas["node-2"].url+"/api/v1/cluster", &cs); err != nil || code != 200 || len(cs.Members) != 3 {
		t.Fatalf("/api/v1/cluster: %d %v %+v", code, err, cs)
	}
	for _, m := range cs.Members {
		if m.Stacks != per[m.Name] || m.URL != e.replicas[m.Name].url {
			t.Errorf("member %+v; it holds %d stacks", m, per[m.Name])
		}
	}
	t.Logf("stacks per replica: %v", per)

	killMidUpdate(t, e, names, owners)
	pauseLongerThanLease(t, e, names)
	rollingRestart(t, e, names, nodes)
	e.checkNoOverlap(e.replicas["node-1"], names)

	// The config changed twice after the start: the leader recorded each
	// revision once for the cluster.
	var revs struct{ Revisions []model.ConfigRevision }
	if code, err := getJSON(e.replicas["node-3"].url+"/api/v1/config/revisions", &revs); err != nil || code != 200 {
		t.Fatalf("revisions: %d %v", code, err)
	}
	var triggers []string
	for _, r := range revs.Revisions {
		triggers = append(triggers, r.Trigger)
	}
	if want := []string{"watch", "watch", "start"}; !slices.Equal(triggers, want) {
		t.Errorf("config revisions (newest first) %v, want %v", triggers, want)
	}
}

// slowDown makes some stacks' next update take d, as a config change.
func slowDown(e *clusterEnv, src *repo, names []string, d string) {
	durations := map[string]string{}
	for _, n := range names {
		durations[n] = d
	}
	e.writeConfig(src, 30, durations)
}

// killMidUpdate: SIGKILL a replica while it runs updates; its stacks are
// held and Ready again elsewhere within two lease periods plus the grace,
// its interrupted updates are aborted, and the lock it left is broken
// only after its lease expired. The update of one of its stacks waits at
// its gate (update-<stack>): the replica is killed while that update
// provably runs, and the update is seen run again elsewhere before the
// gate opens. (One gate only: the updates of the other stacks, held too,
// would keep the survivors' workers from running it again.)
func killMidUpdate(t *testing.T, e *clusterEnv, names []string, owners map[string]string) {
	t.Helper()
	victim := e.replicas["node-2"]
	var slow []string
	for _, n := range names {
		if owners[n] == victim.name {
			slow = append(slow, n)
		}
	}
	if len(slow) == 0 {
		t.Fatal("node-2 holds no stack")
	}
	src := repoOf(t, e)
	target := slow[0]
	stale := heldBy(e.gates, "update", target) // a provider killed at the gate before
	e.gates.close("update", target)
	slowDown(e, src, slow, "2s")
	// Wait until the victim runs the update of target.
	pid := e.gates.waitHeld("update", target, 2*time.Minute, stale)
	if r := replicaOf(e, pid); r != victim {
		t.Fatalf("the update of %s held by %d, of %v; want node-2's", target, pid, r)
	}
	killed := time.Now()
	e.stop(victim, syscall.SIGKILL)

	survivor := e.replicas["node-1"]
	var moved time.Duration
	deadline := time.Now().Add(time.Minute)
	for moved == 0 {
		vs := survivor.stacks()
		if len(vs) == 30 && !slices.ContainsFunc(vs, func(v model.StackView) bool { return v.Holder == "" || v.Holder == victim.name }) {
			moved = time.Since(killed)
		}
		if time.Now().After(deadline) {
			t.Fatalf("node-2's stacks were not held again within a minute")
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("node-2 killed in the update of %s: its %d stacks held again after %s (lease %s)", target, len(slow), moved.Round(time.Millisecond), clusterTTL)
	if limit := 2*clusterTTL + clusterGrace; moved > limit {
		t.Errorf("taking node-2's stacks over took %s, more than two leases plus the grace (%s)", moved, limit)
	}
	// The update interrupted runs again elsewhere, once the one node-2
	// ran is aborted.
	again := e.gates.waitHeld("update", target, 2*time.Minute, pid)
	if r := replicaOf(e, again); r == nil || r == victim {
		t.Errorf("the update of %s run again by %d, of %v", target, again, r)
	}
	if us := e.updatesOf(survivor, target); !slices.ContainsFunc(us, func(u model.Update) bool {
		return u.Node == victim.name && u.State == model.UpdateAborted
	}) {
		t.Errorf("%s: run again while node-2's update is not aborted: %+v", target, us)
	}
	e.gates.open("update", target)
	e.waitAll(survivor, 30, "node-2's stacks Ready again", 3*time.Minute, func(v model.StackView) bool {
		return isReady(v) && (!slices.Contains(slow, v.Name) || output(v, "duration") == "2s")
	})
	aborted := 0
	for _, n := range slow {
		us := e.updatesOf(survivor, n)
		for i, u := range us {
			if u.State != model.UpdateAborted {
				continue
			}
			aborted++
			if u.Node != victim.name || !strings.Contains(u.Message, "node-2") {
				t.Errorf("%s: aborted update %+v", n, u)
			}
			if u.EndTime.Before(killed.Add(clusterTTL / 2)) {
				t.Errorf("%s: %s marked aborted %s after the kill, before node-2's lease could expire", n, u.ID, u.EndTime.Sub(killed))
			}
			if i+1 < len(us) && us[i+1].StartTime.Before(u.EndTime.Add(clusterGrace)) {
				t.Errorf("%s: %s started %s after the abort, within the grace", n, us[i+1].ID, us[i+1].StartTime.Sub(u.EndTime))
			}
		}
	}
	if aborted == 0 {
		t.Error("no update of node-2 was recorded as aborted")
	}
	e.start("node-2")
	e.waitAll(survivor, 30, "node-2 back", time.Minute, func(v model.StackView) bool { return isReady(v) && v.Holder != "" })
}

// repoOf is the repository the config's stacks track.
func repoOf(t *testing.T, e *clusterEnv) *repo {
	t.Helper()
	data, err := os.ReadFile(e.config)
	if err != nil {
		t.Fatal(err)
	}
	_, rest, _ := strings.Cut(string(data), "projectRepo: file://")
	dir, _, _ := strings.Cut(rest, "\n")
	return &repo{t: t, dir: dir}
}

// pauseLongerThanLease: SIGSTOP a replica during an update for longer
// than its lease. Others take its stacks; when it resumes, the writes it
// had pending about them are refused (fencing), and it rejoins. The
// update of one of its stacks waits at its gate (update-<stack>): the
// replica is paused while that update provably runs, and resumes while
// the new holder's update of that stack provably runs, held until the
// late write about it was refused.
func pauseLongerThanLease(t *testing.T, e *clusterEnv, names []string) {
	t.Helper()
	victim, survivor := e.replicas["node-3"], e.replicas["node-1"]
	// Settled: each stack is held by the replica rendezvous hashing gives
	// it, none is still being handed back to node-2.
	members := slices.Sorted(maps.Keys(e.replicas))
	vs := e.waitAll(survivor, 30, "holders settled", time.Minute, func(v model.StackView) bool {
		return isReady(v) && v.Holder == cluster.Owner(v.Name, members)
	})
	var slow []string
	for _, v := range vs {
		if v.Holder == victim.name {
			slow = append(slow, v.Name)
		}
	}
	if len(slow) == 0 {
		t.Fatal("node-3 holds no stack")
	}
	target := slow[0]
	stale := heldBy(e.gates, "update", target) // a provider killed at the gate before
	e.gates.close("update", target)
	slowDown(e, repoOf(t, e), slow, "3s")
	pid := e.gates.waitHeld("update", target, 2*time.Minute, stale)
	if r := replicaOf(e, pid); r != victim {
		t.Fatalf("the update of %s held by %d, of %v; want node-3's", target, pid, r)
	}
	if err := victim.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	paused := time.Now()
	// Another replica takes the stack over and runs the update again.
	again := e.gates.waitHeld("update", target, 2*time.Minute, pid)
	if r := replicaOf(e, again); r == nil || r == victim {
		t.Errorf("the update of %s run again by %d, of %v", target, again, r)
	} else {
		t.Logf("node-3 paused in the update of %s; run again by %s %s later", target, r.name, time.Since(paused).Round(time.Millisecond))
	}
	time.Sleep(time.Until(paused.Add(2*clusterTTL + clusterGrace + time.Second)))
	if err := victim.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	// node-3's late write of the outcome of the update it ran when it was
	// paused is refused, while the new holder's update runs.
	refused := func() bool {
		logs, _ := os.ReadFile(victim.log.Name())
		for _, line := range strings.Split(string(logs), "\n") {
			if strings.Contains(line, "another replica holds the stack now") && strings.Contains(line, " stack="+target+" ") {
				return true
			}
		}
		return false
	}
	deadline := time.Now().Add(time.Minute)
	for !refused() && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	if !refused() {
		logs, _ := os.ReadFile(victim.log.Name())
		t.Errorf("node-3's late write about %s was not refused; its log:\n%s", target, logs)
	}
	var cs model.ClusterStatus
	deadline = time.Now().Add(time.Minute)
	for cs.SessionsLost == 0 || !cs.Session {
		if _, err := getJSON(victim.url+"/api/v1/cluster", &cs); err != nil || time.Now().After(deadline) {
			t.Fatalf("node-3 did not rejoin: %+v %v", cs, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if held := heldBy(e.gates, "update", target); held != again || processGone(again) {
		t.Errorf("%s: the new holder's update (%d) interrupted when node-3 came back: held by %d", target, again, held)
	}
	e.gates.open("update", target)
	e.waitAll(survivor, 30, "node-3's stacks Ready elsewhere", 3*time.Minute, func(v model.StackView) bool {
		return isReady(v) && (!slices.Contains(slow, v.Name) || output(v, "duration") == "3s")
	})
	// The update node-3 ran when it was paused stays aborted.
	us := e.updatesOf(survivor, target)
	if !slices.ContainsFunc(us, func(u model.Update) bool { return u.Node == victim.name && u.State == model.UpdateAborted }) {
		t.Errorf("%s: the update node-3 ran while paused is not recorded as aborted: %+v", target, us)
	}
}

// rollingRestart stops and starts each replica in turn: no update is lost
// and no stack runs twice for the same commit and spec.
func rollingRestart(t *testing.T, e *clusterEnv, names, nodes []string) {
	t.Helper()
	before := map[string]int{}
	settled := e.waitAll(e.replicas["node-1"], 30, "settled", 2*time.Minute, func(v model.StackView) bool { return isReady(v) && v.Holder != "" })
	for _, v := range settled {
		before[v.Name] = len(e.updatesOf(e.replicas["node-1"], v.Name))
	}
	for i, n := range nodes {
		other := e.replicas[nodes[(i+1)%len(nodes)]]
		e.stop(e.replicas[n], syscall.SIGTERM)
		e.waitAll(other, 30, n+" stopped: its stacks held elsewhere", time.Minute, func(v model.StackView) bool {
			return isReady(v) && v.Holder != "" && v.Holder != n
		})
		r := e.start(n)
		// Back means serving with a session: the stacks alone, held by the
		// others meanwhile, say nothing of a replica still starting.
		waitFor(t, n+" back in the cluster", time.Minute, func() bool {
			var cs model.ClusterStatus
			code, err := getJSON(r.url+"/api/v1/cluster", &cs)
			return err == nil && code == http.StatusOK && cs.Session
		})
		e.waitAll(other, 30, n+" back", time.Minute, func(v model.StackView) bool { return isReady(v) && v.Holder != "" })
	}
	time.Sleep(3 * time.Second) // time for a stack that would run again to start
	for _, name := range names {
		if got := len(e.updatesOf(e.replicas["node-1"], name)); got != before[name] {
			t.Errorf("%s ran again during the rolling restart: %d updates, had %d", name, got, before[name])
		}
	}
}

// TestE2EClusterQuorum: with a 3-member etcd, losing one member changes
// nothing; losing the quorum makes the replicas stop acting and say so
// (/readyz, stackd_cluster_session, the log), destroying nothing; when the
// quorum is back they go on.
func TestE2EClusterQuorum(t *testing.T) {
	t.Parallel()
	toolchainBin(t)
	etcd := etcdtest.Start(t, 3)
	e := newClusterEnv(t, etcd.Endpoints())
	src := newRepo(t)
	src.commit(map[string]string{"Pulumi.yaml": clusterProgram})
	e.writeConfig(src, 6, nil)
	for _, n := range []string{"node-1", "node-2"} {
		e.start(n)
	}
	r := e.replicas["node-1"]
	e.waitAll(r, 6, "deployed", 3*time.Minute, readyWith("1s"))

	etcd.Stop(2) // one of three: the quorum stays
	e.writeConfig(src, 6, map[string]string{"c00": "2s", "c01": "2s"})
	e.waitAll(r, 6, "a change applied with two etcd members", 2*time.Minute, func(v model.StackView) bool {
		return isReady(v) && (v.Name > "c01" || output(v, "duration") == "2s")
	})

	etcd.Stop(1) // two of three: no quorum
	lost := time.Now()
	for _, rep := range e.replicas {
		waitFor(t, rep.name+" not ready", time.Minute, func() bool {
			code, _ := getJSON(rep.url+"/readyz", nil)
			return code == http.StatusServiceUnavailable
		})
	}
	t.Logf("replicas stopped acting %s after etcd lost its quorum", time.Since(lost).Round(time.Millisecond))
	body := scrapeMetrics(t, r.url)
	if !strings.Contains(body, "stackd_cluster_session 0\n") {
		t.Errorf("/metrics without a quorum lacks stackd_cluster_session 0")
	}
	logs, _ := os.ReadFile(r.log.Name())
	if !strings.Contains(string(logs), "lost the cluster session") {
		t.Errorf("node-1's log does not say it lost its session")
	}

	restarted := make(chan error, 1)
	go func() { restarted <- etcd.Restart(1) }()
	if err := <-restarted; err != nil {
		t.Fatal(err)
	}
	back := time.Now()
	for _, rep := range e.replicas {
		waitFor(t, rep.name+" ready again", 2*time.Minute, func() bool {
			code, _ := getJSON(rep.url+"/readyz", nil)
			return code == http.StatusOK
		})
	}
	t.Logf("replicas acting again %s after the quorum came back", time.Since(back).Round(time.Millisecond))
	vs := e.waitAll(r, 6, "Ready after the quorum came back", 2*time.Minute, func(v model.StackView) bool { return isReady(v) && v.Holder != "" })
	for _, v := range vs {
		for _, u := range e.updatesOf(r, v.Name) {
			if u.Type == model.UpdateDestroy {
				t.Errorf("%s was destroyed: %+v", v.Name, u)
			}
		}
		if want := map[bool]string{true: "2s", false: "1s"}[v.Name <= "c01"]; output(v, "duration") != want {
			t.Errorf("%s: output %q, want %q", v.Name, output(v, "duration"), want)
		}
	}
}

// waitFor polls cond until it holds, for up to timeout.
func waitFor(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// scrapeMetrics returns the text of url's /metrics.
func scrapeMetrics(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return string(body)
}
