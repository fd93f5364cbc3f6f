package cluster

import (
	"context"
	"errors"
	"fmt"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Slots are the slots of the rollout steps of StackSets (maxUpdate),
// shared by the replicas (the rollout package's Slots). A slot of key
// held by holder is the key rollout-slots/<key>/<holder>, bound to the
// holding replica's session lease: a replica that dies frees its slots
// when its lease ends. rollout-slotver/<key> is put with every slot
// taken: a slot is taken by a transaction that succeeds only if that key
// did not change since the holders were counted, so that no two replicas
// both take the last slot.
type Slots struct{ c *Cluster }

// slotAttempts bounds how often TryAcquire counts and tries again when
// another slot of the key was taken meanwhile.
const slotAttempts = 16

// errNoSession: a replica without a session holds nothing.
var errNoSession = errors.New("this replica has no cluster session")

// Slots returns the rollout slots of this replica.
func (c *Cluster) Slots() *Slots { return &Slots{c: c} }

// TryAcquire takes a slot of key for holder if fewer than max holders,
// holder aside, hold one; it says whether holder holds one now under
// this replica's session. A slot holder holds under another session
// (its stack moved here) is taken over, so that its old replica's
// Release leaves it. An error takes none.
func (s *Slots) TryAcquire(ctx context.Context, key, holder string, max int) (bool, error) {
	lease, err := s.lease(key, holder)
	if err != nil {
		return false, err
	}
	if max <= 0 {
		return false, fmt.Errorf("cluster: rollout slot %s: a limit of %d", key, max)
	}
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	prefix, ver := s.c.key("rollout-slots/", key+"/"), s.c.key("rollout-slotver/", key)
	for range slotAttempts {
		rev, others, mine, err := s.count(ctx, prefix, ver, holder, lease)
		switch {
		case err != nil:
			return false, err
		case mine:
			return true, nil
		case others >= max:
			return false, nil
		}
		resp, err := s.c.cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(ver), "=", rev)).
			Then(clientv3.OpPut(prefix+holder, s.c.opts.Node, clientv3.WithLease(lease)), clientv3.OpPut(ver, "")).Commit()
		if err != nil {
			return false, fmt.Errorf("cluster: take rollout slot %s for %s: %w", key, holder, err)
		}
		if resp.Succeeded {
			return true, nil
		}
	}
	return false, fmt.Errorf("cluster: rollout slot %s: taken by others %d times while counting", key, slotAttempts)
}

// count reads, at one revision, the modification revision of ver and
// the holders under prefix: how many others hold a slot, and whether
// holder holds one under lease.
func (s *Slots) count(ctx context.Context, prefix, ver, holder string, lease clientv3.LeaseID) (rev int64, others int, mine bool, err error) {
	resp, err := s.c.cli.Txn(ctx).Then(clientv3.OpGet(ver), clientv3.OpGet(prefix, clientv3.WithPrefix())).Commit()
	if err != nil {
		return 0, 0, false, fmt.Errorf("cluster: count the holders of rollout slot %s: %w", strings.TrimPrefix(ver, s.c.opts.Prefix), err)
	}
	if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) > 0 {
		rev = kvs[0].ModRevision
	}
	for _, kv := range resp.Responses[1].GetResponseRange().Kvs {
		switch name := strings.TrimPrefix(string(kv.Key), prefix); {
		case strings.Contains(name, "/"):
			// a slot of another key, one that key is a prefix of
		case name == holder:
			mine = clientv3.LeaseID(kv.Lease) == lease
		default:
			others++
		}
	}
	return rev, others, mine, nil
}

// Release gives holder's slot of key back if this replica's session
// holds it; one held under another session is left to its holder, and
// one of an ended session went with its lease.
func (s *Slots) Release(ctx context.Context, key, holder string) error {
	lease, err := s.lease(key, holder)
	if errors.Is(err, errNoSession) {
		return nil
	}
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	slot := s.c.key("rollout-slots/", key+"/"+holder)
	_, err = s.c.cli.Txn(ctx).If(clientv3.Compare(clientv3.LeaseValue(slot), "=", lease)).Then(clientv3.OpDelete(slot)).Commit()
	if err != nil {
		return fmt.Errorf("cluster: release rollout slot %s of %s: %w", key, holder, err)
	}
	return nil
}

// lease is the session lease slots are bound to, once key and holder
// are checked.
func (s *Slots) lease(key, holder string) (clientv3.LeaseID, error) {
	if key == "" || holder == "" || strings.Contains(holder, "/") || strings.ContainsRune(key+holder, 0) {
		return 0, fmt.Errorf("cluster: rollout slot %q of %q: want a key and a holder without a slash", key, holder)
	}
	s.c.mu.Lock()
	defer s.c.mu.Unlock()
	if s.c.session == nil {
		return 0, fmt.Errorf("cluster: rollout slot %s: %w", key, errNoSession)
	}
	return s.c.session.Lease(), nil
}
