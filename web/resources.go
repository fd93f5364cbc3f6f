package web

import (
	"net/http"
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
