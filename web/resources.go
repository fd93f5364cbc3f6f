package web

import (
	"errors"
	"net/http"

	"github.com/stackd/stackd/daemon"
)

// getResources serves a stack's resources as of its last exported state,
// each with its drift status from the last drift check.
func (s *Server) getResources(w http.ResponseWriter, r *http.Request) {
	rs, err := s.api.StackResources(r.PathValue("name"))
	if err != nil {
		writeAPIError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, rs)
}

// previewNow starts a read-only preview of a stack at its latest commit:
// 202, then GET .../preview shows it running and, once done, its diff.
func (s *Server) previewNow(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if err := s.api.PreviewNow(name); err != nil {
		writeAPIError(w, err)
		return
	}
	s.log.Info("preview requested", "stack", name)
	writeJSON(w, http.StatusAccepted, map[string]string{"name": name, "preview": "started"})
}

// getPreview serves a stack's last preview; 404 before its first.
func (s *Server) getPreview(w http.ResponseWriter, r *http.Request) {
	p, err := s.api.LastPreview(r.PathValue("name"))
	if err != nil {
		writeAPIError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, p)
}

// uiPreviewNow is the stack page's "Preview now" button: it starts the
// preview and returns to the page, where it shows.
func (s *Server) uiPreviewNow(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if err := s.api.PreviewNow(name); err != nil && !errors.Is(err, daemon.ErrPreviewRefused) {
		s.renderAPIError(w, r, err)
		return
	}
	s.log.Info("preview requested", "stack", name, "from", "ui")
	http.Redirect(w, r, stackPath(name)+"#preview", http.StatusSeeOther)
}

// lastPreviewOf is the stack's last preview for its page; nil before
// the first or when it cannot be read.
func (s *Server) lastPreviewOf(stack string) *daemon.StackPreview {
	p, err := s.api.LastPreview(stack)
	if err != nil {
		return nil
	}
	return &p
}
