package cluster

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/stackd/stackd/daemon"
	"github.com/stackd/stackd/daemon/model"
)

// The store keeps the same contract as the BoltDB store (the contract
// tests in daemon/storetest run against both). Writes about a stack are
// fenced: each is a transaction that also compares the create revision of
// the stack's ownership key with the one this replica holds.

const defaultPageSize = 50

// maxLogBytes bounds a stored (compressed) log well below etcd's default
// request limit of 1.5 MiB.
const maxLogBytes = 1 << 20

// fence is the key whose create revision a write compares with the one
// this replica created: a stack's ownership key, or a pull request's
// lease.
type fence struct {
	name string // the stack or pull request, for errors
	key  string
	rev  int64
}

// stackFence is the fence of every write about stack: its ownership key
// as this replica created it.
func (c *Cluster) stackFence(stack string) (fence, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	rev, ok := c.held[stack]
	if !ok {
		return fence{}, fmt.Errorf("%s: %w", stack, daemon.ErrNotOwner)
	}
	return fence{name: stack, key: c.key("owners/", stack), rev: rev}, nil
}

// fencedTxn commits ops about stack if this replica still holds it (its
// ownership key is the one it created) and every cmp holds. It reports
// whether the cmps held; a lost fence is ErrNotOwner.
func (c *Cluster) fencedTxn(stack string, cmps []clientv3.Cmp, ops ...clientv3.Op) (bool, error) {
	f, err := c.stackFence(stack)
	if err != nil {
		return false, err
	}
	return c.txnBehind(f, cmps, ops...)
}

// txnBehind commits ops if f's key is still the one this replica created
// and every cmp holds. It reports whether the cmps held; a lost fence is
// ErrNotOwner.
func (c *Cluster) txnBehind(f fence, cmps []clientv3.Cmp, ops ...clientv3.Op) (bool, error) {
	cmp := clientv3.Compare(clientv3.CreateRevision(f.key), "=", f.rev)
	ctx, cancel := c.ctx()
	defer cancel()
	resp, err := c.cli.Txn(ctx).If(append([]clientv3.Cmp{cmp}, cmps...)...).Then(ops...).
		Else(clientv3.OpGet(f.key)).Commit()
	if err != nil {
		return false, err
	}
	if resp.Succeeded {
		return true, nil
	}
	if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) == 0 || kvs[0].CreateRevision != f.rev {
		return false, fmt.Errorf("%s: %w", f.name, daemon.ErrNotOwner)
	}
	return false, nil
}

func (c *Cluster) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), requestTimeout)
}

func seqPart(seq uint64) string { return fmt.Sprintf("%020d", seq) }

func (c *Cluster) updateKey(stack string, seq uint64) string {
	return c.key("updates/", stack+"/"+seqPart(seq))
}

func (c *Cluster) logKey(stack string, seq uint64) string {
	return c.key("logs/", stack+"/"+seqPart(seq))
}

// PutStack writes the record of rec.Name, if this replica holds it.
func (c *Cluster) PutStack(rec model.StackRecord) error {
	if rec.Name == "" {
		return errors.New("cluster: put stack: empty name")
	}
	v, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("cluster: put stack %s: %w", rec.Name, err)
	}
	if _, err := c.fencedTxn(rec.Name, nil, clientv3.OpPut(c.key("stacks/", rec.Name), string(v))); err != nil {
		return fmt.Errorf("cluster: put stack %s: %w", rec.Name, err)
	}
	return nil
}

// get reads the value of one key; the error wraps model.ErrNotFound when
// it is not set.
func (c *Cluster) get(key string) ([]byte, error) {
	ctx, cancel := c.ctx()
	defer cancel()
	resp, err := c.cli.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	if len(resp.Kvs) == 0 {
		return nil, model.ErrNotFound
	}
	return resp.Kvs[0].Value, nil
}

// Stack reads one record.
func (c *Cluster) Stack(name string) (model.StackRecord, error) {
	v, err := c.get(c.key("stacks/", name))
	if err != nil {
		return model.StackRecord{}, fmt.Errorf("cluster: stack %s: %w", name, err)
	}
	var rec model.StackRecord
	if err := json.Unmarshal(v, &rec); err != nil {
		return model.StackRecord{}, fmt.Errorf("cluster: stack %s: %w", name, err)
	}
	return rec, nil
}

// Stacks reads every record, by name.
func (c *Cluster) Stacks() ([]model.StackRecord, error) {
	ctx, cancel := c.ctx()
	defer cancel()
	resp, err := c.cli.Get(ctx, c.opts.Prefix+"stacks/", clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("cluster: stacks: %w", err)
	}
	out := make([]model.StackRecord, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		var rec model.StackRecord
		if err := json.Unmarshal(kv.Value, &rec); err != nil {
			return nil, fmt.Errorf("cluster: stack %s: %w", c.name("stacks/", kv.Key), err)
		}
		out = append(out, rec)
	}
	return out, nil
}

// DeleteStack deletes a stack's record, history, logs, resources and last
// preview, if this replica
// holds it. Its sequence counter stays: IDs are never reused.
func (c *Cluster) DeleteStack(name string) error {
	_, err := c.fencedTxn(name, nil,
		clientv3.OpDelete(c.key("stacks/", name)),
		clientv3.OpDelete(c.key("updates/", name+"/"), clientv3.WithPrefix()),
		clientv3.OpDelete(c.key("logs/", name+"/"), clientv3.WithPrefix()),
		clientv3.OpDelete(c.key("resources/", name)),
		clientv3.OpDelete(c.key("previews/", name)))
	if err != nil {
		return fmt.Errorf("cluster: delete stack %s: %w", name, err)
	}
	return nil
}

// BeginUpdate records the start of an update with the stack's next
// sequence number, pruning the history beyond HistoryLimit in the same
// transaction.
func (c *Cluster) BeginUpdate(u model.Update) (model.Update, error) {
	if u.Stack == "" {
		return model.Update{}, errors.New("cluster: begin update: empty stack name")
	}
	f, err := c.stackFence(u.Stack)
	if err != nil {
		return model.Update{}, fmt.Errorf("cluster: begin update of %s: %w", u.Stack, err)
	}
	return c.beginUpdate(u, f)
}

// beginUpdate records the start of u behind fence f.
func (c *Cluster) beginUpdate(u model.Update, f fence) (model.Update, error) {
	seqKey := c.key("seq/", u.Stack)
	for {
		last, modRev, err := c.counter(seqKey)
		if err != nil {
			return model.Update{}, fmt.Errorf("cluster: begin update of %s: %w", u.Stack, err)
		}
		u.Seq = last + 1
		u.ID = model.UpdateID(u.Stack, u.Seq)
		v, err := json.Marshal(u)
		if err != nil {
			return model.Update{}, fmt.Errorf("cluster: begin update of %s: %w", u.Stack, err)
		}
		ops := []clientv3.Op{
			clientv3.OpPut(seqKey, strconv.FormatUint(u.Seq, 10)),
			clientv3.OpPut(c.updateKey(u.Stack, u.Seq), string(v)),
		}
		first, err := c.oldestKept(u.Stack, u.Seq)
		if err != nil {
			return model.Update{}, fmt.Errorf("cluster: begin update of %s: %w", u.Stack, err)
		}
		if first > 0 {
			ops = append(ops,
				clientv3.OpDelete(c.updateKey(u.Stack, 0), clientv3.WithRange(c.updateKey(u.Stack, first))),
				clientv3.OpDelete(c.logKey(u.Stack, 0), clientv3.WithRange(c.logKey(u.Stack, first))))
		}
		ok, err := c.txnBehind(f, []clientv3.Cmp{clientv3.Compare(clientv3.ModRevision(seqKey), "=", modRev)}, ops...)
		if err != nil {
			return model.Update{}, fmt.Errorf("cluster: begin update of %s: %w", u.Stack, err)
		}
		if ok {
			return u, nil
		}
		// The counter moved under us: read it again.
	}
}

// oldestKept is the Seq of the oldest of stack's updates to keep when
// update seq is added, so that HistoryLimit remain: those older are
// pruned. Zero when none is to go. Records, not sequence numbers, are
// counted: a history whose drift checks were folded (model.Folds) keeps
// its older updates longer.
func (c *Cluster) oldestKept(stack string, seq uint64) (uint64, error) {
	keep := int64(c.opts.HistoryLimit) - 1 // besides seq
	if keep <= 0 {
		return seq, nil
	}
	ctx, cancel := c.ctx()
	defer cancel()
	resp, err := c.cli.Get(ctx, c.updateKey(stack, 0), clientv3.WithRange(c.updateKey(stack, seq)),
		clientv3.WithSort(clientv3.SortByKey, clientv3.SortDescend), clientv3.WithKeysOnly(), clientv3.WithLimit(keep))
	if err != nil || !resp.More {
		return 0, err
	}
	last := resp.Kvs[len(resp.Kvs)-1].Key
	first, err := strconv.ParseUint(c.name("updates/", last)[len(stack)+1:], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("update key %s: %w", last, err)
	}
	return first, nil
}

// counter reads a decimal counter and its mod revision (0, 0 if absent).
func (c *Cluster) counter(key string) (uint64, int64, error) {
	ctx, cancel := c.ctx()
	defer cancel()
	resp, err := c.cli.Get(ctx, key)
	if err != nil || len(resp.Kvs) == 0 {
		return 0, 0, err
	}
	n, err := strconv.ParseUint(string(resp.Kvs[0].Value), 10, 64)
	return n, resp.Kvs[0].ModRevision, err
}

// PutUpdate overwrites a stored update; ErrNotFound when it was never
// begun or has been pruned. An update that model.Folds says absorbs the
// stack's record before it is stored as model.Fold of the two, and that
// record and its log are deleted, in one transaction, as the BoltDB store
// does.
func (c *Cluster) PutUpdate(u model.Update) error {
	f, err := c.stackFence(u.Stack)
	if err != nil {
		return fmt.Errorf("cluster: put update %s: %w", model.UpdateID(u.Stack, u.Seq), err)
	}
	return c.putUpdate(u, f)
}

func (c *Cluster) putUpdate(u model.Update, f fence) error {
	u.ID = model.UpdateID(u.Stack, u.Seq)
	if err := c.putFoldingUpdate(u, f); err != nil {
		return fmt.Errorf("cluster: put update %s: %w", u.ID, err)
	}
	return nil
}

// putFoldingUpdate writes u behind f, folding it with the record before
// it when model.Folds says so. A fold that a concurrent change of that
// record defeats is decided again on what the store then holds.
func (c *Cluster) putFoldingUpdate(u model.Update, f fence) error {
	for {
		prev, err := c.previousUpdate(u)
		if err != nil {
			return err
		}
		if prev.rev == 0 || !model.Folds(prev.u, u) {
			v, err := json.Marshal(u)
			if err != nil {
				return err
			}
			return c.putExisting(f, c.updateKey(u.Stack, u.Seq), c.updateKey(u.Stack, u.Seq), v)
		}
		ok, err := c.putFolded(f, prev, u)
		if err != nil || ok {
			return err
		}
	}
}

// storedUpdate is an update as read from the store: its key and mod
// revision.
type storedUpdate struct {
	u   model.Update
	key string
	rev int64
}

// previousUpdate reads the record of u's stack just before u; a zero rev
// when there is none, or when u is not a finished drift check (which
// folds nothing: no need to read).
func (c *Cluster) previousUpdate(u model.Update) (storedUpdate, error) {
	if u.Type != model.UpdateDrift || u.State == model.UpdateRunning {
		return storedUpdate{}, nil
	}
	ctx, cancel := c.ctx()
	defer cancel()
	resp, err := c.cli.Get(ctx, c.updateKey(u.Stack, 0), clientv3.WithRange(c.updateKey(u.Stack, u.Seq)),
		clientv3.WithSort(clientv3.SortByKey, clientv3.SortDescend), clientv3.WithLimit(1))
	if err != nil || len(resp.Kvs) == 0 {
		return storedUpdate{}, err
	}
	kv := resp.Kvs[0]
	prev := storedUpdate{key: string(kv.Key), rev: kv.ModRevision}
	if err := json.Unmarshal(kv.Value, &prev.u); err != nil {
		return storedUpdate{}, fmt.Errorf("%s: %w", kv.Key, err)
	}
	return prev, nil
}

// putFolded stores model.Fold(prev.u, u) and deletes prev and its log,
// behind f, if u's record exists and prev's is still at its mod
// revision. It reports false when prev changed; ErrNotFound when u's
// record is gone.
func (c *Cluster) putFolded(f fence, prev storedUpdate, u model.Update) (bool, error) {
	v, err := json.Marshal(model.Fold(prev.u, u))
	if err != nil {
		return false, err
	}
	ukey := c.updateKey(u.Stack, u.Seq)
	seq := strings.TrimPrefix(prev.key, c.key("updates/", u.Stack+"/"))
	ok, err := c.txnBehind(f,
		[]clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(ukey), ">", 0), clientv3.Compare(clientv3.ModRevision(prev.key), "=", prev.rev)},
		clientv3.OpPut(ukey, string(v)), clientv3.OpDelete(prev.key), clientv3.OpDelete(c.key("logs/", u.Stack+"/"+seq)))
	if err != nil || ok {
		return ok, err
	}
	if _, err := c.get(ukey); err != nil {
		return false, err // ErrNotFound when u's record is gone
	}
	return false, nil
}

// putExisting writes value at key behind f, if the update at ukey
// exists.
func (c *Cluster) putExisting(f fence, ukey, key string, value []byte) error {
	ok, err := c.txnBehind(f, []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(ukey), ">", 0)},
		clientv3.OpPut(key, string(value)))
	switch {
	case err != nil:
		return err
	case !ok:
		return model.ErrNotFound
	}
	return nil
}

// PutLog stores the log of update id, its tail kept within LogLimit
// bytes as the BoltDB store keeps it, compressed.
func (c *Cluster) PutLog(id string, log []byte) error {
	stack, _, err := model.ParseUpdateID(id)
	if err != nil {
		return fmt.Errorf("cluster: put log %s: %w", id, err)
	}
	f, err := c.stackFence(stack)
	if err != nil {
		return fmt.Errorf("cluster: put log %s: %w", id, err)
	}
	return c.putLog(id, log, f)
}

func (c *Cluster) putLog(id string, log []byte, f fence) error {
	stack, seq, err := model.ParseUpdateID(id)
	if err != nil {
		return fmt.Errorf("cluster: put log %s: %w", id, err)
	}
	z, err := compress(model.TruncateLog(log, c.opts.LogLimit))
	if err != nil {
		return fmt.Errorf("cluster: put log %s: %w", id, err)
	}
	if err := c.putExisting(f, c.updateKey(stack, seq), c.logKey(stack, seq), z); err != nil {
		return fmt.Errorf("cluster: put log %s: %w", id, err)
	}
	return nil
}

func compress(b []byte) ([]byte, error) {
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	if _, err := w.Write(b); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	if buf.Len() > maxLogBytes {
		return nil, fmt.Errorf("the log compresses to %d bytes, more than etcd takes (%d)", buf.Len(), maxLogBytes)
	}
	return buf.Bytes(), nil
}

// Update reads update id.
func (c *Cluster) Update(id string) (model.Update, error) {
	stack, seq, err := model.ParseUpdateID(id)
	if err != nil {
		return model.Update{}, fmt.Errorf("cluster: update %s: %w", id, err)
	}
	v, err := c.get(c.updateKey(stack, seq))
	if err != nil {
		return model.Update{}, fmt.Errorf("cluster: update %s: %w", id, err)
	}
	var u model.Update
	if err := json.Unmarshal(v, &u); err != nil {
		return model.Update{}, fmt.Errorf("cluster: update %s: %w", id, err)
	}
	return u, nil
}

// Log reads the log of update id: empty when it has none yet.
func (c *Cluster) Log(id string) ([]byte, error) {
	stack, seq, err := model.ParseUpdateID(id)
	if err != nil {
		return nil, fmt.Errorf("cluster: log %s: %w", id, err)
	}
	ctx, cancel := c.ctx()
	defer cancel()
	resp, err := c.cli.Txn(ctx).Then(clientv3.OpGet(c.updateKey(stack, seq), clientv3.WithCountOnly()),
		clientv3.OpGet(c.logKey(stack, seq))).Commit()
	if err != nil {
		return nil, fmt.Errorf("cluster: log %s: %w", id, err)
	}
	if resp.Responses[0].GetResponseRange().Count == 0 {
		return nil, fmt.Errorf("cluster: log %s: %w", id, model.ErrNotFound)
	}
	kvs := resp.Responses[1].GetResponseRange().Kvs
	if len(kvs) == 0 {
		return []byte{}, nil
	}
	r, err := gzip.NewReader(bytes.NewReader(kvs[0].Value))
	if err != nil {
		return nil, fmt.Errorf("cluster: log %s: %w", id, err)
	}
	log, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("cluster: log %s: %w", id, err)
	}
	return log, nil
}

// Updates reads a stack's updates newest first, those with Seq < before
// when before > 0, at most limit (50 when limit <= 0).
func (c *Cluster) Updates(stack string, before uint64, limit int) ([]model.Update, error) {
	if limit <= 0 {
		limit = defaultPageSize
	}
	end := clientv3.GetPrefixRangeEnd(c.key("updates/", stack+"/"))
	if before > 0 {
		end = c.updateKey(stack, before)
	}
	ctx, cancel := c.ctx()
	defer cancel()
	resp, err := c.cli.Get(ctx, c.updateKey(stack, 0), clientv3.WithRange(end),
		clientv3.WithSort(clientv3.SortByKey, clientv3.SortDescend), clientv3.WithLimit(int64(limit)))
	if err != nil {
		return nil, fmt.Errorf("cluster: updates of %s: %w", stack, err)
	}
	return decodeUpdates(resp.Kvs, stack)
}

// RunningUpdates reads every update whose state is running.
func (c *Cluster) RunningUpdates() ([]model.Update, error) {
	ctx, cancel := c.ctx()
	defer cancel()
	resp, err := c.cli.Get(ctx, c.opts.Prefix+"updates/", clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("cluster: running updates: %w", err)
	}
	all, err := decodeUpdates(resp.Kvs, "")
	if err != nil {
		return nil, err
	}
	out := []model.Update{}
	for _, u := range all {
		if u.State == model.UpdateRunning {
			out = append(out, u)
		}
	}
	return out, nil
}

func decodeUpdates(kvs []*mvccpb.KeyValue, stack string) ([]model.Update, error) {
	out := make([]model.Update, 0, len(kvs))
	for _, kv := range kvs {
		var u model.Update
		if err := json.Unmarshal(kv.Value, &u); err != nil {
			return nil, fmt.Errorf("cluster: updates %s: %s: %w", stack, kv.Key, err)
		}
		out = append(out, u)
	}
	return out, nil
}

// PutRevision appends a config revision, assigning its Seq.
func (c *Cluster) PutRevision(r model.ConfigRevision) (model.ConfigRevision, error) {
	seqKey := c.opts.Prefix + "revseq"
	for {
		last, modRev, err := c.counter(seqKey)
		if err != nil {
			return r, fmt.Errorf("cluster: put revision: %w", err)
		}
		r.Seq = last + 1
		v, err := json.Marshal(r)
		if err != nil {
			return r, fmt.Errorf("cluster: put revision: %w", err)
		}
		ops := []clientv3.Op{clientv3.OpPut(seqKey, strconv.FormatUint(r.Seq, 10)), clientv3.OpPut(c.key("revisions/", seqPart(r.Seq)), string(v))}
		if keep := uint64(c.opts.HistoryLimit); r.Seq > keep {
			ops = append(ops, clientv3.OpDelete(c.key("revisions/", seqPart(0)), clientv3.WithRange(c.key("revisions/", seqPart(r.Seq-keep+1)))))
		}
		ctx, cancel := c.ctx()
		resp, err := c.cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(seqKey), "=", modRev)).Then(ops...).Commit()
		cancel()
		if err != nil {
			return r, fmt.Errorf("cluster: put revision: %w", err)
		}
		if resp.Succeeded {
			return r, nil
		}
	}
}

// Revisions lists config revisions newest first, those with Seq < before
// when before > 0, at most limit (50 when limit <= 0).
func (c *Cluster) Revisions(before uint64, limit int) ([]model.ConfigRevision, error) {
	if limit <= 0 {
		limit = defaultPageSize
	}
	end := clientv3.GetPrefixRangeEnd(c.opts.Prefix + "revisions/")
	if before > 0 {
		end = c.key("revisions/", seqPart(before))
	}
	ctx, cancel := c.ctx()
	defer cancel()
	resp, err := c.cli.Get(ctx, c.key("revisions/", seqPart(0)), clientv3.WithRange(end),
		clientv3.WithSort(clientv3.SortByKey, clientv3.SortDescend), clientv3.WithLimit(int64(limit)))
	if err != nil {
		return nil, fmt.Errorf("cluster: revisions: %w", err)
	}
	out := make([]model.ConfigRevision, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		var r model.ConfigRevision
		if err := json.Unmarshal(kv.Value, &r); err != nil {
			return nil, fmt.Errorf("cluster: revision %s: %w", kv.Key, err)
		}
		out = append(out, r)
	}
	return out, nil
}

// Meta reads a small value; ErrNotFound when it is not set.
func (c *Cluster) Meta(key string) ([]byte, error) {
	v, err := c.get(c.key("meta/", key))
	if err != nil {
		return nil, fmt.Errorf("cluster: meta %s: %w", key, err)
	}
	return v, nil
}

// PutMeta sets a small value.
func (c *Cluster) PutMeta(key string, value []byte) error {
	ctx, cancel := c.ctx()
	defer cancel()
	if _, err := c.cli.Put(ctx, c.key("meta/", key), string(value)); err != nil {
		return fmt.Errorf("cluster: put meta %s: %w", key, err)
	}
	return nil
}
