package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/stackd/stackd/daemon/access"
	"github.com/stackd/stackd/daemon/storetest"
)

func benchCluster(b *testing.B) *Cluster {
	c, err := Open(context.Background(), Options{Endpoints: etcd(b), Prefix: newPrefix(), Node: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	return c
}

// BenchmarkPutAuditEtcd appends entries one by one from one replica, as
// its web server records requests.
func BenchmarkPutAuditEtcd(b *testing.B) {
	c := benchCluster(b)
	e := storetest.NewAuditEntry("alice", access.ActionSync, "web", 0)
	start := time.Now()
	for b.Loop() {
		if _, err := c.PutAudit(e); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "entries/s")
}

// BenchmarkAuditFilterEtcd reads the first page of a filter over a trail
// of 100 000 entries in etcd, as BenchmarkAuditFilter of the BoltDB
// store does.
func BenchmarkAuditFilterEtcd(b *testing.B) {
	c := benchCluster(b)
	const n = 100_000
	ctx := context.Background()
	var ops []clientv3.Op
	for i := range n {
		e := storetest.NewAuditEntry(fmt.Sprintf("user%d", i%20), access.ActionSync, fmt.Sprintf("stack-%d", i%50), 0)
		e.Time, e.Seq = storetest.T0.Add(time.Duration(i)*time.Second), uint64(i+1)
		v, _ := json.Marshal(e)
		ops = append(ops, clientv3.OpPut(c.auditKey(e.Seq), string(v)))
		if len(ops) == maxOps || i == n-1 {
			if _, err := c.cli.Txn(ctx).Then(ops...).Commit(); err != nil {
				b.Fatal(err)
			}
			ops = nil
		}
	}
	if _, err := c.cli.Put(ctx, c.auditSeqKey(), fmt.Sprint(n)); err != nil {
		b.Fatal(err)
	}
	storetest.BenchAuditFilter(b, c, storetest.T0.Add(n*time.Second))
}
