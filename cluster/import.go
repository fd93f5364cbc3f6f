package cluster

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/stackd/stackd/daemon"
	"github.com/stackd/stackd/daemon/audit"
	"github.com/stackd/stackd/daemon/model"
)

// Exporter is a store Import reads whole: the BoltDB store of a single
// node.
type Exporter interface {
	Stacks() ([]model.StackRecord, error)
	Updates(stack string, before uint64, limit int) ([]model.Update, error)
	Log(id string) ([]byte, error)
	Revisions(before uint64, limit int) ([]model.ConfigRevision, error)
	Audit(f audit.Filter) ([]model.AuditEntry, error)
	MetaKeys() ([]string, error)
	Meta(key string) ([]byte, error)
	daemon.ResourceStore
	daemon.PreviewStore
}

// Imported counts what Import wrote.
type Imported struct {
	Stacks, Updates, Logs, Revisions, Meta, Audit int
}

// maxOps is how many writes one etcd transaction carries (etcd's default
// limit is 128).
const maxOps = 100

// Import copies a single node's state into the cluster, which must hold no
// stack yet: records, update history with logs, config revisions, the
// audit trail and metadata. Sequence numbers carry over, so update IDs
// stay the same and are never reused; the audit trail's do too unless the
// cluster has one already (replicas that ran before the import), which
// the imported entries then follow. The cluster need not be started.
func (c *Cluster) Import(ctx context.Context, src Exporter) (Imported, error) {
	var n Imported
	resp, err := c.cli.Get(ctx, c.opts.Prefix+"stacks/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return n, fmt.Errorf("cluster: import: %w", err)
	}
	if resp.Count > 0 {
		return n, fmt.Errorf("cluster: import: the cluster under %s already holds %d stack(s); import into an empty one", c.opts.Prefix, resp.Count)
	}
	w := &batch{ctx: ctx, cli: c.cli}
	recs, err := src.Stacks()
	if err != nil {
		return n, fmt.Errorf("cluster: import: %w", err)
	}
	for _, rec := range recs {
		if err := c.importStack(w, src, rec, &n); err != nil {
			return n, err
		}
	}
	if err := c.importRevisions(w, src, &n); err != nil {
		return n, err
	}
	if err := c.importAudit(w, src, &n); err != nil {
		return n, err
	}
	keys, err := src.MetaKeys()
	if err != nil {
		return n, fmt.Errorf("cluster: import: %w", err)
	}
	for _, k := range keys {
		v, err := src.Meta(k)
		if err != nil {
			return n, fmt.Errorf("cluster: import: meta %s: %w", k, err)
		}
		w.put(c.key("meta/", k), v)
		n.Meta++
	}
	return n, w.flush()
}

func (c *Cluster) importStack(w *batch, src Exporter, rec model.StackRecord, n *Imported) error {
	v, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	w.put(c.key("stacks/", rec.Name), v)
	n.Stacks++
	var last uint64
	for before := uint64(0); ; {
		us, err := src.Updates(rec.Name, before, 100)
		if err != nil {
			return fmt.Errorf("cluster: import: updates of %s: %w", rec.Name, err)
		}
		if len(us) == 0 {
			break
		}
		for _, u := range us {
			last = max(last, u.Seq)
			uv, err := json.Marshal(u)
			if err != nil {
				return err
			}
			w.put(c.updateKey(rec.Name, u.Seq), uv)
			n.Updates++
			log, err := src.Log(u.ID)
			if err != nil && !errors.Is(err, model.ErrNotFound) {
				return fmt.Errorf("cluster: import: log of %s: %w", u.ID, err)
			}
			if len(log) > 0 {
				z, err := compress(model.TruncateLog(log, c.opts.LogLimit))
				if err != nil {
					return fmt.Errorf("cluster: import: log of %s: %w", u.ID, err)
				}
				w.put(c.logKey(rec.Name, u.Seq), z)
				n.Logs++
			}
			before = u.Seq
		}
	}
	if last > 0 {
		w.put(c.key("seq/", rec.Name), []byte(strconv.FormatUint(last, 10)))
	}
	if err := c.importView(w, src, rec.Name); err != nil {
		return err
	}
	return w.err
}

// importView copies a stack's resources and last preview, when it has
// them, compressed as PutResources and PutPreview write them.
func (c *Cluster) importView(w *batch, src Exporter, stack string) error {
	rs, rerr := src.Resources(stack)
	p, perr := src.Preview(stack)
	for _, x := range []struct {
		part string
		v    any
		err  error
	}{{"resources/", rs, rerr}, {"previews/", p, perr}} {
		if errors.Is(x.err, model.ErrNotFound) {
			continue
		}
		data, err := json.Marshal(x.v)
		if err == nil {
			data, err = compress(data)
		}
		if err = cmp.Or(x.err, err); err != nil {
			return fmt.Errorf("cluster: import: %s of %s: %w", strings.TrimSuffix(x.part, "/"), stack, err)
		}
		w.put(c.key(x.part, stack), data)
	}
	return nil
}

func (c *Cluster) importRevisions(w *batch, src Exporter, n *Imported) error {
	var last uint64
	for before := uint64(0); ; {
		revs, err := src.Revisions(before, 100)
		if err != nil {
			return fmt.Errorf("cluster: import: revisions: %w", err)
		}
		if len(revs) == 0 {
			break
		}
		for _, r := range revs {
			last = max(last, r.Seq)
			v, err := json.Marshal(r)
			if err != nil {
				return err
			}
			w.put(c.key("revisions/", seqPart(r.Seq)), v)
			n.Revisions++
			before = r.Seq
		}
	}
	if last > 0 {
		w.put(c.opts.Prefix+"revseq", []byte(strconv.FormatUint(last, 10)))
	}
	return w.err
}

// importAudit copies the audit trail, its Seqs above those of the
// cluster's own trail (none before the first replica ran).
func (c *Cluster) importAudit(w *batch, src Exporter, n *Imported) error {
	base, _, err := c.counter(c.auditSeqKey())
	if err != nil {
		return fmt.Errorf("cluster: import: audit: %w", err)
	}
	var first, last uint64
	for f := (audit.Filter{Limit: audit.PageMax}); ; {
		es, err := src.Audit(f)
		if err != nil {
			return fmt.Errorf("cluster: import: audit: %w", err)
		}
		if len(es) == 0 {
			break
		}
		for _, e := range es {
			f.Before = e.Seq
			e.Seq += base
			first, last = e.Seq, max(last, e.Seq)
			v, err := json.Marshal(e)
			if err != nil {
				return err
			}
			w.put(c.auditKey(e.Seq), v)
			n.Audit++
		}
	}
	if last > 0 {
		w.put(c.auditSeqKey(), []byte(strconv.FormatUint(last, 10)))
	}
	if base == 0 && first > 0 { // the single node's pruned Seqs stay unread
		w.put(c.auditLowKey(), []byte(strconv.FormatUint(first, 10)))
	}
	return w.err
}

// batch groups puts into transactions of at most maxOps.
type batch struct {
	ctx context.Context
	cli *clientv3.Client
	ops []clientv3.Op
	err error
}

func (b *batch) put(key string, value []byte) {
	b.ops = append(b.ops, clientv3.OpPut(key, string(value)))
	if len(b.ops) >= maxOps {
		b.err = errors.Join(b.err, b.flush())
	}
}

func (b *batch) flush() error {
	if len(b.ops) == 0 || b.err != nil {
		return b.err
	}
	ops := b.ops
	b.ops = nil
	if _, err := b.cli.Txn(b.ctx).Then(ops...).Commit(); err != nil {
		return fmt.Errorf("cluster: import: write: %w", err)
	}
	return nil
}
