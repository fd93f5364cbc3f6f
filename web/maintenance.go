package web

import (
	"errors"
	"net/http"
	"time"

	"github.com/stackd/stackd/daemon"
)

// defaultPauseWait is how long POST /api/v1/pause waits by default for
// the operations in flight to end.
const defaultPauseWait = 5 * time.Minute

// backup streams a consistent copy of the state (GET /api/v1/backup). It
// is the admin action (routeOf): it needs the token whenever one is set,
// even when reads do not.
func (s *Server) backup(w http.ResponseWriter, _ *http.Request) {
	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(time.Time{}) // a large file on a slow link
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Disposition", `attachment; filename="stackd.db"`)
	w.Header().Set("Cache-Control", "no-store")
	if _, err := s.api.Backup(w); err != nil {
		if errors.Is(err, daemon.ErrNoBackup) {
			writeError(w, http.StatusNotImplemented, err.Error())
			return
		}
		// Headers are sent: the client sees a short body. Logged here.
		s.log.Error("backup failed", "err", err)
	}
}

// pause stops operations from starting and waits, up to ?wait= (5m), for
// those in flight to end: {"paused": true, "running": N}.
func (s *Server) pause(w http.ResponseWriter, r *http.Request) {
	wait := defaultPauseWait
	if v := r.URL.Query().Get("wait"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			writeError(w, http.StatusBadRequest, "wait: a duration such as 30s")
			return
		}
		wait = d
	}
	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(time.Now().Add(wait + writeTimeout))
	running := s.api.Pause()
	deadline := time.Now().Add(wait)
	for running > 0 && time.Now().Before(deadline) {
		select {
		case <-r.Context().Done():
			return
		case <-time.After(100 * time.Millisecond):
		}
		running = s.api.Stats().Running
	}
	writeJSON(w, http.StatusOK, map[string]any{"paused": true, "running": running})
}

// resume lets operations start again.
func (s *Server) resume(w http.ResponseWriter, _ *http.Request) {
	s.api.Resume()
	writeJSON(w, http.StatusOK, map[string]any{"paused": false})
}
