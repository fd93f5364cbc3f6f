package main

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stackd/stackd/cluster"
	"github.com/stackd/stackd/cluster/etcdtest"
	"github.com/stackd/stackd/daemon/model"
)

// TestE2EClusterClaimedPulumiStack: two stacks of a cluster's config
// resolve to one Pulumi stack on the shared PostgreSQL backend (the same
// stack name, and the second's program names the first's project), held
// by two replicas. The first claimed it on its replica; the second is
// refused on the other, naming the first, and the state keeps the
// first's resource. Each replica kept its own claims, and the second's
// up replaced the first's resource with its own.
//
// The stacks' names are picked so that rendezvous hashing gives one to
// each replica, and the second enters the config once the first is
// Ready: which stack claims first is not a race.
func TestE2EClusterClaimedPulumiStack(t *testing.T) {
	t.Parallel()
	toolchainBin(t)
	etcd := etcdtest.Start(t, 1)
	e := newClusterEnv(t, etcd.Endpoints())
	nodes := []string{"node-1", "node-2"}
	first, second := nameHeldBy("first", nodes, "node-1"), nameHeldBy("second", nodes, "node-2")

	src := newRepo(t)
	src.commit(map[string]string{"Pulumi.yaml": clusterProgram})
	intruder := newRepo(t)
	intruder.commit(map[string]string{"Pulumi.yaml": strings.Replace(clusterProgram, "  wait:\n", "  intruder:\n", 1)})
	stack := func(name string, r *repo) string {
		return strings.Replace(stackYAML(name, r, "    config: {duration: \"1s\"}\n"), "stack: "+name+"\n", "stack: shared\n", 1)
	}
	e.writeStacks(stack(first, src))
	for _, n := range nodes {
		e.start(n)
	}
	vs := e.waitAll(e.replicas["node-1"], 1, first+" deployed", 2*time.Minute, readyWith("1s"))
	if vs[0].Holder != "node-1" {
		t.Fatalf("%s is held by %s, want node-1", first, vs[0].Holder)
	}

	e.writeStacks(stack(first, src) + stack(second, intruder))
	finished := func(v model.StackView) bool {
		if v.Name == first {
			return isReady(v)
		}
		return v.Status.LastUpdate != nil && v.Status.LastUpdate.State != ""
	}
	vs = e.waitAll(e.replicas["node-1"], 2, second+"'s first update finished", 2*time.Minute, finished)
	for _, v := range vs {
		if v.Name != second {
			continue
		}
		if v.Holder != "node-2" {
			t.Errorf("%s is held by %s, want node-2", second, v.Holder)
		}
		want := "stack " + second + ": the Pulumi stack shared of project cluster on postgres://127.0.0.1:"
		if lu := v.Status.LastUpdate; lu.State != "failed" || !strings.Contains(lu.Message, want) ||
			!strings.Contains(lu.Message, "is stack "+first+"'s, which ran on it first") {
			t.Errorf("%s's last update: %s %q, want failed, naming %s", second, lu.State, lu.Message, first)
		}
	}
	if got := stateResources(t, e, "shared"); got != "wait" {
		t.Errorf("the Pulumi stack's resources are %q, want %s's: wait", got, first)
	}
	if us := e.updatesOf(e.replicas["node-1"], first); len(us) != 1 || us[0].State != "succeeded" {
		t.Errorf("%s's updates: %+v, want its one deploy", first, us)
	}
}

// nameHeldBy is prefix followed by the first number whose stack
// rendezvous hashing gives to node among nodes.
func nameHeldBy(prefix string, nodes []string, node string) string {
	for i := 0; ; i++ {
		if name := fmt.Sprintf("%s-%d", prefix, i); cluster.Owner(name, nodes) == node {
			return name
		}
	}
}

// stateResources lists the names of the program's resources in the
// state of the Pulumi stack of project cluster on e's backend, sorted,
// as pulumi stack export reads it.
func stateResources(t *testing.T, e *clusterEnv, stack string) string {
	t.Helper()
	cmd := exec.Command(filepath.Join(e.bin, "pulumi"), "stack", "export", "--stack", "organization/cluster/"+stack, "--non-interactive")
	cmd.Dir = t.TempDir()
	cmd.Env = []string{"PATH=" + e.bin + ":/usr/bin:/bin", "HOME=" + t.TempDir(), "PULUMI_HOME=" + t.TempDir(),
		"PULUMI_SKIP_UPDATE_CHECK=true", "PULUMI_BACKEND_URL=" + e.backend}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("pulumi stack export: %v\n%s", err, out)
	}
	var state struct {
		Deployment struct {
			Resources []struct{ URN, Type string }
		}
	}
	if err := json.Unmarshal(out, &state); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range state.Deployment.Resources {
		if r.Type == "stackdtest:index:Sleep" {
			names = append(names, r.URN[strings.LastIndex(r.URN, "::")+2:])
		}
	}
	return strings.Join(names, " ")
}
