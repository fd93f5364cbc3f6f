package cluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/stackd/stackd/daemon"
	"github.com/stackd/stackd/daemon/model"
	"github.com/stackd/stackd/daemon/review"
)

// Defaults of Options.
const (
	DefaultTTL          = 15 * time.Second
	DefaultGrace        = 30 * time.Second
	DefaultHistoryLimit = 100
	DefaultLogLimit     = 1 << 20
	dialTimeout         = 5 * time.Second
	// requestTimeout bounds one etcd request: a write that cannot reach a
	// quorum fails rather than hangs.
	requestTimeout = 5 * time.Second
)

// Options configure a Cluster. Endpoints and Node are required.
type Options struct {
	// Endpoints are etcd's client URLs.
	Endpoints []string
	// CAFile, CertFile and KeyFile set up TLS: the CA that signed etcd's
	// certificate, and this replica's client certificate and key.
	CAFile, CertFile, KeyFile string
	// Prefix holds every key of the cluster; it ends with "/".
	Prefix string
	// Node names this replica; it must be unique among live replicas.
	Node string
	// AdvertiseURL is this replica's API as other replicas reach it.
	AdvertiseURL string
	// TTL is the session lease's time to live (DefaultTTL): how long a
	// dead replica keeps its stacks.
	TTL time.Duration
	// HistoryLimit is how many updates are kept per stack, and how many
	// config revisions (DefaultHistoryLimit).
	HistoryLimit int
	// LogLimit is how many bytes of each update's log are kept, before
	// compression (DefaultLogLimit).
	LogLimit int
	Logger   *slog.Logger
}

func (o Options) withDefaults() Options {
	if o.TTL <= 0 {
		o.TTL = DefaultTTL
	}
	if o.HistoryLimit <= 0 {
		o.HistoryLimit = DefaultHistoryLimit
	}
	if o.LogLimit <= 0 {
		o.LogLimit = DefaultLogLimit
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if !strings.HasSuffix(o.Prefix, "/") {
		o.Prefix += "/"
	}
	return o
}

// member is one live replica as it registers itself.
type member struct {
	Name    string    `json:"name"`
	URL     string    `json:"url,omitempty"`
	Started time.Time `json:"started"`
}

// Cluster is this replica's membership of a cluster: its session, the
// stacks it holds, and the shared store. It implements daemon.Ownership
// and daemon.Store.
type Cluster struct {
	opts    Options
	log     *slog.Logger
	cli     *clientv3.Client
	started time.Time

	mu sync.Mutex
	// session is nil while this replica has none: it then holds nothing.
	session *concurrency.Session
	members map[string]member
	// owners is every stack's holder as the owners/ watch reports it.
	owners map[string]string
	// wanted are the stacks the daemon knows (SetStacks).
	wanted map[string]bool
	// held maps the stacks this replica holds to the create revision of
	// its ownership key: the fence of every write about them.
	held map[string]int64
	// handover are held stacks this replica was asked to give up.
	handover map[string]bool
	// acquiring are stacks with a claim in flight.
	acquiring map[string]bool
	// lostHere are stacks this replica lost (its session ended, or their
	// key went) that the daemon has not released yet: an operation of
	// that holding may still be ending. They are not claimed again
	// before, so that such an operation can never write under a new
	// holding of this replica's (its fence would be the new key's).
	lostHere map[string]bool
	leader   string
	moves    uint64
	lost     uint64

	// audit is the audit trail's counter as this replica last saw it.
	audit auditCounter

	events *queue[model.OwnershipEvent]
	// prs are the pull requests this replica knows, and prWork hands
	// the work of those it holds to the previewer (pullrequests.go).
	prs    map[string]*prState
	prWork *queue[review.Work]
	// prFollowed is set once the previewer follows prWork.
	prFollowed bool
	kick       chan struct{}
	cancel     context.CancelFunc
	done       chan struct{}
}

var (
	_ daemon.Ownership = (*Cluster)(nil)
	_ daemon.Store     = (*Cluster)(nil)
)

// Open connects to etcd and checks that it answers; Start joins.
func Open(ctx context.Context, opts Options) (*Cluster, error) {
	opts = opts.withDefaults()
	if len(opts.Endpoints) == 0 || opts.Node == "" {
		return nil, errors.New("cluster: endpoints and a node name are required")
	}
	tlsConf, err := tlsConfig(opts)
	if err != nil {
		return nil, err
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints: opts.Endpoints, TLS: tlsConf, DialTimeout: dialTimeout, Context: ctx,
		Logger: zapLogger(), AutoSyncInterval: time.Minute,
	})
	if err != nil {
		return nil, fmt.Errorf("cluster: connect to etcd: %w", err)
	}
	cctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	if _, err := cli.Get(cctx, opts.Prefix+"members/", clientv3.WithPrefix(), clientv3.WithCountOnly()); err != nil {
		cli.Close()
		return nil, fmt.Errorf("cluster: etcd at %s does not answer: %w", strings.Join(opts.Endpoints, ","), err)
	}
	return &Cluster{
		opts: opts, log: opts.Logger, cli: cli, started: time.Now(),
		members: map[string]member{}, owners: map[string]string{}, wanted: map[string]bool{},
		held: map[string]int64{}, handover: map[string]bool{}, acquiring: map[string]bool{}, lostHere: map[string]bool{},
		events: newQueue[model.OwnershipEvent](), prs: map[string]*prState{}, prWork: newQueue[review.Work](), kick: make(chan struct{}, 1), done: make(chan struct{}),
	}, nil
}

// tlsConfig builds the client TLS settings of opts; nil without TLS.
func tlsConfig(opts Options) (*tls.Config, error) {
	if opts.CAFile == "" && opts.CertFile == "" && opts.KeyFile == "" {
		return nil, nil
	}
	conf := &tls.Config{MinVersion: tls.VersionTLS12}
	if opts.CAFile != "" {
		pem, err := os.ReadFile(opts.CAFile)
		if err != nil {
			return nil, fmt.Errorf("cluster: etcd CA: %w", err)
		}
		conf.RootCAs = x509.NewCertPool()
		if !conf.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("cluster: etcd CA %s holds no PEM certificate", opts.CAFile)
		}
	}
	if (opts.CertFile == "") != (opts.KeyFile == "") {
		return nil, errors.New("cluster: a client certificate needs its key, and a key its certificate")
	}
	if opts.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(opts.CertFile, opts.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("cluster: etcd client certificate: %w", err)
		}
		conf.Certificates = []tls.Certificate{cert}
	}
	return conf, nil
}

// Start joins the cluster in the background: it keeps a session, and
// claims and releases stacks as members come and go, until Close.
// It returns once this replica joined and knows the leader, or after a
// lease period: the daemon then starts knowing whether it records the
// first config revision.
func (c *Cluster) Start() {
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	go c.events.pump(ctx)
	go c.prWork.pump(ctx)
	go func() {
		defer close(c.done)
		c.run(ctx)
	}()
	deadline := time.Now().Add(c.opts.TTL)
	for time.Now().Before(deadline) {
		c.mu.Lock()
		known := c.session != nil && c.leader != ""
		c.mu.Unlock()
		if known {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	c.log.Warn("joined no cluster session with a leader yet; going on", "waited", c.opts.TTL)
}

// Close leaves the cluster: it gives up its stacks and its session (so
// that the others take them at once, not after the lease expired) and
// disconnects.
func (c *Cluster) Close() error {
	if c.cancel != nil {
		c.cancel()
		<-c.done
	}
	if err := c.cli.Close(); err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("cluster: close: %w", err)
	}
	return nil
}

// run keeps a session: each one lasts until etcd ends it (the lease
// expired: this replica was cut off or paused) or Close.
func (c *Cluster) run(ctx context.Context) {
	backoff := time.Second
	for ctx.Err() == nil {
		// The session's lease is kept alive while sctx lasts: ending it
		// lets the lease expire, so that keys of a session this replica
		// gave up are never renewed again.
		sctx, end := context.WithCancel(ctx)
		s, err := concurrency.NewSession(c.cli, concurrency.WithTTL(ttlSeconds(c.opts.TTL)), concurrency.WithContext(sctx))
		if err != nil {
			end()
			c.log.Warn("cannot open a cluster session; retrying", "err", err, "in", backoff)
			if !sleep(ctx, backoff) {
				return
			}
			backoff = min(2*backoff, c.opts.TTL)
			continue
		}
		backoff = time.Second
		c.serve(ctx, sctx, s)
		end()
	}
}

func ttlSeconds(d time.Duration) int { return max(1, int((d+time.Second-1)/time.Second)) }

// serve runs one session: registration, watches, the leader election and
// the ownership loop, until the session ends, its lease was not renewed
// in time, or ctx ends.
func (c *Cluster) serve(ctx, leaseCtx context.Context, s *concurrency.Session) {
	sctx, stop := context.WithCancel(leaseCtx)
	rev, err := c.join(sctx, s)
	if err != nil {
		stop()
		c.log.Warn("cannot join the cluster; retrying", "err", err)
		rctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, _ = s.Client().Revoke(rctx, s.Lease())
		cancel()
		sleep(ctx, time.Second)
		return
	}
	var wg sync.WaitGroup
	defer func() {
		stop()
		wg.Wait()
		c.endSession(s, ctx.Err() != nil)
	}()
	c.log.Info("joined the cluster", "node", c.opts.Node, "lease", fmt.Sprintf("%x", s.Lease()))
	for _, w := range []func(context.Context, int64){c.watchMembers, c.watchOwners, c.watchStacks, c.watchRequests, c.watchPush, c.watchPRs} {
		wg.Add(1)
		go func() { defer wg.Done(); w(sctx, rev+1) }()
	}
	// Not waited for: a campaign cancelled without a quorum resigns, and
	// that waits for etcd (concurrency.Election uses the client's own
	// context); it ends once etcd answers.
	go c.campaign(sctx, s)
	renewed := c.followRenewals(sctx, s)
	tick := time.NewTicker(max(c.opts.TTL/3, 100*time.Millisecond))
	defer tick.Stop()
	watchdog := time.NewTicker(100 * time.Millisecond)
	defer watchdog.Stop()
	for {
		c.reconcile(sctx)
		select {
		case <-s.Done():
			return
		case <-sctx.Done():
			return
		case <-c.kick:
		case <-tick.C:
		case <-watchdog.C:
			if since := time.Since(time.Unix(0, renewed.Load())); since > c.opts.TTL*2/3 {
				c.log.Warn("etcd has not renewed this replica's lease in time; giving its stacks up before it expires",
					"since", since.Round(time.Millisecond), "ttl", c.opts.TTL)
				return
			}
		}
	}
}

// followRenewals records when etcd last renewed the session's lease.
// etcd expires the lease a TTL after its last renewal; a replica that
// heard of none for two thirds of that stops acting before it could, so
// that it never acts on a stack whose key may already be another's.
func (c *Cluster) followRenewals(ctx context.Context, s *concurrency.Session) *atomic.Int64 {
	var renewed atomic.Int64
	renewed.Store(time.Now().UnixNano())
	ch, err := c.cli.KeepAlive(ctx, s.Lease())
	if err != nil {
		return &renewed // the session's own keepalive reports the end
	}
	go func() {
		for range ch {
			renewed.Store(time.Now().UnixNano())
		}
	}()
	return &renewed
}

// join registers this replica under the session's lease and reads the
// members, the holders and the records; it returns the revision read at.
func (c *Cluster) join(ctx context.Context, s *concurrency.Session) (int64, error) {
	m, _ := json.Marshal(member{Name: c.opts.Node, URL: c.opts.AdvertiseURL, Started: c.started})
	rctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	key := c.key("members/", c.opts.Node)
	put := clientv3.OpPut(key, string(m), clientv3.WithLease(s.Lease()))
	resp, err := c.cli.Txn(rctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).Then(put).Commit()
	if err == nil && !resp.Succeeded {
		// The key of this very process's last session (same name and
		// start) may outlive it until its lease expires: take it over.
		resp, err = c.cli.Txn(rctx).If(clientv3.Compare(clientv3.Value(key), "=", string(m))).Then(put).Commit()
	}
	if err != nil {
		return 0, fmt.Errorf("register: %w", err)
	}
	if !resp.Succeeded {
		return 0, fmt.Errorf("another live replica is named %q: node names must be unique (--node-name)", c.opts.Node)
	}
	snap, err := c.cli.Txn(rctx).Then(
		clientv3.OpGet(c.opts.Prefix+"members/", clientv3.WithPrefix()),
		clientv3.OpGet(c.opts.Prefix+"owners/", clientv3.WithPrefix()),
		clientv3.OpGet(c.opts.Prefix+"stacks/", clientv3.WithPrefix()),
		clientv3.OpGet(c.opts.Prefix+"pr", clientv3.WithPrefix()),
	).Commit()
	if err != nil {
		return 0, fmt.Errorf("read the cluster: %w", err)
	}
	c.mu.Lock()
	c.session = s
	c.members = map[string]member{}
	for _, kv := range snap.Responses[0].GetResponseRange().Kvs {
		c.putMemberLocked(kv.Value)
	}
	c.owners = map[string]string{}
	for _, kv := range snap.Responses[1].GetResponseRange().Kvs {
		c.owners[c.name("owners/", kv.Key)] = string(kv.Value)
	}
	c.mu.Unlock()
	for _, kv := range snap.Responses[2].GetResponseRange().Kvs {
		c.recordChanged(c.name("stacks/", kv.Key), kv.Value)
	}
	c.loadPRs(snap.Responses[3].GetResponseRange().Kvs)
	return snap.Header.Revision, nil
}

// endSession forgets what the session held. When it ended by itself,
// every held stack is lost: the daemon interrupts what runs on them.
func (c *Cluster) endSession(s *concurrency.Session, closing bool) {
	c.mu.Lock()
	lost := slices.Sorted(maps.Keys(c.held))
	for _, name := range lost {
		c.lostHere[name] = true
	}
	lostPRs := c.endPRsLocked()
	c.held, c.handover, c.session, c.leader = map[string]int64{}, map[string]bool{}, nil, ""
	if !closing {
		c.lost++
	}
	c.mu.Unlock()
	for _, name := range lost {
		c.events.push(model.OwnershipEvent{Kind: model.OwnerLost, Stack: name})
	}
	for _, key := range lostPRs {
		c.prWork.push(review.Work{Key: key, Lost: true})
	}
	if closing {
		c.log.Info("leaving the cluster", "node", c.opts.Node, "released", len(lost))
	} else {
		c.log.Error("lost the cluster session: acting on no stack until a new one is open", "node", c.opts.Node, "stacks", len(lost))
	}
	// Revoke the lease: the others then take the stacks at once, rather
	// than when it expires. Without etcd this fails, and the lease
	// expires.
	rctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, _ = s.Client().Revoke(rctx, s.Lease())
}

// campaign makes this replica the leader when no other member is, and
// follows who is.
func (c *Cluster) campaign(ctx context.Context, s *concurrency.Session) {
	e := concurrency.NewElection(s, c.opts.Prefix+"leader/")
	go func() {
		for resp := range e.Observe(ctx) {
			if len(resp.Kvs) > 0 {
				c.mu.Lock()
				c.leader = string(resp.Kvs[0].Value)
				c.mu.Unlock()
			}
		}
	}()
	if err := e.Campaign(ctx, c.opts.Node); err != nil {
		return // the session or the cluster ended
	}
	c.mu.Lock()
	if c.session != s {
		c.mu.Unlock()
		return // won with a session that has ended meanwhile
	}
	c.leader = c.opts.Node
	c.mu.Unlock()
	c.log.Info("this replica leads the cluster", "node", c.opts.Node)
}

// key is the full key of name under part ("owners/", …).
func (c *Cluster) key(part, name string) string { return c.opts.Prefix + part + name }

// name is the last part of a key under part.
func (c *Cluster) name(part string, key []byte) string {
	return strings.TrimPrefix(string(key), c.opts.Prefix+part)
}

func (c *Cluster) putMemberLocked(v []byte) {
	var m member
	if err := json.Unmarshal(v, &m); err == nil && m.Name != "" {
		c.members[m.Name] = m
	}
}

// poke makes the ownership loop run again soon.
func (c *Cluster) poke() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
