package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/stackd/stackd/cluster"
	"github.com/stackd/stackd/daemon"
	"github.com/stackd/stackd/runner"
)

// clusterFlags are the flags of cluster mode: several replicas sharing
// the stacks through etcd.
type clusterFlags struct {
	etcd          string
	caFile        string
	certFile      string
	keyFile       string
	name          string
	prefix        string
	node          string
	advertise     string
	leaseTTL      time.Duration
	handover      time.Duration
	sharedBackend bool
}

func (f *clusterFlags) define(fs *flag.FlagSet) {
	f.defineEtcd(fs, "cluster-etcd", "etcd client `URLs`, comma-separated: run as one replica of a cluster (unset: a single node)")
	fs.StringVar(&f.node, "node-name", "", "this replica's name, unique in the cluster (default: the host name)")
	fs.StringVar(&f.advertise, "advertise-url", "", "URL at which the other replicas reach this replica's API")
	fs.DurationVar(&f.leaseTTL, "cluster-lease-ttl", cluster.DefaultTTL, "time to live of this replica's etcd session: how long its stacks wait after it died")
	fs.DurationVar(&f.handover, "handover-grace", daemon.DefaultHandoverGrace, "how long a replica that took a stack over from one that died or froze during an update waits before breaking its Pulumi lock")
	fs.BoolVar(&f.sharedBackend, "shared-backend", false, "in a cluster, accept a file:// --default-backend: the operator declares it shared by every replica")
}

// defineEtcd defines the flags that reach the cluster's etcd: its URLs
// (as urlFlag), TLS, and the cluster's name or prefix.
func (f *clusterFlags) defineEtcd(fs *flag.FlagSet, urlFlag, urlUsage string) {
	fs.StringVar(&f.etcd, urlFlag, "", urlUsage)
	fs.StringVar(&f.caFile, "cluster-etcd-ca-file", "", "CA certificate that signed etcd's certificate")
	fs.StringVar(&f.certFile, "cluster-etcd-cert-file", "", "client certificate for etcd")
	fs.StringVar(&f.keyFile, "cluster-etcd-key-file", "", "key of --cluster-etcd-cert-file")
	fs.StringVar(&f.name, "cluster-name", "default", "name of the cluster; its keys live under /stackd/<name>/")
	fs.StringVar(&f.prefix, "cluster-prefix", "", "etcd key prefix of the cluster (default /stackd/<cluster-name>/)")
}

// enabled says whether cluster mode is on.
func (f *clusterFlags) enabled() bool { return f.etcd != "" }

// heartbeat bounds how long a replica's pulumi processes outlive it when
// it freezes (the runner's watchdog): two thirds of the lease, when a
// replica that cannot renew its lease stops acting, so that they are
// dead by the time the lease can expire and another replica take the
// stack (which then waits --handover-grace before breaking its lock).
// None outside a cluster.
func (f *clusterFlags) heartbeat() time.Duration {
	if !f.enabled() {
		return 0
	}
	return f.leaseTTL * 2 / 3
}

// check refuses a cluster setup that cannot work: a default backend or
// secrets passphrase that only this replica can reach.
func (f *clusterFlags) check(backend, passphraseFile string) error {
	if !f.enabled() {
		return nil
	}
	switch {
	case backend == "":
		return usageErrorf("run: in a cluster the default file backend in the data dir is refused: set --default-backend to a backend every replica reaches (s3://, gs://, azblob://, postgres://, https://api.pulumi.com, or a shared file:// path with --shared-backend)")
	case strings.HasPrefix(backend, "file://") && !f.sharedBackend:
		return usageErrorf("run: in a cluster --default-backend %s must be reachable by every replica: if it is a shared file system, say so with --shared-backend", redactBackend(backend))
	case passphraseFile == "" && !strings.HasPrefix(backend, "https://"):
		return usageErrorf("run: in a cluster the secrets passphrase must be the same on every replica: give each one --passphrase-file")
	}
	return nil
}

// redactBackend drops user info and query from a backend URL.
func redactBackend(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(invalid URL)"
	}
	u.User, u.RawQuery = nil, ""
	return u.String()
}

// open joins the cluster; the returned Cluster is the daemon's Store and
// Ownership.
func (f *clusterFlags) open(ctx context.Context, log *slog.Logger) (*cluster.Cluster, error) {
	c, err := f.connect(ctx, log)
	if err != nil {
		return nil, err
	}
	c.Start()
	return c, nil
}

// connect connects to the cluster's etcd without joining.
func (f *clusterFlags) connect(ctx context.Context, log *slog.Logger) (*cluster.Cluster, error) {
	node := f.node
	if node == "" {
		h, err := os.Hostname()
		if err != nil {
			return nil, fmt.Errorf("--node-name: %w", err)
		}
		node = h
	}
	prefix := f.prefix
	if prefix == "" {
		if f.name == "" || strings.Contains(f.name, "/") {
			return nil, usageErrorf("run: --cluster-name must be a non-empty name without /")
		}
		prefix = "/stackd/" + f.name + "/"
	}
	var endpoints []string
	for _, e := range strings.Split(f.etcd, ",") {
		if e = strings.TrimSpace(e); e != "" {
			endpoints = append(endpoints, e)
		}
	}
	if len(endpoints) == 0 {
		return nil, usageErrorf("run: --cluster-etcd names no URL")
	}
	return cluster.Open(ctx, cluster.Options{Endpoints: endpoints, CAFile: f.caFile, CertFile: f.certFile, KeyFile: f.keyFile,
		Prefix: prefix, Node: node, AdvertiseURL: f.advertise, TTL: f.leaseTTL, Logger: log.With("component", "cluster")})
}

// pulumiClaims are the claims of Pulumi stacks on shared backends: in a
// cluster etcd's, which every replica shares; nil (the data dir's) for a
// single node.
func pulumiClaims(own daemon.Ownership) runner.Claims {
	if c, ok := own.(*cluster.Cluster); ok {
		return c.PulumiClaims()
	}
	return nil
}

// nodeName is the replica's name in update records; empty for a single
// node.
func nodeName(own daemon.Ownership) string {
	if own == nil {
		return ""
	}
	return own.Status().Node
}
