package cluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/stackd/stackd/daemon/audit"
	"github.com/stackd/stackd/daemon/model"
)

// The audit trail is shared by every replica: each appends what it
// served, and each reads all of it. Appends are not fenced by stack
// ownership. The entries' keys are audit/<Seq>, Seq taken from the
// counter auditseq in the transaction that writes the entry, so that the
// keys of every replica's entries are unique and in the order they were
// appended. (A key made of the time and the node would need no counter,
// but could not be paged by Seq, and an import from a single node would
// have to renumber its trail.) auditlow is the Seq below which the trail
// was pruned: reads and prunes range over Seqs from there to the counter,
// never over the whole prefix.

var _ audit.Log = (*Cluster)(nil)

// auditWindow is how many Seqs one read of the trail spans at most:
// about as many entries, well within etcd's limits on a response. A
// variable for the tests.
var auditWindow uint64 = 500

// maxAuditTries bounds the attempts of one append that other replicas'
// appends keep overtaking.
const maxAuditTries = 100

// auditCounter is this replica's view of the trail's counter: the last
// Seq it knows, and the counter key's mod revision then. Appends of one
// replica take turns, so that they never overtake each other.
type auditCounter struct {
	mu     sync.Mutex
	last   uint64
	modRev int64
}

func (c *Cluster) auditKey(seq uint64) string { return c.key("audit/", seqPart(seq)) }

func (c *Cluster) auditSeqKey() string { return c.opts.Prefix + "auditseq" }

// PutAudit appends e to the trail: it assigns e.Seq, the next number of
// the cluster's trail (never reused, even after pruning), and e.Time when
// it is zero (now). It returns e as stored. Any replica may append, held
// stacks or not.
func (c *Cluster) PutAudit(e model.AuditEntry) (model.AuditEntry, error) {
	if e.Time.IsZero() {
		e.Time = time.Now()
	}
	a := &c.audit
	a.mu.Lock()
	defer a.mu.Unlock()
	seqKey := c.auditSeqKey()
	for range maxAuditTries {
		e.Seq = a.last + 1
		v, err := json.Marshal(e)
		if err != nil {
			return model.AuditEntry{}, fmt.Errorf("cluster: put audit entry: %w", err)
		}
		ctx, cancel := c.ctx()
		resp, err := c.cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(seqKey), "=", a.modRev)).
			Then(clientv3.OpPut(seqKey, strconv.FormatUint(e.Seq, 10)), clientv3.OpPut(c.auditKey(e.Seq), string(v))).
			Else(clientv3.OpGet(seqKey)).Commit()
		cancel()
		if err != nil {
			return model.AuditEntry{}, fmt.Errorf("cluster: put audit entry: %w", err)
		}
		if resp.Succeeded {
			a.last, a.modRev = e.Seq, resp.Header.Revision
			return e, nil
		}
		// Another replica appended: take the counter as it is now.
		a.last, a.modRev = 0, 0
		if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) > 0 {
			if a.last, err = strconv.ParseUint(string(kvs[0].Value), 10, 64); err != nil {
				return model.AuditEntry{}, fmt.Errorf("cluster: put audit entry: counter %s: %w", seqKey, err)
			}
			a.modRev = kvs[0].ModRevision
		}
	}
	return model.AuditEntry{}, fmt.Errorf("cluster: put audit entry: other replicas' entries overtook it %d times", maxAuditTries)
}

// Audit reads the entries f selects, of every replica, newest first:
// those with Seq < f.Before when it is not 0, at most f.Limit
// (audit.PageDefault when 0 or less, audit.PageMax at most).
// None gives an empty slice. It reads the trail a window of Seqs at a
// time, in ascending ranges (etcd reads a whole range to sort it
// descending), from the newest.
func (c *Cluster) Audit(f audit.Filter) ([]model.AuditEntry, error) {
	lo, hi, err := c.auditBounds()
	if err != nil {
		return nil, fmt.Errorf("cluster: audit: %w", err)
	}
	if f.Before > 0 {
		hi = min(hi, f.Before)
	}
	scan := audit.NewScan(f)
	// The first window spans what a page without a filter needs; each
	// next one twice the last, up to auditWindow.
	window := min(auditWindow, uint64(max(scan.Remaining(), 16)))
	for ; hi > lo; window = min(2*window, auditWindow) {
		from := max(lo, hi-min(hi, window))
		ctx, cancel := c.ctx()
		resp, err := c.cli.Get(ctx, c.auditKey(from), clientv3.WithRange(c.auditKey(hi)))
		cancel()
		if err != nil {
			return nil, fmt.Errorf("cluster: audit: %w", err)
		}
		for i := len(resp.Kvs) - 1; i >= 0; i-- {
			more, err := scan.Add(resp.Kvs[i].Value)
			if err != nil {
				return nil, fmt.Errorf("cluster: audit: %s: %w", resp.Kvs[i].Key, err)
			}
			if !more {
				return scan.Entries, nil
			}
		}
		hi = from
	}
	return scan.Entries, nil
}

// auditBounds reads the trail's bounds: its Seqs are in [lo, hi). lo
// is auditlow, below which every entry was pruned (0 when nothing was),
// hi one above the counter. Only the two keys are read: a range with a
// limit costs etcd a count of the whole range, which for the oldest key
// of a long trail is most of the cost of a page.
func (c *Cluster) auditBounds() (lo, hi uint64, err error) {
	ctx, cancel := c.ctx()
	defer cancel()
	resp, err := c.cli.Txn(ctx).Then(clientv3.OpGet(c.auditSeqKey()), clientv3.OpGet(c.auditLowKey())).Commit()
	if err != nil {
		return 0, 0, err
	}
	counter, low := resp.Responses[0].GetResponseRange().Kvs, resp.Responses[1].GetResponseRange().Kvs
	if len(counter) == 0 {
		return 0, 0, nil
	}
	last, err := strconv.ParseUint(string(counter[0].Value), 10, 64)
	if err != nil {
		return 0, 0, fmt.Errorf("counter %s: %w", counter[0].Key, err)
	}
	if len(low) > 0 {
		if lo, err = strconv.ParseUint(string(low[0].Value), 10, 64); err != nil {
			return 0, 0, fmt.Errorf("%s: %w", low[0].Key, err)
		}
	}
	return min(lo, last+1), last + 1, nil
}

func (c *Cluster) auditLowKey() string { return c.opts.Prefix + "auditlow" }

// PruneAudit deletes the entries older than before, oldest first, and
// says how many. It stops at the first entry that is not older: entries
// are in time order but for the replicas' clocks, and one left behind
// goes at a later prune. Replicas may prune at once: each entry is
// counted by the one that deleted it.
func (c *Cluster) PruneAudit(before time.Time) (int, error) {
	lo, hi, err := c.auditBounds()
	if err != nil {
		return 0, fmt.Errorf("cluster: prune audit: %w", err)
	}
	total := 0
	for lo < hi {
		n, cut, done, err := c.pruneAuditWindow(before, lo, min(hi, lo+auditWindow))
		total += n
		if err != nil {
			return total, fmt.Errorf("cluster: prune audit: %w", err)
		}
		if done {
			break
		}
		lo = cut
	}
	return total, nil
}

// pruneAuditWindow deletes the entries of Seq in [lo, hi) older than
// before, up to the first that is not, and moves auditlow up to it (or
// to hi): it returns how many it deleted, where it stopped, and whether
// it found an entry to keep.
func (c *Cluster) pruneAuditWindow(before time.Time, lo, hi uint64) (n int, cut uint64, done bool, err error) {
	ctx, cancel := c.ctx()
	defer cancel()
	resp, err := c.cli.Get(ctx, c.auditKey(lo), clientv3.WithRange(c.auditKey(hi)))
	if err != nil {
		return 0, lo, false, err
	}
	cut = hi
	for _, kv := range resp.Kvs {
		var head struct{ Time *time.Time }
		if err := json.Unmarshal(kv.Value, &head); err != nil || head.Time == nil {
			return 0, lo, false, errors.Join(fmt.Errorf("%s holds no audit entry", kv.Key), err)
		}
		if !head.Time.Before(before) {
			if cut, err = strconv.ParseUint(c.name("audit/", kv.Key), 10, 64); err != nil {
				return 0, lo, false, fmt.Errorf("key %s: %w", kv.Key, err)
			}
			done = true
			break
		}
	}
	if cut == lo {
		return 0, lo, done, nil
	}
	// Entries below hi were all written before the bounds were read (each
	// with the counter): none can appear in the range deleted.
	tresp, err := c.cli.Txn(ctx).Then(clientv3.OpDelete(c.auditKey(lo), clientv3.WithRange(c.auditKey(cut))),
		clientv3.OpPut(c.auditLowKey(), strconv.FormatUint(cut, 10))).Commit()
	if err != nil {
		return 0, lo, false, err
	}
	return int(tresp.Responses[0].GetResponseDeleteRange().Deleted), cut, done, nil
}
