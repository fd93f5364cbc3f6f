package web

import "net/http"

// routeUI registers the web UI's routes.
func (s *Server) routeUI(mux *http.ServeMux) {}
