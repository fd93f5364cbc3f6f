package main

import (
	"fmt"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/stackd/stackd/cluster/etcdtest"
	"github.com/stackd/stackd/daemon/model"
)

// BenchmarkClusterThroughput measures a burst of 12 updates whose one
// resource takes 5 s (operations that wait on I/O, not on CPU) with 1, 2
// and 3 replicas at the same --max-concurrent 2, and, with more than one
// replica, how long after a replica's death its stacks are held again.
//
//	go test -run '^$' -bench ClusterThroughput -benchtime 1x ./cmd/stackd/
func BenchmarkClusterThroughput(b *testing.B) {
	for _, n := range []int{1, 2, 3} {
		b.Run(fmt.Sprintf("replicas=%d", n), func(b *testing.B) {
			for range b.N {
				burst(b, n)
			}
		})
	}
}

func burst(b *testing.B, n int) {
	toolchainBin(b)
	etcd := etcdtest.Start(b, 1)
	e := newClusterEnv(b, etcd.Endpoints())
	e.maxConcurrent = 2
	src := newRepo(b)
	src.commit(map[string]string{"Pulumi.yaml": clusterProgram})
	names := e.writeConfig(src, 12, nil)
	var nodes []string
	for i := range n {
		nodes = append(nodes, fmt.Sprintf("node-%d", i+1))
		e.start(nodes[i])
	}
	first := e.replicas[nodes[0]]
	e.waitAll(first, 12, "deployed", 5*time.Minute, readyWith("1s"))

	slow := map[string]string{}
	for _, name := range names {
		slow[name] = "5s"
	}
	b.ResetTimer()
	start := time.Now()
	e.writeConfig(src, 12, slow)
	e.waitAll(first, 12, "the burst applied", 10*time.Minute, readyWith("5s"))
	took := time.Since(start)
	b.StopTimer()
	b.ReportMetric(took.Seconds(), "burst-s")
	b.ReportMetric(float64(len(names))/took.Minutes(), "updates/min")
	if n == 1 {
		return
	}
	victim := e.replicas[nodes[n-1]]
	vs := first.stacks()
	if !slices.ContainsFunc(vs, func(v model.StackView) bool { return v.Holder == victim.name }) {
		b.Logf("%s holds no stack; no takeover to measure", victim.name)
		return
	}
	killed := time.Now()
	e.stop(victim, syscall.SIGKILL)
	deadline := time.Now().Add(time.Minute)
	for {
		vs := first.stacks()
		if len(vs) == 12 && !slices.ContainsFunc(vs, func(v model.StackView) bool { return v.Holder == "" || v.Holder == victim.name }) {
			break
		}
		if time.Now().After(deadline) {
			b.Fatal("the dead replica's stacks were not held again within a minute")
		}
		time.Sleep(20 * time.Millisecond)
	}
	b.ReportMetric(time.Since(killed).Seconds(), "takeover-s")
}
