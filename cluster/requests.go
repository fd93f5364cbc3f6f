package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/stackd/stackd/daemon/model"
)

// push is a push event as replicas pass it on.
type push struct {
	From   string   `json:"from"`
	URLs   []string `json:"urls"`
	Branch string   `json:"branch"`
}

// RequestSync passes a sync request to the holder of name, which watches
// for it.
func (c *Cluster) RequestSync(name, token string) error {
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	if _, err := c.cli.Put(ctx, c.key("requests/", name), token); err != nil {
		return fmt.Errorf("cluster: pass the sync request of %s on: %w", name, err)
	}
	return nil
}

// Push passes a push event on to every replica.
func (c *Cluster) Push(urls []string, branch string) error {
	v, _ := json.Marshal(push{From: c.opts.Node, URLs: urls, Branch: branch})
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	if _, err := c.cli.Put(ctx, c.opts.Prefix+"push", string(v)); err != nil {
		return fmt.Errorf("cluster: pass the push on: %w", err)
	}
	return nil
}

// watchRequests hands sync requests for held stacks to the daemon.
func (c *Cluster) watchRequests(ctx context.Context, rev int64) {
	c.watch(ctx, "requests/", rev, func(ev *clientv3.Event) {
		name := c.name("requests/", ev.Kv.Key)
		if ev.Type == clientv3.EventTypePut && c.Holds(name) {
			c.events.push(model.OwnershipEvent{Kind: model.OwnerSync, Stack: name, Token: string(ev.Kv.Value)})
		}
	})
}

// watchPush hands push events received by other replicas to the daemon.
func (c *Cluster) watchPush(ctx context.Context, rev int64) {
	c.watch(ctx, "push", rev, func(ev *clientv3.Event) {
		var p push
		if ev.Type != clientv3.EventTypePut || json.Unmarshal(ev.Kv.Value, &p) != nil || p.From == c.opts.Node {
			return
		}
		c.events.push(model.OwnershipEvent{Kind: model.OwnerPush, URLs: p.URLs, Branch: p.Branch})
	})
}

// queue delivers events in order without ever blocking the sender: the
// daemon may be busy while the cluster must go on watching.
type queue[T any] struct {
	mu      sync.Mutex
	pending []T
	ready   chan struct{}
	out     chan T
}

func newQueue[T any]() *queue[T] {
	return &queue[T]{ready: make(chan struct{}, 1), out: make(chan T)}
}

func (q *queue[T]) push(e T) {
	q.mu.Lock()
	q.pending = append(q.pending, e)
	q.mu.Unlock()
	select {
	case q.ready <- struct{}{}:
	default:
	}
}

// pump moves pending events to out until ctx ends.
func (q *queue[T]) pump(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-q.ready:
		}
		q.mu.Lock()
		batch := q.pending
		q.pending = nil
		q.mu.Unlock()
		for _, e := range batch {
			select {
			case q.out <- e:
			case <-ctx.Done():
				return
			}
		}
	}
}
