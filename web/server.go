package web

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/stackd/stackd/daemon"
	"github.com/stackd/stackd/daemon/access"
	"github.com/stackd/stackd/daemon/audit"
	"github.com/stackd/stackd/daemon/livelog"
	"github.com/stackd/stackd/daemon/model"
	"github.com/stackd/stackd/daemon/spec"
	"github.com/stackd/stackd/web/metrics"
	"github.com/stackd/stackd/web/tlscert"
)

// API is what the server asks of the daemon; *daemon.Daemon implements it.
//
// Every method returns data the caller owns (copies, not views into a
// store transaction): handlers gather what they need first and only then
// write the response, so a slow client never holds the daemon or its
// store.
type API interface {
	Stacks() []model.StackView
	// StackVersions lists every stack's version, by name: a stack's view
	// is read again (Stack) only when its version or holder changed.
	StackVersions() []model.StackVersion
	Stack(name string) (model.StackView, error)
	Sync(name string) (string, error)
	// SyncWindow says whether the change windows hold back a sync of the
	// stack asked now: how it waits and a message that says until when,
	// or nil when they let it run.
	SyncWindow(name string) (*model.ChangeWindowStatus, string)
	Ready() error
	// Updates lists a stack's updates newest first, those with Seq below
	// before when before > 0, at most limit.
	Updates(stack string, before uint64, limit int) ([]model.Update, error)
	Update(id string) (model.Update, error)
	// Log is an update's log: stored bytes, or the live log while it runs.
	Log(id string) ([]byte, *livelog.Log, error)
	Reload() error
	// ReloadAllowingRemoval is Reload letting this reload remove up to n
	// stacks past the mass-removal guard.
	ReloadAllowingRemoval(n int) error
	ConfigStatus() model.ConfigStatus
	// Push makes the stacks and Git config sources tracking branch of the
	// repository (any of urls) poll now, and names them.
	Push(urls []string, branch string) model.PushResult
	// ConfigRevisions lists the config revisions newest first, those with
	// Seq below before when before > 0, at most limit.
	ConfigRevisions(before uint64, limit int) ([]model.ConfigRevision, error)
	Stats() model.Stats
	// ClusterStatus is the cluster as this replica sees it; ok is false
	// for a single node.
	ClusterStatus() (status model.ClusterStatus, ok bool)
	// RemoteLog is the API URL of the replica running update id, when
	// another replica runs it: its live log is there.
	RemoteLog(id string) string
	// Backup writes a consistent copy of the state; daemon.ErrNoBackup
	// when the state is not the daemon's to copy.
	Backup(w io.Writer) (int64, error)
	// Pause stops operations from starting and returns how many run;
	// Resume lets them start again.
	Pause() int
	Resume()
	// StackResources is a stack's resources as of its last exported
	// state, with their drift status; it never runs pulumi.
	StackResources(name string) (model.Resources, error)
	// PreviewNow starts a read-only preview of the stack at its latest
	// commit, in the background; LastPreview is the last one (an error
	// wrapping model.ErrNotFound before the first).
	PreviewNow(name string) error
	LastPreview(name string) (model.StackPreview, error)
}

// DefaultAddr is loopback: exposing the API is an explicit choice.
const DefaultAddr = "127.0.0.1:8080"

// maxBody bounds request bodies.
const maxBody = 1 << 20

// Timeouts of the HTTP server. A followed log is exempt from the read and
// write timeouts: it extends its write deadline before each chunk.
const (
	readHeaderTimeout = 10 * time.Second
	readTimeout       = 30 * time.Second
	writeTimeout      = time.Minute
	idleTimeout       = 2 * time.Minute
)

// Options configure a Server. API is required.
type Options struct {
	// Addr is the listen address (DefaultAddr).
	Addr string
	API  API
	// Warnings are settings of the daemon that leave it open (the sandbox
	// off, no API token), shown in GET /api/v1/config.
	Warnings []string
	// Registry is what GET /metrics serves; nil serves no /metrics. See
	// metrics.New for stackd's own metrics.
	Registry *prometheus.Registry
	// Metrics, when set, are stackd's metrics in Registry: a scrape is
	// then served again while they did not change (see Metrics.Cached).
	Metrics *metrics.Metrics
	// Version is stackd's version, for the UI.
	Version string
	// Token, when set and Access is nil, is the bearer token every
	// mutating request needs (and every read, with ReadRequiresToken).
	// /healthz, /readyz and the webhook, which has its own secret, never
	// need it.
	Token string
	// ReadRequiresToken closes reads to anonymous requests: without it
	// anyone may read, and with Access every read needs a role that
	// allows it on the stack read (lists show those stacks only).
	ReadRequiresToken bool
	// Access, when set, says who every request is (named API tokens, the
	// admin token, session cookies) and what it may do (roles per stack);
	// Token is then not consulted. Nil keeps the single Token.
	Access access.Access
	// SignIn, when set (with Access), serves sign-in through OpenID
	// Connect at /auth/login and /auth/callback. Nil: no sign-in.
	SignIn access.SignIn
	// TokenSignIn, when set (with Access), serves the sign-in form at
	// /auth/signin, where a person gives an API token and gets a session
	// cookie naming it (tokensignin.go). Nil: no such form.
	TokenSignIn TokenSignIn
	// SessionTTL, when set, is how long the browser keeps a session
	// cookie (the session itself ends when Access says so); zero keeps it
	// until the browser closes.
	SessionTTL time.Duration
	// SecureCookies marks every cookie Secure, whatever the request came
	// over: the UI is reached through https URLs (a TLS-terminating
	// proxy that sets no X-Forwarded-Proto). Requests over TLS, or with
	// X-Forwarded-Proto: https, get Secure cookies anyway.
	SecureCookies bool
	// Audit, when set, keeps the audit trail: every request that changes
	// something or is refused, every sign-in and sign-out. Nil: none.
	Audit audit.Log
	// Node names this replica in audit records (cluster mode).
	Node string
	// WebhookSecret verifies push and pull-request webhooks (GitHub and
	// Gitea signatures, GitLab's token); empty disables the webhook
	// endpoint.
	WebhookSecret string
	// Previews, when set, runs previews of the pull requests the webhook
	// reports; the API and the UI list them. Nil ignores pull requests.
	Previews PreviewAPI
	// StackSets, when set, serves the StackSets and their rollouts
	// (stacksets.go); nil: their routes answer 404 and the UI does not
	// link them.
	StackSets StackSets
	// Issuer, when stackd signs workload identities (--oidc-issuer-url),
	// serves its discovery document and JWKS.
	Issuer Issuer
	// AllowedHosts are the host names (globs such as "*.example.com") the
	// server answers for, besides IP addresses, localhost and the listen
	// address: the names clients, forges and other replicas use.
	AllowedHosts []string
	// TLS, when set, makes the server serve HTTPS only (TLS 1.2 and
	// later, Go's default cipher suites) with the certificate of its
	// files, read again when they change.
	TLS *tlscert.Files
	// PeerRootCAs verify the https URLs of the other replicas, from which
	// the logs of the updates they run are fetched; nil: the system's.
	PeerRootCAs *x509.CertPool
	Logger      *slog.Logger
}

// Server serves the HTTP API.
type Server struct {
	api API
	// resourceBodies keeps each stack's encoded resources (getResources).
	resourceBodies bodyCache
	opts           Options
	log            *slog.Logger
	srv            *http.Server
	ln             net.Listener
	done           chan struct{}
	stopped        context.Context // done once Stop is called; ends followers
	stop           context.CancelFunc
	// deliveries de-duplicates webhook deliveries.
	deliveries recentDeliveries
	// stacks are the stacks as last rendered.
	stacks stackCache
	// unauthLimit bounds the unauthenticated refusals recorded.
	unauthLimit bucket
	// signInLimit bounds failed token sign-ins per client address.
	signInLimit signInLimits
	// peers is the transport of requests to other replicas (nil: the
	// default one).
	peers http.RoundTripper
	// stopping is set by Drain: reads are answered, writes refused.
	stopping atomic.Bool
}

// Drain makes the server answer reads only, while the daemon stops and
// waits for its running operations: /healthz says "stopping", /readyz is
// 503, and every other request but GET and HEAD gets 503. Stop ends it.
func (s *Server) Drain() {
	if !s.stopping.Swap(true) {
		s.log.Info("stopping: answering reads only until the running operations end")
	}
}

// refuseWrites answers 503 to what is not a read once the server drains.
func (s *Server) refuseWrites(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.stopping.Load() && r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Retry-After", "30")
			writeError(w, http.StatusServiceUnavailable, "stackd is stopping: it answers reads only until its running operations end")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// New makes a server; Start listens.
func New(opts Options) *Server {
	if opts.Addr == "" {
		opts.Addr = DefaultAddr
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Server{api: opts.API, opts: opts, log: opts.Logger, done: make(chan struct{}), peers: peerTransport(opts.PeerRootCAs)}
	s.stopped, s.stop = context.WithCancel(context.Background())
	s.srv = &http.Server{
		Addr:              opts.Addr,
		Handler:           s.Handler(),
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       idleTimeout,
		ErrorLog:          serverErrorLog(opts.Logger),
	}
	if opts.TLS != nil {
		s.srv.TLSConfig = opts.TLS.ServerConfig()
	}
	s.srv.RegisterOnShutdown(s.stop)
	return s
}

// Handler routes the API. It is exported for tests that need no socket.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", s.healthz)
	mux.HandleFunc("GET /readyz", s.readyz)
	if s.opts.Registry != nil {
		// Concurrent scrapes share one gathering.
		var h http.Handler = promhttp.HandlerFor(s.opts.Registry, promhttp.HandlerOpts{
			ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelWarn), CoalesceGather: true,
		})
		if s.opts.Metrics != nil {
			h = s.opts.Metrics.Cached(h)
		}
		mux.Handle("GET /metrics", h)
	}
	mux.HandleFunc("GET /api/v1/stacks", s.listStacks)
	mux.HandleFunc("GET /api/v1/stacks/{name}", s.getStack)
	mux.HandleFunc("POST /api/v1/stacks/{name}/sync", s.syncStack)
	mux.HandleFunc("POST /api/v1/stacks/{name}/approve", s.approveStack)
	mux.HandleFunc("POST /api/v1/stacks/{name}/reject", s.rejectStack)
	mux.HandleFunc("GET /api/v1/stacks/{name}/updates", s.listUpdates)
	mux.HandleFunc("GET /api/v1/stacks/{name}/resources", s.getResources)
	mux.HandleFunc("POST /api/v1/stacks/{name}/preview", s.previewNow)
	mux.HandleFunc("GET /api/v1/stacks/{name}/preview", s.getPreview)
	mux.HandleFunc("GET /api/v1/updates/{id}/log", s.getLog)
	mux.HandleFunc("POST /api/v1/reload", s.reload)
	mux.HandleFunc("GET /api/v1/config", s.getConfig)
	mux.HandleFunc("GET /api/v1/config/revisions", s.listRevisions)
	mux.HandleFunc("GET /api/v1/cluster", s.getCluster)
	mux.HandleFunc("GET /api/v1/previews", s.listPreviews)
	mux.HandleFunc("GET /api/v1/backup", s.backup)
	mux.HandleFunc("POST /api/v1/pause", s.pause)
	mux.HandleFunc("POST /api/v1/resume", s.resume)
	mux.HandleFunc("GET /api/v1/audit", s.listAudit)
	mux.HandleFunc("GET /api/v1/stacksets", s.listStackSets)
	mux.HandleFunc("GET /api/v1/stacksets/{name}", s.getStackSet)
	mux.HandleFunc("POST /api/v1/stacksets/{name}/resume", s.resumeStackSet)
	mux.HandleFunc("POST /api/v1/stacksets/{name}/abort", s.abortStackSet)
	mux.HandleFunc("POST "+webhookPath, s.webhook)
	mux.HandleFunc("/api/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "no such endpoint")
	})
	s.routeUI(mux)
	s.routeSignIn(mux)
	s.routeTokenSignIn(mux)
	s.routeOIDC(mux)
	// The guard sees what crossOrigin refuses, to record it.
	return s.refuseWrites(s.checkHost(limitBody(s.guard(crossOrigin(mux)))))
}

// crossOrigin refuses (403) unsafe requests a browser sends from another
// origin, so that a web page cannot make a visitor's browser sync or
// reload a daemon that has no token. Clients that are not browsers (the
// CLI, forges' webhooks) send no Sec-Fetch-Site or Origin header and pass.
func crossOrigin(next http.Handler) http.Handler {
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		writeError(w, http.StatusForbidden, "cross-origin request refused")
	}))
	return cop.Handler(next)
}

// Start listens on the configured address and serves in the background.
func (s *Server) Start() error {
	ln, err := net.Listen("tcp", s.srv.Addr)
	if err != nil {
		return fmt.Errorf("web: listen: %w", err)
	}
	s.ln = ln
	go func() {
		defer close(s.done)
		if err := s.serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("http server failed", "err", err)
		}
	}()
	s.log.Info("serving http", "addr", ln.Addr().String(), "tls", s.opts.TLS != nil, "auth", s.opts.Token != "" || s.opts.Access != nil,
		"sign-in", s.opts.SignIn != nil, "token-sign-in", s.opts.TokenSignIn != nil, "audit", s.opts.Audit != nil, "webhooks", s.opts.WebhookSecret != "",
		"previews", s.opts.Previews != nil, "metrics", s.opts.Registry != nil)
	return nil
}

// serve serves ln: HTTPS only with Options.TLS, whose certificate the
// TLS config gets on each handshake; else HTTP.
func (s *Server) serve(ln net.Listener) error {
	if s.opts.TLS != nil {
		return s.srv.ServeTLS(ln, "", "")
	}
	return s.srv.Serve(ln)
}

// Addr is the address the server listens on (useful with port 0).
func (s *Server) Addr() string {
	if s.ln == nil {
		return s.srv.Addr
	}
	return s.ln.Addr().String()
}

// Stop stops accepting requests, ends followed logs, and waits for the
// requests in flight until ctx ends.
func (s *Server) Stop(ctx context.Context) error {
	s.stop()
	if s.ln == nil {
		return nil
	}
	err := s.srv.Shutdown(ctx)
	<-s.done
	if tr, ok := s.peers.(interface{ CloseIdleConnections() }); ok {
		tr.CloseIdleConnections() // the other replicas' servers need not wait for them
	}
	if err != nil {
		return fmt.Errorf("web: shutdown: %w", err)
	}
	return nil
}

func limitBody(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, maxBody)
		next.ServeHTTP(w, r)
	})
}

// healthz says the process runs: "ok", or "stopping" with how many
// operations it waits for (GET /api/v1/config names them).
func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	if s.stopping.Load() {
		writeJSON(w, http.StatusOK, map[string]any{"status": "stopping", "operations": len(s.api.ConfigStatus().WaitingFor)})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	if s.stopping.Load() {
		writeError(w, http.StatusServiceUnavailable, "stopping")
		return
	}
	if err := s.api.Ready(); err != nil {
		msg := "not ready"
		if s.readsDetail(principal(r)) {
			msg = err.Error() // the detail stays behind a credential
		}
		writeError(w, http.StatusServiceUnavailable, msg)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

// readsDetail says whether p may see why the daemon is not ready: an
// identified caller allowed to read daemon-wide, or anyone on a daemon
// without credentials.
func (s *Server) readsDetail(p model.Principal) bool {
	if s.unprotected() {
		return true
	}
	ok, _ := s.permit(p, access.ActionRead, nil)
	return ok && p.Kind != model.PrincipalAnonymous
}

func (s *Server) getStack(w http.ResponseWriter, r *http.Request) {
	v, err := s.api.Stack(r.PathValue("name"))
	if err != nil {
		writeAPIError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, v)
}

// syncStack asks for a run; refresh says the stack had drifted, so that
// the run refreshes first. changeWindow and changeWindowMessage say that
// change windows hold the run back now: the request stays, and runs when
// they open.
func (s *Server) syncStack(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	body, err := decodeSyncBody(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	if body.OverrideWindow {
		token, status, err := s.overrideWindow(r, name, body.Reason)
		if err != nil {
			writeError(w, status, err.Error())
			return
		}
		writeJSON(w, status, map[string]any{"name": name, "request": token, "overrideWindow": true})
		return
	}
	v, err := s.api.Stack(name)
	var token string
	if err == nil {
		token, err = s.api.Sync(name)
	}
	if err != nil {
		writeAPIError(w, err)
		return
	}
	refresh := v.Status.Drift != nil && v.Status.Drift.State == spec.DriftDrifted
	s.log.Info("sync requested", "stack", name, "request", token, "refresh", refresh)
	out := map[string]any{"name": name, "request": token, "refresh": refresh}
	if ws, msg := s.api.SyncWindow(name); ws != nil {
		out["changeWindow"], out["changeWindowMessage"] = ws, msg // it waits: the request stays
	}
	writeJSON(w, http.StatusAccepted, out)
}

// reload reads the config again: 200 when it was applied, 422 with its
// problems when it was not (the config in force stays). ?allowRemoval=N
// lets this reload remove up to N stacks past the mass-removal guard.
func (s *Server) reload(w http.ResponseWriter, r *http.Request) {
	n, err := allowRemovalOf(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	if err := s.doReload(r, n); err != nil {
		writeError(w, http.StatusUnprocessableEntity, err.Error())
		return
	}
	s.log.Info("config reloaded through the API", "allowRemoval", n)
	writeJSON(w, http.StatusOK, map[string]string{"status": "reloaded"})
}

// allowRemovalOf is the request's allowRemoval (query or form), 0 when
// absent.
func allowRemovalOf(r *http.Request) (int, error) {
	v := r.FormValue("allowRemoval")
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("allowRemoval: want a number of stacks, got %q", v)
	}
	return n, nil
}

// doReload reloads, past the mass-removal guard for up to n stacks when
// n > 0, which the audit trail records as the request's reason.
func (s *Server) doReload(r *http.Request, n int) error {
	if n == 0 {
		return s.api.Reload()
	}
	noteAudit(r, "", fmt.Sprintf("allowed this reload to remove up to %d stack(s)", n))
	return s.api.ReloadAllowingRemoval(n)
}

// getConfig serves the config's status: the last (re)load and each
// source's state (model.ConfigStatus).
func (s *Server) getConfig(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, struct {
		model.ConfigStatus
		// Warnings are settings that leave the daemon open.
		Warnings []string `json:"warnings,omitempty"`
	}{s.api.ConfigStatus(), s.Warnings()})
}

// Warnings lists the settings that leave the daemon open: Options.Warnings,
// and a listen address other hosts reach, with no token.
func (s *Server) Warnings() []string {
	warnings := slices.Clip(s.opts.Warnings)
	if s.opts.Token != "" || s.opts.Access != nil || isLoopback(s.opts.Addr) {
		return warnings
	}
	return append(warnings, "the API listens on "+s.opts.Addr+" with no API token: anyone who reaches it can sync stacks and reload the config")
}

// isLoopback says whether a listen address reaches this host only.
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func (s *Server) getCluster(w http.ResponseWriter, _ *http.Request) {
	st, ok := s.api.ClusterStatus()
	if !ok {
		writeError(w, http.StatusNotFound, "stackd runs as a single node (no --cluster-etcd)")
		return
	}
	writeJSON(w, http.StatusOK, st)
}

// writeAPIError maps the daemon's errors to statuses.
func writeAPIError(w http.ResponseWriter, err error) {
	if errors.Is(err, daemon.ErrUnknownStack) || errors.Is(err, daemon.ErrUnknownUpdate) || errors.Is(err, model.ErrNotFound) {
		writeError(w, http.StatusNotFound, err.Error())
		return
	}
	if errors.Is(err, daemon.ErrPreviewRefused) {
		writeError(w, http.StatusConflict, err.Error())
		return
	}
	writeError(w, http.StatusInternalServerError, err.Error())
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"error": msg})
}

// writeJSON encodes v before writing anything, so that a value that
// cannot be encoded is a 500 rather than a truncated 200.
func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		status = http.StatusInternalServerError
		body, _ = json.Marshal(map[string]string{"error": "encode response: " + err.Error()})
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(append(body, '\n'))
}
