package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/stackd/stackd/daemon"
	"github.com/stackd/stackd/daemon/access"
	"github.com/stackd/stackd/daemon/audit"
	"github.com/stackd/stackd/daemon/model"
	"github.com/stackd/stackd/daemon/storetest"
)

// openAt connects to etcd under prefix as node, without joining: the
// audit trail needs no session.
func openAt(t *testing.T, eps []string, prefix, node string) *Cluster {
	t.Helper()
	c, err := Open(context.Background(), Options{Endpoints: eps, Prefix: prefix, Node: node})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return c
}

// TestAuditWindows runs the audit contract with reads of 3 Seqs at a
// time, so that every page and prune spans several windows.
func TestAuditWindows(t *testing.T) {
	eps := etcd(t)
	saved := auditWindow
	auditWindow = 3
	t.Cleanup(func() { auditWindow = saved })
	storetest.RunAudit(t, func(t *testing.T, _ storetest.Limits) (daemon.Store, func(string)) {
		return openAt(t, eps, newPrefix(), "node-1"), func(string) {}
	})
}

// TestAuditAcrossReplicas: replicas appending at once share one trail,
// each entry with a Seq of its own, and each replica reads all of it.
func TestAuditAcrossReplicas(t *testing.T) {
	eps := etcd(t)
	prefix := newPrefix()
	replicas := []*Cluster{openAt(t, eps, prefix, "node-1"), openAt(t, eps, prefix, "node-2"), openAt(t, eps, prefix, "node-3")}
	var wg sync.WaitGroup
	for _, r := range replicas {
		for g := range 3 {
			wg.Go(func() {
				for i := range 10 {
					e := storetest.NewAuditEntry(fmt.Sprintf("user%d", g), access.ActionSync, "web", i)
					e.Node = r.opts.Node
					if _, err := r.PutAudit(e); err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
	}
	wg.Wait()
	var first []model.AuditEntry
	for _, r := range replicas {
		es, err := r.Audit(audit.Filter{Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		want := []uint64{}
		for seq := uint64(90); seq >= 1; seq-- {
			want = append(want, seq)
		}
		if got := storetest.AuditSeqs(es); !reflect.DeepEqual(got, want) {
			t.Fatalf("%s reads Seqs %v, want 90 down to 1", r.opts.Node, got)
		}
		if first == nil {
			first = es
		} else if !reflect.DeepEqual(es, first) {
			t.Errorf("%s reads another trail than %s", r.opts.Node, replicas[0].opts.Node)
		}
	}
	byNode := map[string]int{}
	for _, e := range first {
		byNode[e.Node]++
	}
	if want := map[string]int{"node-1": 30, "node-2": 30, "node-3": 30}; !reflect.DeepEqual(byNode, want) {
		t.Errorf("entries by node = %v, want %v", byNode, want)
	}
}

// trail is an Exporter of nothing but an audit trail.
type trail []model.AuditEntry

func (trail) Stacks() ([]model.StackRecord, error)                  { return nil, nil }
func (trail) Updates(string, uint64, int) ([]model.Update, error)   { return nil, nil }
func (trail) Log(string) ([]byte, error)                            { return nil, nil }
func (trail) Revisions(uint64, int) ([]model.ConfigRevision, error) { return nil, nil }
func (trail) MetaKeys() ([]string, error)                           { return nil, nil }
func (trail) Meta(string) ([]byte, error)                           { return nil, model.ErrNotFound }
func (trail) PutResources(string, model.Resources) error            { return nil }
func (trail) Resources(string) (model.Resources, error) {
	return model.Resources{}, model.ErrNotFound
}
func (trail) PutPreview(string, model.StackPreview) error { return nil }
func (trail) Preview(string) (model.StackPreview, error) {
	return model.StackPreview{}, model.ErrNotFound
}
func (tr trail) Audit(f audit.Filter) ([]model.AuditEntry, error) {
	return scanTrail(tr, f), nil
}

func scanTrail(tr trail, f audit.Filter) []model.AuditEntry {
	s := audit.NewScan(f)
	for i := len(tr) - 1; i >= 0; i-- {
		v, _ := json.Marshal(tr[i])
		if more, _ := s.Add(v); !more {
			break
		}
	}
	return s.Entries
}

// TestImportAudit: an import copies the trail with its Seqs into a
// cluster without one, and after the entries of one that has one; reads
// and prunes then go over the Seqs the single node had pruned, which
// the import leaves unused (windows of 3 Seqs make them span several).
func TestImportAudit(t *testing.T) {
	eps := etcd(t)
	saved := auditWindow
	auditWindow = 3
	t.Cleanup(func() { auditWindow = saved })
	var src trail
	for seq := uint64(5); seq <= 7; seq++ { // 1 to 4 were pruned
		e := storetest.NewAuditEntry("alice", access.ActionSync, "web", int(seq))
		e.Seq = seq
		src = append(src, e)
	}
	for _, tc := range []struct {
		name     string
		existing int
		want     []uint64
		low      string
	}{
		{"empty", 0, []uint64{7, 6, 5}, "5"},
		{"with a trail", 2, []uint64{9, 8, 7}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := openAt(t, eps, newPrefix(), "migrate")
			for i := range tc.existing {
				if _, err := c.PutAudit(storetest.NewAuditEntry("ci", access.ActionReload, "", 100+i)); err != nil {
					t.Fatal(err)
				}
			}
			n, err := c.Import(context.Background(), src)
			if err != nil || n.Audit != 3 {
				t.Fatalf("Import = %+v, %v; want 3 audit entries", n, err)
			}
			es, err := c.Audit(audit.Filter{Actor: "alice"})
			if err != nil || !reflect.DeepEqual(storetest.AuditSeqs(es), tc.want) {
				t.Fatalf("imported Seqs = %v, %v; want %v", storetest.AuditSeqs(es), err, tc.want)
			}
			for i, e := range es {
				want := src[2-i]
				want.Seq = e.Seq
				if !reflect.DeepEqual(e, want) {
					t.Errorf("imported entry %+v, want %+v", e, want)
				}
			}
			if low, err := c.get(c.auditLowKey()); string(low) != tc.low {
				t.Errorf("auditlow after the import = %q, %v; want %q", low, err, tc.low)
			}
			// A replica that appended before the import learns the counter.
			next := tc.want[0] + 1
			if e, err := c.PutAudit(storetest.NewAuditEntry("bob", access.ActionSync, "web", 200)); err != nil || e.Seq != next {
				t.Errorf("entry after the import has Seq %d, %v; want %d", e.Seq, err, next)
			}
			all := append([]uint64{next}, tc.want...)
			for seq := uint64(tc.existing); seq >= 1; seq-- {
				all = append(all, seq)
			}
			if es, err := c.Audit(audit.Filter{}); err != nil || !reflect.DeepEqual(storetest.AuditSeqs(es), all) {
				t.Errorf("whole trail = %v, %v; want %v", storetest.AuditSeqs(es), err, all)
			}
			if n, err := c.PruneAudit(storetest.T0.Add(1000 * time.Minute)); err != nil || n != len(all) {
				t.Errorf("PruneAudit of everything = %d, %v; want %d", n, err, len(all))
			}
			if low, err := c.get(c.auditLowKey()); err != nil || string(low) != fmt.Sprint(next+1) {
				t.Errorf("auditlow after pruning everything = %q, %v; want %d", low, err, next+1)
			}
		})
	}
}
