package web

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/stackd/stackd/daemon"
)

// API is what the server asks of the daemon; *daemon.Daemon implements it.
type API interface {
	Stacks() []daemon.StackView
	Stack(name string) (daemon.StackView, error)
	Sync(name string) (string, error)
	Ready() error
	// Updates lists a stack's updates newest first, those with Seq below
	// before when before > 0, at most limit.
	Updates(stack string, before uint64, limit int) ([]daemon.Update, error)
	Update(id string) (daemon.Update, error)
	// Log is an update's log: stored bytes, or the live log while it runs.
	Log(id string) ([]byte, *daemon.LiveLog, error)
	Reload() error
	ConfigStatus() daemon.ConfigStatus
	// Push makes the stacks tracking branch of the repository (any of
	// urls) poll now, and names them.
	Push(urls []string, branch string) []string
	Stats() daemon.Stats
}

// DefaultAddr is loopback: exposing the API is an explicit choice.
const DefaultAddr = "127.0.0.1:8080"

// maxBody bounds request bodies.
const maxBody = 1 << 20

// Options configure a Server.
type Options struct {
	Addr   string
	API    API
	Logger *slog.Logger
}

// Server serves the HTTP API.
type Server struct {
	api  API
	log  *slog.Logger
	srv  *http.Server
	ln   net.Listener
	done chan struct{}
}

// New makes a server; Start listens.
func New(opts Options) *Server {
	if opts.Addr == "" {
		opts.Addr = DefaultAddr
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Server{api: opts.API, log: opts.Logger, done: make(chan struct{})}
	s.srv = &http.Server{
		Addr:              opts.Addr,
		Handler:           s.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(opts.Logger.Handler(), slog.LevelWarn),
	}
	return s
}

// Handler routes the API. It is exported for tests that need no socket.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", s.healthz)
	mux.HandleFunc("GET /readyz", s.readyz)
	mux.HandleFunc("GET /api/v1/stacks", s.listStacks)
	mux.HandleFunc("GET /api/v1/stacks/{name}", s.getStack)
	mux.HandleFunc("POST /api/v1/stacks/{name}/sync", s.syncStack)
	mux.HandleFunc("/api/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "no such endpoint")
	})
	s.routeUI(mux)
	return limitBody(mux)
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
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("http server failed", "err", err)
		}
	}()
	s.log.Info("serving http", "addr", ln.Addr().String())
	return nil
}

// Addr is the address the server listens on (useful with port 0).
func (s *Server) Addr() string {
	if s.ln == nil {
		return s.srv.Addr
	}
	return s.ln.Addr().String()
}

// Stop stops accepting requests and waits for those in flight until ctx
// ends.
func (s *Server) Stop(ctx context.Context) error {
	if s.ln == nil {
		return nil
	}
	err := s.srv.Shutdown(ctx)
	<-s.done
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

func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

func (s *Server) readyz(w http.ResponseWriter, _ *http.Request) {
	if err := s.api.Ready(); err != nil {
		writeError(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

func (s *Server) listStacks(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"stacks": s.api.Stacks()})
}

func (s *Server) getStack(w http.ResponseWriter, r *http.Request) {
	v, err := s.api.Stack(r.PathValue("name"))
	if err != nil {
		writeAPIError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, v)
}

func (s *Server) syncStack(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	token, err := s.api.Sync(name)
	if err != nil {
		writeAPIError(w, err)
		return
	}
	s.log.Info("sync requested", "stack", name, "request", token)
	writeJSON(w, http.StatusAccepted, map[string]string{"name": name, "request": token})
}

// writeAPIError maps the daemon's errors to statuses.
func writeAPIError(w http.ResponseWriter, err error) {
	if errors.Is(err, daemon.ErrUnknownStack) {
		writeError(w, http.StatusNotFound, err.Error())
		return
	}
	writeError(w, http.StatusInternalServerError, err.Error())
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"error": msg})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}
