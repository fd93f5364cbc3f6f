package main

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stackd/stackd/cluster/etcdtest"
	"github.com/stackd/stackd/daemon/model"
	"github.com/stackd/stackd/daemon/notify"
)

// The StackSet tests run a daemon in-process on real git repositories,
// the real pulumi CLI, the YAML host and the test provider: stacks
// generated from a template by a git directories generator, and a rollout
// in three steps of a commit to a program seven stacks share.

// rolloutStacks are the rollout's stacks, by step.
var rolloutStacks = [][]string{{"dev-1", "dev-2"}, {"canary-1", "canary-2"}, {"prod-1", "prod-2", "prod-3"}}

// rolloutConfig is a StackSet of the seven stacks of rolloutStacks, each
// "web-<name>", labelled env=<step>, deploying r's program; canary-1
// writes its file in dir c1 of out, which the test can break. Every
// stack's File passes its gates.
func rolloutConfig(r *repo, out string, g *gates) string {
	var elems strings.Builder
	for i, step := range rolloutStacks {
		env := []string{"dev", "canary", "prod"}[i]
		for _, name := range step {
			path := filepath.Join(out, name+".txt")
			if name == "canary-1" {
				path = filepath.Join(out, "c1", name+".txt")
			}
			fmt.Fprintf(&elems, "            - {name: %s, env: %s, path: %q}\n", name, env, path)
		}
	}
	return `stackSets:
  - name: web
    generators:
      - list:
          elements:
` + elems.String() + `    strategy:
      type: RollingSync
      rollingSync:
        steps:
          - matchLabels: {env: dev}
          - matchLabels: {env: canary}
          - matchLabels: {env: prod}
            maxUpdate: 1
    template:
      metadata:
        name: 'web-{{.name}}'
        labels: {env: '{{.env}}'}
      spec:
        stack: 'web-{{.name}}'
        projectRepo: file://` + r.dir + `
        branch: main
        resyncFrequencySeconds: 1
        config: {path: '{{.path}}'}
        envRefs:
` + strings.ReplaceAll(g.envRef(), "      STACKDTEST_HOLD", "          STACKDTEST_HOLD")
}

// sample is what one look at the stacks saw: by stack, the commit of the
// update running (empty: none) and of its last successful one.
type sample struct {
	at      time.Time
	running map[string]string
	applied map[string]string
}

// sampler looks at the daemon's stacks every 100 ms until stopped.
type sampler struct {
	samples []sample
	stop    chan struct{}
	done    chan struct{}
}

func startSampler(in *instance) *sampler {
	s := &sampler{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			var out struct{ Stacks []model.StackView }
			if code, _, err := in.tryGet("/api/v1/stacks", &out); err == nil && code == http.StatusOK {
				sm := sample{at: time.Now(), running: map[string]string{}, applied: map[string]string{}}
				for _, v := range out.Stacks {
					if cu := v.Status.CurrentUpdate; cu != nil {
						sm.running[v.Name] = cu.Commit
					}
					if lu := v.Status.LastUpdate; lu != nil {
						sm.applied[v.Name] = lu.LastSuccessfulCommit
					}
				}
				s.samples = append(s.samples, sm)
			}
			select {
			case <-s.stop:
				return
			case <-tick.C:
			}
		}
	}()
	return s
}

func (s *sampler) finish() []sample {
	close(s.stop)
	<-s.done
	return s.samples
}

// checkOrder fails when a sample shows a prod stack running commit while
// a dev or canary stack had not applied it, or two prod stacks running.
func checkOrder(t *testing.T, samples []sample, commit string) {
	t.Helper()
	for _, sm := range samples {
		var prod []string
		for _, name := range rolloutStacks[2] {
			if sm.running["web-"+name] == commit {
				prod = append(prod, name)
			}
		}
		if len(prod) > 1 {
			t.Errorf("%s: prod stacks %v update at once (maxUpdate 1)", sm.at.Format(time.StampMilli), prod)
		}
		if len(prod) == 0 {
			continue
		}
		for _, name := range slices.Concat(rolloutStacks[0], rolloutStacks[1]) {
			if sm.applied["web-"+name] != commit {
				t.Errorf("%s: %v updates to %.7s while web-%s has applied %.7s", sm.at.Format(time.StampMilli), prod, commit, name, sm.applied["web-"+name])
			}
		}
	}
}

// checkHistory checks the same from the update history, which misses no
// update: every up of a prod stack to commit starts after every dev and
// canary stack's up to it ended, and no two of them overlap.
func checkHistory(t *testing.T, in *instance, commit string) {
	t.Helper()
	var earlierEnd time.Time
	for _, name := range slices.Concat(rolloutStacks[0], rolloutStacks[1]) {
		u := lastUpTo(t, in, "web-"+name, commit)
		if u.EndTime.After(earlierEnd) {
			earlierEnd = u.EndTime
		}
	}
	var prod []model.Update
	for _, name := range rolloutStacks[2] {
		u := lastUpTo(t, in, "web-"+name, commit)
		if u.StartTime.Before(earlierEnd) {
			t.Errorf("%s's up to %.7s started at %s, before the earlier steps ended (%s)", u.Stack, commit,
				u.StartTime.Format(time.StampMilli), earlierEnd.Format(time.StampMilli))
		}
		prod = append(prod, u)
	}
	slices.SortFunc(prod, func(a, b model.Update) int { return a.StartTime.Compare(b.StartTime) })
	for i := 1; i < len(prod); i++ {
		if prod[i].StartTime.Before(prod[i-1].EndTime) {
			t.Errorf("%s and %s overlap: maxUpdate 1", prod[i-1].Stack, prod[i].Stack)
		}
	}
}

// lastUpTo is the last successful up of stack to commit.
func lastUpTo(t *testing.T, in *instance, stack, commit string) model.Update {
	t.Helper()
	var out struct{ Updates []model.Update }
	in.get("/api/v1/stacks/"+stack+"/updates?limit=100", &out)
	for _, u := range out.Updates { // newest first
		if u.Type == model.UpdateUp && u.Commit == commit && u.State == model.UpdateSucceeded {
			return u
		}
	}
	t.Fatalf("%s has no successful up to %.7s", stack, commit)
	return model.Update{}
}

// allApplied says whether every stack of the rollout applied commit.
func allApplied(in *instance, commit string) func() bool {
	return func() bool {
		for _, step := range rolloutStacks {
			for _, name := range step {
				v := in.stack("web-" + name)
				if lu := v.Status.LastUpdate; lu == nil || lu.LastSuccessfulCommit != commit || v.Status.CurrentUpdate != nil {
					return false
				}
			}
		}
		return true
	}
}

func (in *instance) stackSet(name string) model.StackSetView {
	in.t.Helper()
	var v model.StackSetView
	if code, body := in.get("/api/v1/stacksets/"+name, &v); code != http.StatusOK {
		in.t.Fatalf("GET stackset %s: %d %s", name, code, body)
	}
	return v
}

// rolloutEnv is a daemon running the rollout's seven stacks, all on v1
// of src's program, their files in out, their gates g.
type rolloutEnv struct {
	in      *instance
	src     *repo
	out, v1 string
	g       *gates
}

// startRollout starts a daemon (its flags changed by tweak) on
// rolloutConfig and waits for v1 to reach every stack.
func startRollout(t *testing.T, tweak func(*runFlags)) rolloutEnv {
	t.Helper()
	toolchainBin(t)
	r := rolloutEnv{out: outDir(t), g: newGates(t), src: newRepo(t)}
	if err := os.MkdirAll(filepath.Join(r.out, "c1"), 0o755); err != nil {
		t.Fatal(err)
	}
	r.v1 = r.src.commit(map[string]string{"Pulumi.yaml": program("v1")})
	r.in = startDaemonWith(t, rolloutConfig(r.src, r.out, r.g), "", tweak)
	waitFor(t, "v1 everywhere", 3*time.Minute, allApplied(r.in, r.v1))
	return r
}

// TestE2ERollout rolls three commits out to the seven stacks of a
// three-step rollout: every prod stack after every dev and canary stack
// succeeded on the commit, one prod stack at a time; a canary that fails
// halts it with no prod stack changed, until a resume after the cause is
// gone; a commit that breaks the program halts it at its first step, and
// the fixing commit after it rolls out from the first step again.
func TestE2ERollout(t *testing.T) {
	t.Parallel()
	receiver, events := notifyReceiver(t)
	r := startRollout(t, func(f *runFlags) { _ = f.notifyURLs.Set(receiver.URL) })
	in, src, out, g := r.in, r.src, r.out, r.g
	for _, step := range rolloutStacks {
		for _, name := range step {
			if v := in.stack("web-" + name); v.Owner != "StackSet/web" {
				t.Errorf("web-%s: owner %q, want StackSet/web", name, v.Owner)
			}
		}
	}

	// v2: in order, one prod stack at a time. prod-1's update is held at
	// its gate: the other prod stacks wait, saying why.
	g.close("update", "prod-1.txt")
	s := startSampler(in)
	v2 := src.commit(map[string]string{"Pulumi.yaml": program("v2")})
	g.waitHeld("update", "prod-1.txt", 2*time.Minute)
	for _, name := range []string{"prod-2", "prod-3"} {
		in.waitStack("web-"+name, "waiting for the rollout", time.Minute, waitingFor(model.ReasonRolloutWaiting))
	}
	if rs := in.stackSet("web").Rollout; rs == nil || rs.Step != 3 || rs.State != model.RolloutProgressing {
		t.Errorf("rollout while prod-1 updates: %+v", rs)
	}
	g.open("update", "prod-1.txt")
	waitFor(t, "v2 everywhere", 3*time.Minute, allApplied(in, v2))
	checkOrder(t, s.finish(), v2)
	checkHistory(t, in, v2)

	// v3 with canary-1 broken: the rollout halts; no prod stack moves.
	c1 := filepath.Join(out, "c1")
	if err := os.RemoveAll(c1); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(c1, []byte("not a directory"), 0o644); err != nil {
		t.Fatal(err)
	}
	v3 := src.commit(map[string]string{"Pulumi.yaml": program("v3")})
	in.waitStack("web-prod-1", "halted", 3*time.Minute, waitingFor(model.ReasonRolloutHalted))
	failures := in.stack("web-canary-1").Status.LastUpdate.Failures
	time.Sleep(3 * time.Second) // longer than the retry backoff: a retry would show
	rs := in.stackSet("web").Rollout
	if rs == nil || rs.State != model.RolloutHalted || !slices.Contains(rs.HaltedBy, "web-canary-1") {
		t.Fatalf("rollout after canary-1 failed: %+v", rs)
	}
	for _, name := range rolloutStacks[2] {
		v := in.stack("web-" + name)
		if v.Status.LastUpdate.LastSuccessfulCommit != v2 || v.Status.CurrentUpdate != nil {
			t.Errorf("web-%s moved during the halt: %+v", name, v.Status.LastUpdate)
		}
	}
	if f := in.stack("web-canary-1").Status.LastUpdate.Failures; f != failures {
		t.Errorf("canary-1 was retried during the halt: failures %d, then %d", failures, f)
	}
	if e := waitEventOf(t, events, notify.RolloutHalted, "web-canary-1"); !strings.Contains(e.Message, "StackSet web") {
		t.Errorf("notification %+v", e)
	}
	drain(t, events)
	if _, metrics := in.get("/metrics", nil); !strings.Contains(string(metrics), `stackd_rollout_halted{set="web"} 1`) ||
		!strings.Contains(string(metrics), `stackd_stackset_stacks{set="web"} 7`) {
		t.Errorf("/metrics during the halt lacks the halted rollout:\n%s", grepLines(string(metrics), "stackd_rollout"))
	}
	if code, page := in.get("/stacksets/web", nil); code != http.StatusOK || !strings.Contains(string(page), "Rollout halted") ||
		!strings.Contains(string(page), "web-prod-3") {
		t.Errorf("the set's page during the halt: %d\n%s", code, page)
	}

	// The cause gone, a resume completes the rollout of v3.
	if err := os.Remove(c1); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(c1, 0o755); err != nil {
		t.Fatal(err)
	}
	s = startSampler(in)
	if code, stdout, stderr := stackd(t, in.clientArgs("rollout", "resume", "web")...); code != exitOK {
		t.Fatalf("rollout resume: %d %s %s", code, stdout, stderr)
	}
	waitFor(t, "v3 everywhere", 3*time.Minute, allApplied(in, v3))
	checkOrder(t, s.finish(), v3)
	checkHistory(t, in, v3)
	code, stdout, stderr := stackd(t, in.clientArgs("rollout", "status", "web")...)
	if code != exitOK || !strings.Contains(stdout, "web-prod-3") || !strings.Contains(stdout, model.RolloutComplete) {
		t.Errorf("rollout status: %d\n%s\n%s", code, stdout, stderr)
	}

	// v4 breaks the program: the dev stacks fail, the rollout halts at
	// its first step, and the fixing commit v5 rolls out in order.
	v4 := src.commit(map[string]string{"Pulumi.yaml": strings.Replace(program("v4"), "stackdtest:index:File", "stackdtest:index:NoSuchResource", 1)})
	for _, name := range slices.Concat(rolloutStacks[1], rolloutStacks[2]) {
		in.waitStack("web-"+name, "halted by dev", 3*time.Minute, waitingFor(model.ReasonRolloutHalted))
	}
	if rs := in.stackSet("web").Rollout; rs == nil || rs.State != model.RolloutHalted || rs.Step != 1 {
		t.Errorf("rollout of the broken %.7s: %+v", v4, rs)
	}
	s = startSampler(in)
	v5 := src.commit(map[string]string{"Pulumi.yaml": program("v5")})
	waitFor(t, "v5 everywhere", 3*time.Minute, allApplied(in, v5))
	checkOrder(t, s.finish(), v5)
	checkHistory(t, in, v5)
}

// TestE2ERolloutEarlierStepsHealthyFromPreviousCommit is Argo CD's
// #29410: the earlier steps are healthy, from the previous commit, when a
// new one arrives. The dev stacks' updates to it are held at their gates:
// while they run, every later stack waits, though every dev stack's status
// still says its last update succeeded.
func TestE2ERolloutEarlierStepsHealthyFromPreviousCommit(t *testing.T) {
	t.Parallel()
	r := startRollout(t, nil)
	in, src, g, v1 := r.in, r.src, r.g, r.v1

	g.close("update", "dev-1.txt")
	s := startSampler(in)
	v2 := src.commit(map[string]string{"Pulumi.yaml": program("v2")})
	g.waitHeld("update", "dev-1.txt", 2*time.Minute)
	waitFor(t, "dev-2 on v2", time.Minute, func() bool {
		lu := in.stack("web-dev-2").Status.LastUpdate
		return lu != nil && lu.LastSuccessfulCommit == v2
	})
	for _, name := range slices.Concat(rolloutStacks[1], rolloutStacks[2]) {
		v := in.waitStack("web-"+name, "waiting for dev-1", time.Minute, waitingFor(model.ReasonRolloutWaiting))
		if lu := v.Status.LastUpdate; lu == nil || lu.State != model.UpdateSucceeded || lu.LastSuccessfulCommit != v1 {
			t.Errorf("web-%s: last update %+v, want a success on v1", name, lu)
		}
	}
	if v := in.stack("web-dev-1"); v.Status.LastUpdate.State != model.UpdateSucceeded {
		t.Errorf("dev-1's last update: %+v (the trap: a success, of v1)", v.Status.LastUpdate)
	}
	time.Sleep(2 * time.Second) // a later step that thought dev complete would start now
	g.open("update", "dev-1.txt")
	waitFor(t, "v2 everywhere", 3*time.Minute, allApplied(in, v2))
	samples := s.finish()
	checkOrder(t, samples, v2)
	checkHistory(t, in, v2)
	for _, sm := range samples {
		for _, name := range rolloutStacks[1] {
			if sm.running["web-"+name] == v2 && sm.applied["web-dev-1"] != v2 {
				t.Errorf("%s: %s updates before dev-1 applied v2", sm.at.Format(time.StampMilli), name)
			}
		}
	}
}

// waitingFor says whether a stack is Reconciling for reason.
func waitingFor(reason string) func(model.StackView) bool {
	return func(v model.StackView) bool {
		c := v.Status.Condition(model.ConditionReconciling)
		return c != nil && c.Reason == reason && v.Status.CurrentUpdate == nil
	}
}

// TestE2EStackSetDirectories generates a stack per directory of envs/ of
// a repository: a new directory in a commit adds a stack; a removed one
// is destroyed (destroyOnFinalize), and removing most of them at once is
// refused by the mass-removal guard.
func TestE2EStackSetDirectories(t *testing.T) {
	t.Parallel()
	toolchainBin(t)
	out := outDir(t)
	envs := newRepo(t)
	envs.commit(map[string]string{"envs/dev/env.yaml": "x", "envs/staging/env.yaml": "x", "envs/prod/env.yaml": "x",
		"envs/old/env.yaml": "x", "other/ignored/env.yaml": "x"})
	prog := newRepo(t)
	v1 := prog.commit(map[string]string{"Pulumi.yaml": program("v1")})
	cfg := `stackSets:
  - name: envs
    generators:
      - git:
          repoURL: file://` + envs.dir + `
          revision: main
          directories:
            - path: envs/*
            - path: envs/old
              exclude: true
    template:
      metadata:
        name: 'app-{{.path.basename}}'
        labels: {env: '{{.path.basename}}'}
      spec:
        stack: 'app-{{.path.basename}}'
        projectRepo: file://` + prog.dir + `
        branch: main
        resyncFrequencySeconds: 1
        destroyOnFinalize: true
        config: {path: '` + out + `/{{.path.basename}}.txt'}
`
	in := startDaemon(t, cfg, "")
	for _, env := range []string{"dev", "staging", "prod"} {
		in.waitStack("app-"+env, "deployed", 3*time.Minute, isReady)
	}
	if _, err := os.Stat(filepath.Join(out, "old.txt")); err == nil {
		t.Error("the excluded envs/old was deployed")
	}
	if v := in.stackSet("envs"); !slices.Equal(v.Stacks, []string{"app-dev", "app-prod", "app-staging"}) {
		t.Errorf("set's stacks: %v", v.Stacks)
	}

	// A new directory adds a stack.
	envs.commit(map[string]string{"envs/qa/env.yaml": "x"})
	in.waitStack("app-qa", "deployed", 3*time.Minute, isReady)
	if got := readFile(t, filepath.Join(out, "qa.txt")); !strings.Contains(got, "v1") {
		t.Errorf("qa.txt: %q", got)
	}

	// A removed one is destroyed.
	envs.git("rm", "-rq", "envs/qa")
	envs.git("commit", "-qm", "drop qa")
	waitFor(t, "app-qa destroyed", 3*time.Minute, func() bool {
		code, _ := in.get("/api/v1/stacks/app-qa", nil)
		return code == http.StatusNotFound
	})
	if _, err := os.Stat(filepath.Join(out, "qa.txt")); !os.IsNotExist(err) {
		t.Errorf("qa.txt after its stack was removed: %v", err)
	}

	// Removing all but one at once is more than the guard lets through:
	// nothing is removed, and the config status says why.
	envs.git("rm", "-rq", "envs/staging", "envs/prod")
	envs.git("commit", "-qm", "drop most")
	waitFor(t, "the removal refused", 2*time.Minute, func() bool {
		var cs model.ConfigStatus
		in.get("/api/v1/config", &cs)
		return strings.Contains(cs.Error, "remove")
	})
	for _, env := range []string{"dev", "staging", "prod"} {
		if v := in.stack("app-" + env); v.Status.LastUpdate.LastSuccessfulCommit != v1 || v.Removed {
			t.Errorf("app-%s after a refused removal: %+v", env, v.Status.LastUpdate)
		}
	}
}

// sleepProgram is clusterProgram with a trigger: each version is an
// update of every stack, whose Sleep waits at its gate.
func sleepProgram(version string) string {
	return strings.Replace(gatedClusterProgram, "duration: ${duration}\n      gate:", "duration: ${duration}\n      trigger: "+version+"\n      gate:", 1)
}

// TestE2ERolloutMaxUpdateCluster: two replicas on etcd share a StackSet
// of a dev stack and six prod stacks with maxUpdate 2. With every prod
// update held at its gate, exactly two are under way at any time, across
// both replicas, the others waiting for a slot.
func TestE2ERolloutMaxUpdateCluster(t *testing.T) {
	t.Parallel()
	toolchainBin(t)
	etcd := etcdtest.Start(t, 1)
	e := newClusterEnv(t, etcd.Endpoints())
	e.gates = newGates(t)
	src := newRepo(t)
	v1 := src.commit(map[string]string{"Pulumi.yaml": sleepProgram("v1")})
	prod := []string{"m-p1", "m-p2", "m-p3", "m-p4", "m-p5", "m-p6"}
	var elems strings.Builder
	elems.WriteString("            - {name: m-dev, env: dev}\n")
	for _, p := range prod {
		fmt.Fprintf(&elems, "            - {name: %s, env: prod}\n", p)
	}
	cfg := `stackSets:
  - name: fleet
    generators:
      - list:
          elements:
` + elems.String() + `    strategy:
      rollingSync:
        steps:
          - matchLabels: {env: dev}
          - matchExpressions: [{key: env, operator: In, values: [prod]}]
            maxUpdate: 2
    template:
      metadata:
        name: '{{.name}}'
        labels: {env: '{{.env}}'}
      spec:
        stack: '{{.name}}'
        projectRepo: file://` + src.dir + `
        branch: main
        resyncFrequencySeconds: 1
        config: {duration: 300ms}
        envRefs:
` + strings.ReplaceAll(e.gates.envRef(), "      STACKDTEST_HOLD", "          STACKDTEST_HOLD")
	if err := os.WriteFile(e.config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	r1, r2 := e.start("node-1"), e.start("node-2")
	vs := e.waitAll(r1, 7, "v1 everywhere", 4*time.Minute, func(v model.StackView) bool {
		return isReady(v) && v.Holder != "" && v.Status.LastUpdate.LastSuccessfulCommit == v1
	})
	t.Logf("holders: %v", holders(vs))

	for _, p := range prod {
		e.gates.close("update", p)
	}
	held := func() []string {
		var out []string
		for _, p := range prod {
			if heldBy(e.gates, "update", p) != 0 {
				out = append(out, p)
			}
		}
		return out
	}
	most, stop, done := 0, make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			if n := len(held()); n > most {
				most = n
			}
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	v2 := src.commit(map[string]string{"Pulumi.yaml": sleepProgram("v2")})
	for released := 0; released < len(prod); released++ {
		var now []string
		waitFor(t, "a prod update held", 3*time.Minute, func() bool { now = held(); return len(now) > 0 })
		if released <= len(prod)-2 {
			waitFor(t, "two prod updates held", 2*time.Minute, func() bool { now = held(); return len(now) == 2 })
			time.Sleep(time.Second) // a third one, if let through, would be held by now
			if now = held(); len(now) != 2 {
				t.Fatalf("prod updates held: %v, want exactly 2", now)
			}
		}
		e.gates.open("update", now[0])
		waitFor(t, now[0]+" applied", 2*time.Minute, func() bool {
			var v model.StackView
			code, _ := getJSON(r2.url+"/api/v1/stacks/"+now[0], &v)
			return code == http.StatusOK && v.Status.LastUpdate != nil && v.Status.LastUpdate.LastSuccessfulCommit == v2 && v.Status.CurrentUpdate == nil
		})
	}
	close(stop)
	<-done
	if most > 2 {
		t.Errorf("%d prod updates were held at once; maxUpdate is 2", most)
	}
	e.waitAll(r1, 7, "v2 everywhere", 3*time.Minute, func(v model.StackView) bool {
		return isReady(v) && v.Status.LastUpdate.LastSuccessfulCommit == v2
	})
	// The history, which misses nothing: at no instant more than two prod
	// ups to v2.
	type edge struct {
		at    time.Time
		delta int
	}
	var edges []edge
	for _, p := range prod {
		for _, u := range e.updatesOf(r1, p) {
			if u.Type == model.UpdateUp && u.Commit == v2 {
				edges = append(edges, edge{u.StartTime, 1}, edge{u.EndTime, -1})
			}
		}
	}
	slices.SortFunc(edges, func(a, b edge) int {
		if c := a.at.Compare(b.at); c != 0 {
			return c
		}
		return a.delta - b.delta // an end before a start at the same instant
	})
	n := 0
	for _, ed := range edges {
		if n += ed.delta; n > 2 {
			t.Errorf("%d prod ups to v2 at %s", n, ed.at.Format(time.StampMilli))
		}
	}
}

// drain reads events until t ends, so that the receiver never blocks.
func drain(t *testing.T, events <-chan notify.Event) {
	done := make(chan struct{})
	t.Cleanup(func() { close(done) })
	go func() {
		for {
			select {
			case <-events:
			case <-done:
				return
			}
		}
	}()
}
