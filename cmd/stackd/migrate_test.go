package main

import (
	"context"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stackd/stackd/cluster"
	"github.com/stackd/stackd/cluster/etcdtest"
	"github.com/stackd/stackd/daemon/access"
	"github.com/stackd/stackd/daemon/audit"
	"github.com/stackd/stackd/daemon/model"
	"github.com/stackd/stackd/daemon/storetest"
	"github.com/stackd/stackd/store"
)

// TestStoreMigrate: stackd store migrate copies a single node's records,
// history, logs, resources, last previews, revisions, audit trail and
// metadata into an empty
// cluster, keeping update IDs and audit Seqs; a second migration into the
// same cluster is refused.
func TestStoreMigrate(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an etcd member")
	}
	dataDir := t.TempDir()
	st, err := store.Open(filepath.Join(dataDir, store.FileName), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.PutStack(storetest.Record("app", 2)); err != nil {
		t.Fatal(err)
	}
	var last model.Update
	for range 3 {
		u, err := st.BeginUpdate(model.Update{Stack: "app", Type: model.UpdateUp, State: model.UpdateSucceeded})
		if err != nil {
			t.Fatal(err)
		}
		if err := st.PutLog(u.ID, []byte("log of "+u.ID)); err != nil {
			t.Fatal(err)
		}
		last = u
	}
	if _, err := st.PutRevision(model.ConfigRevision{Trigger: "start", Applied: true}); err != nil {
		t.Fatal(err)
	}
	if err := st.PutMeta("source:abc", []byte(`{"commit":"x"}`)); err != nil {
		t.Fatal(err)
	}
	resources := storetest.Resources("app", 12)
	preview := model.StackPreview{Commit: "c0ffee", Time: storetest.T0, State: model.UpdateSucceeded, Diff: "~ 1 to update\n"}
	if err := st.PutResources("app", resources); err != nil {
		t.Fatal(err)
	}
	if err := st.PutPreview("app", preview); err != nil {
		t.Fatal(err)
	}
	var trail []model.AuditEntry
	for i := range 4 {
		e, err := st.PutAudit(storetest.NewAuditEntry("alice", access.ActionSync, "app", i))
		if err != nil {
			t.Fatal(err)
		}
		trail = append([]model.AuditEntry{e}, trail...) // newest first
	}
	if n, err := st.PruneAudit(storetest.T0.Add(time.Minute)); err != nil || n != 1 {
		t.Fatalf("PruneAudit = %d, %v", n, err)
	}
	trail = trail[:3]
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	etcd := etcdtest.Start(t, 1)
	eps := strings.Join(etcd.Endpoints(), ",")
	var out strings.Builder
	if err := storeCommand([]string{"migrate", "--data-dir", dataDir, "--to-etcd", eps, "--cluster-name", "prod"}, &out); err != nil {
		t.Fatal(err)
	}
	if want := "imported 1 stack(s), 3 update(s), 3 log(s), 1 config revision(s), 1 metadata value(s), 3 audit entr(ies)"; !strings.Contains(out.String(), want) {
		t.Errorf("output %q lacks %q", out.String(), want)
	}
	if err := storeCommand([]string{"migrate", "--data-dir", dataDir, "--to-etcd", eps, "--cluster-name", "prod"}, &out); err == nil ||
		!strings.Contains(err.Error(), "already holds 1 stack") {
		t.Errorf("second migration: %v", err)
	}

	c, err := cluster.Open(context.Background(), cluster.Options{Endpoints: etcd.Endpoints(), Prefix: "/stackd/prod/", Node: "check"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if rec, err := c.Stack("app"); err != nil || !reflect.DeepEqual(rec, storetest.Record("app", 2)) {
		t.Errorf("record = %+v, %v", rec, err)
	}
	if got, err := c.Update(last.ID); err != nil || !reflect.DeepEqual(got, last) {
		t.Errorf("update %s = %+v, %v", last.ID, got, err)
	}
	if log, err := c.Log(last.ID); err != nil || string(log) != "log of "+last.ID {
		t.Errorf("log = %q, %v", log, err)
	}
	if revs, err := c.Revisions(0, 0); err != nil || len(revs) != 1 || revs[0].Trigger != "start" {
		t.Errorf("revisions = %+v, %v", revs, err)
	}
	if v, err := c.Meta("source:abc"); err != nil || string(v) != `{"commit":"x"}` {
		t.Errorf("meta = %q, %v", v, err)
	}
	if got, err := c.Resources("app"); err != nil || !reflect.DeepEqual(got, resources) {
		t.Errorf("resources: %d, %v; want %d equal ones", len(got.Resources), err, len(resources.Resources))
	}
	if got, err := c.Preview("app"); err != nil || !reflect.DeepEqual(got, preview) {
		t.Errorf("preview = %+v, %v", got, err)
	}
	if es, err := c.Audit(audit.Filter{}); err != nil || !reflect.DeepEqual(es, trail) {
		t.Errorf("audit trail = %+v, %v; want %+v", es, err, trail)
	}
	if e, err := c.PutAudit(storetest.NewAuditEntry("bob", access.ActionSync, "app", 9)); err != nil || e.Seq != 5 {
		t.Errorf("next audit entry has Seq %d, %v; want 5", e.Seq, err)
	}
}
