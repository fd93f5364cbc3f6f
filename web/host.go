package web

import (
	"net"
	"net/http"
	"path"
	"strings"
)

// checkHost refuses (421) a request whose Host names no address of this
// server: a web page on another name that resolves to the daemon (DNS
// rebinding) could otherwise read the API and, without a token, sync
// stacks from the operator's browser. Allowed are IP literals (a page
// cannot make a browser send one for its own origin), localhost names,
// the listen address's host and Options.AllowedHosts (globs).
func (s *Server) checkHost(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.hostAllowed(r.Host) {
			writeError(w, http.StatusMisdirectedRequest, "this server does not answer for that host name (see --allowed-host)")
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (s *Server) hostAllowed(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.ToLower(strings.TrimSuffix(strings.Trim(host, "[]"), "."))
	switch {
	case host == "":
		return false // HTTP/1.0 without Host: nothing to check it against
	case net.ParseIP(host) != nil, host == "localhost", strings.HasSuffix(host, ".localhost"):
		return true
	}
	if listen, _, err := net.SplitHostPort(s.opts.Addr); err == nil && strings.EqualFold(listen, host) {
		return true
	}
	for _, pattern := range s.opts.AllowedHosts {
		if ok, _ := path.Match(strings.ToLower(pattern), host); ok {
			return true
		}
	}
	return false
}
