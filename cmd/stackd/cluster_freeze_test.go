package main

import (
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stackd/stackd/cluster/etcdtest"
	"github.com/stackd/stackd/daemon/model"
)

// TestE2EClusterFreeze: a replica frozen (SIGSTOP) in the middle of an
// update for twice its lease. Its pulumi processes die with its
// heartbeat, before the other replica, which takes the stack over,
// breaks the lock and runs its own update; when the frozen replica
// resumes it does not take the stack back in the middle of that update.
// Sampled every 25 ms: no moment with pulumi processes of both replicas,
// and no aborted update of the new holder.
//
// The resource's create waits at its gate (create-c00) whoever runs it:
// the first holder is frozen while its update is provably in progress,
// and the new holder's update stays in progress, held, while the frozen
// replica resumes and rejoins.
func TestE2EClusterFreeze(t *testing.T) {
	t.Parallel()
	toolchainBin(t)
	etcd := etcdtest.Start(t, 1)
	e := newClusterEnv(t, etcd.Endpoints())
	e.gates = newGates(t)
	src := newRepo(t)
	src.commit(map[string]string{"Pulumi.yaml": gatedClusterProgram})
	e.gates.close("create", "c00")
	e.writeConfig(src, 1, nil)
	a, b := e.start("node-1"), e.start("node-2")
	// A replica serves once it has started, its providers installed into
	// its plugin cache, which runs pulumi: that must not count as the
	// other replica's processes beside the holder's update.
	for _, r := range []*replica{a, b} {
		waitFor(t, r.name+" serving", 2*time.Minute, func() bool { return len(r.stacks()) > 0 })
	}

	first := e.gates.waitHeld("create", "c00", 2*time.Minute)
	holder := replicaOf(e, first)
	if holder == nil {
		t.Fatalf("the provider %d holding c00's create descends from no replica", first)
	}
	other := a
	if holder == a {
		other = b
	}
	s := sampleProcesses(t, map[string]int{holder.name: holder.cmd.Process.Pid, other.name: other.cmd.Process.Pid})
	if err := holder.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	frozen := time.Now()

	// The other replica takes c00 over and runs the update again: its
	// create waits at the gate in turn.
	second := e.gates.waitHeld("create", "c00", 2*time.Minute, first)
	takenOver := time.Now()
	if r := replicaOf(e, second); r != other {
		t.Fatalf("c00's create held by %d, of %v, after %s froze; want %s's", second, r, holder.name, other.name)
	}
	t.Logf("%s froze in c00's create; %s's create of c00 held %s later", holder.name, other.name, time.Since(frozen).Round(time.Millisecond))
	time.Sleep(time.Until(frozen.Add(2 * clusterTTL)))
	if err := holder.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	resumed := time.Now()

	// The resumed replica rejoins; the other one, asked to hand c00 back,
	// goes on with its update, still held, a lease period later.
	waitFor(t, holder.name+" back in the cluster", time.Minute, func() bool {
		var cs model.ClusterStatus
		code, err := getJSON(holder.url+"/api/v1/cluster", &cs)
		return err == nil && code == http.StatusOK && cs.Session && cs.SessionsLost > 0
	})
	waitFor(t, other.name+" seeing "+holder.name+" back", time.Minute, func() bool {
		var cs model.ClusterStatus
		code, err := getJSON(other.url+"/api/v1/cluster", &cs)
		return err == nil && code == http.StatusOK && len(cs.Members) == 2
	})
	time.Sleep(clusterTTL)
	if pid := heldBy(e.gates, "create", "c00"); pid != second || processGone(second) {
		t.Errorf("c00's create by %s (%d) no longer held once %s came back: held by %d", other.name, second, holder.name, pid)
	}
	if v := stackOf(other, "c00"); v.Holder != other.name || v.Status.CurrentUpdate == nil {
		t.Errorf("once %s came back, %s shows c00 held by %q, its update running: %v", holder.name, other.name, v.Holder, v.Status.CurrentUpdate != nil)
	}
	e.gates.open("create", "c00")

	// The other replica finishes its update, and whoever holds the stack
	// in the end finds nothing more to do.
	e.waitAll(other, 1, "c00 deployed by the other replica", 3*time.Minute, func(v model.StackView) bool {
		return isReady(v) && v.Status.LastUpdate != nil && strings.HasPrefix(v.Status.LastUpdate.Name, "c00") &&
			lastUpdateBy(e, other, other.name)
	})
	time.Sleep(3 * time.Second) // the resumed replica settles
	samples, overlaps := s.stop()
	gone := s.last[holder.name].Sub(frozen)
	bound := clusterTTL * 2 / 3
	t.Logf("%d samples; the frozen replica's pulumi processes last seen %s after it froze (heartbeat bound %s); resumed after %s",
		samples, gone.Round(time.Millisecond), bound, resumed.Sub(frozen).Round(time.Millisecond))
	if overlaps > 0 {
		t.Errorf("%d samples saw pulumi processes of both replicas at once", overlaps)
	}
	// An order, not a time: the frozen replica's processes were gone
	// before the other replica's update was seen running.
	if s.last[holder.name].IsZero() || s.last[holder.name].After(takenOver) {
		t.Errorf("the frozen replica's pulumi processes lived %s after it froze, past the other replica's takeover %s after it", gone, takenOver.Sub(frozen))
	}
	aborted := 0
	for _, u := range e.updatesOf(other, "c00") {
		t.Logf("update %s by %s: %s %s", u.ID, u.Node, u.State, u.Message)
		if u.State == model.UpdateAborted && u.Node == other.name {
			aborted++
		}
	}
	if aborted > 0 {
		t.Errorf("%d updates of the new holder were aborted", aborted)
	}
	e.checkNoOverlap(other, []string{"c00"})
}

// stackOf is r's view of the stack name (zero when r does not list it).
func stackOf(r *replica, name string) model.StackView {
	for _, v := range r.stacks() {
		if v.Name == name {
			return v
		}
	}
	return model.StackView{}
}

// lastUpdateBy says whether the last update of c00, as r serves it, is
// node's and succeeded.
func lastUpdateBy(e *clusterEnv, r *replica, node string) bool {
	us := e.updatesOf(r, "c00")
	return len(us) > 0 && us[len(us)-1].Node == node && us[len(us)-1].State == model.UpdateSucceeded
}

// processSampler looks at the process table every 25 ms and counts the
// samples in which pulumi processes (the CLI, its language host, its
// providers) descend from more than one of the replicas.
type processSampler struct {
	replicas map[string]int
	done     chan struct{}
	wg       sync.WaitGroup
	// What the samples found, read once stopped: how many, how many saw
	// more than one replica's, when each replica's were last seen.
	samples, overlaps int
	last              map[string]time.Time
}

func sampleProcesses(t *testing.T, replicas map[string]int) *processSampler {
	s := &processSampler{replicas: replicas, done: make(chan struct{}), last: map[string]time.Time{}}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		tick := time.NewTicker(25 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-s.done:
				return
			case <-tick.C:
			}
			s.sample()
		}
	}()
	t.Cleanup(func() { s.stop() })
	return s
}

// sample reads /proc once.
func (s *processSampler) sample() {
	parent, comm := map[int]int{}, map[int]string{}
	paths, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		text := string(data)
		open, end := strings.IndexByte(text, '('), strings.LastIndexByte(text, ')')
		fields := strings.Fields(text[end+1:])
		if open < 0 || end < open || len(fields) < 2 || fields[0] == "Z" {
			continue
		}
		pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
		parent[pid], _ = strconv.Atoi(fields[1])
		comm[pid] = text[open+1 : end]
	}
	now := time.Now()
	seen := map[string]bool{}
	for pid, name := range comm {
		if !strings.HasPrefix(name, "pulumi") {
			continue
		}
		for p, hops := parent[pid], 0; p > 1 && hops < 10; p, hops = parent[p], hops+1 {
			for node, rpid := range s.replicas {
				if p == rpid {
					seen[node] = true
					s.last[node] = now
				}
			}
		}
	}
	s.samples++
	if len(seen) > 1 {
		s.overlaps++
	}
}

// stop ends the sampling and reports the samples taken, and those with
// pulumi processes of more than one replica.
func (s *processSampler) stop() (samples, overlaps int) {
	select {
	case <-s.done:
	default:
		close(s.done)
	}
	s.wg.Wait()
	return s.samples, s.overlaps
}
