// Package etcdtest runs real etcd members in the test process, on
// loopback, for stackd's cluster tests: one member, or several forming a
// cluster whose members can be stopped and started again.
package etcdtest

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
)

// Cluster is a running etcd cluster of real members.
type Cluster struct {
	// configure, when set, changes each member's config before it starts.
	configure func(*embed.Config)
	dir       string
	names     []string
	clients   []url.URL
	peers     []url.URL
	members   []*embed.Etcd
}

// Start starts an n-member cluster in a temporary directory of t's and
// waits until it serves. The members stop when the test ends.
func Start(t testing.TB, n int) *Cluster {
	t.Helper()
	return StartWith(t, n, nil)
}

// StartWith is Start with each member's config changed by configure (TLS,
// say) before it starts.
func StartWith(t testing.TB, n int, configure func(*embed.Config)) *Cluster {
	t.Helper()
	c, err := start(t.TempDir(), n, configure)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.StopAll)
	return c
}

// StartIn starts an n-member cluster with its data in dir, for a test
// binary's TestMain; StopAll stops it.
func StartIn(dir string, n int) (*Cluster, error) { return start(dir, n, nil) }

// start starts a new cluster. A port found free may be taken by another
// test before a member binds it: the cluster then starts again on other
// ports, in a directory of its own, a few times.
func start(dir string, n int, configure func(*embed.Config)) (*Cluster, error) {
	var err error
	for attempt := range 5 {
		var c *Cluster
		if c, err = startOnce(filepath.Join(dir, fmt.Sprint("try-", attempt)), n, configure); err == nil {
			return c, nil
		}
		if !errors.Is(err, syscall.EADDRINUSE) && !strings.Contains(err.Error(), "address already in use") {
			return nil, err
		}
	}
	return nil, err
}

func startOnce(dir string, n int, configure func(*embed.Config)) (*Cluster, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	c := &Cluster{dir: dir, members: make([]*embed.Etcd, n), configure: configure}
	for i := range n {
		c.names = append(c.names, fmt.Sprintf("etcd-%d", i+1))
		c.clients = append(c.clients, freeURL())
		c.peers = append(c.peers, freeURL())
	}
	errs := make(chan error, n)
	for i := range n {
		go func() { errs <- c.start(i, embed.ClusterStateFlagNew) }()
	}
	var first error
	for range n {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	if first != nil {
		c.StopAll()
		return nil, first
	}
	return c, nil
}

// StopAll stops every member.
func (c *Cluster) StopAll() {
	for i := range c.members {
		c.Stop(i)
	}
}

// Endpoints are the client URLs of every member.
func (c *Cluster) Endpoints() []string {
	out := make([]string, len(c.clients))
	for i, u := range c.clients {
		out[i] = u.String()
	}
	return out
}

// Stop stops member i (its data stays, for Restart).
func (c *Cluster) Stop(i int) {
	if e := c.members[i]; e != nil {
		e.Close()
		c.members[i] = nil
	}
}

// Restart starts member i again on its data and addresses, and waits
// until it serves (which needs a quorum).
func (c *Cluster) Restart(i int) error {
	return c.start(i, embed.ClusterStateFlagExisting)
}

func (c *Cluster) start(i int, state string) error {
	cfg := embed.NewConfig()
	cfg.Name = c.names[i]
	cfg.Dir = filepath.Join(c.dir, c.names[i])
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{c.clients[i]}, []url.URL{c.clients[i]}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{c.peers[i]}, []url.URL{c.peers[i]}
	var initial []string
	for j, name := range c.names {
		initial = append(initial, name+"="+c.peers[j].String())
	}
	cfg.InitialCluster = strings.Join(initial, ",")
	cfg.InitialClusterToken = "stackd-test"
	cfg.ClusterState = state
	cfg.LogLevel = "error"
	cfg.LogOutputs = []string{filepath.Join(c.dir, c.names[i]+".log")}
	// Tests need a real etcd, not a durable one: skipping fsync keeps
	// them fast on a shared disk.
	cfg.UnsafeNoFsync = true
	if c.configure != nil {
		c.configure(cfg)
		if !cfg.ClientTLSInfo.Empty() {
			c.clients[i].Scheme = "https"
			cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{c.clients[i]}, []url.URL{c.clients[i]}
		}
	}
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return fmt.Errorf("start etcd member %s: %w", cfg.Name, err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		return fmt.Errorf("etcd member %s: %w", cfg.Name, err)
	case <-time.After(60 * time.Second):
		e.Close()
		return fmt.Errorf("etcd member %s did not become ready in 60s", cfg.Name)
	}
	c.members[i] = e
	return nil
}

// freeURL is an http URL on a loopback port that is free now.
func freeURL() url.URL {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer l.Close()
	return url.URL{Scheme: "http", Host: l.Addr().String()}
}
