package web

import (
	"encoding/json"
	"errors"
	"net/http"
	"sync"

	"github.com/stackd/stackd/daemon"
	"github.com/stackd/stackd/daemon/model"
	"github.com/stackd/stackd/web/view"
)

// getResources serves a stack's resources as of its last exported state,
// each with its drift status from the last drift check. The encoded
// answer is kept per stack until its snapshot or drift check changes:
// hundreds of resources take longer to encode than to read.
func (s *Server) getResources(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	rs, err := s.api.StackResources(name)
	if err != nil {
		writeAPIError(w, err)
		return
	}
	key := rs.Update + "\x00" + rs.DriftCheck + "\x00" + rs.Time.String()
	body, ok := s.resourceBodies.get(name, key)
	if !ok {
		if body, err = json.MarshalIndent(rs, "", "  "); err != nil {
			writeError(w, http.StatusInternalServerError, "encode response: "+err.Error())
			return
		}
		body = append(body, '\n')
		s.resourceBodies.put(name, key, body)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(body)
}

// bodyCache keeps one encoded answer per stack, with the key it is for.
type bodyCache struct {
	mu sync.Mutex
	m  map[string]keyedBody
}

type keyedBody struct {
	key  string
	body []byte
}

func (c *bodyCache) get(stack, key string) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	b, ok := c.m[stack]
	return b.body, ok && b.key == key
}

func (c *bodyCache) put(stack, key string, body []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]keyedBody{}
	}
	c.m[stack] = keyedBody{key, body}
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
	http.Redirect(w, r, view.StackPath(name)+"#preview", http.StatusSeeOther)
}

// lastPreviewOf is the stack's last preview for its page; nil before
// the first or when it cannot be read.
func (s *Server) lastPreviewOf(stack string) *model.StackPreview {
	p, err := s.api.LastPreview(stack)
	if err != nil {
		return nil
	}
	return &p
}

// resourcesOf is the resources part of stack's page for the search q.
func (s *Server) resourcesOf(stack, q string) view.Resources {
	snap, err := s.api.StackResources(stack)
	if err != nil {
		return view.Resources{Err: err.Error()}
	}
	v := view.BuildResources(snap, q)
	v.Graph = view.RenderGraph(v.Roots)
	return v
}
