package web

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strings"

	"github.com/stackd/stackd/daemon/model"
)

// In a cluster, some writes about a stack can only be made by the
// replica that holds it: deciding on its plan, overriding its change
// windows, and running a preview of it now. Any replica takes
// them, and passes them to the holder (behind a load balancer, a user
// reaches any replica). The holder authenticates, authorizes and audits
// the request again, with the same credentials (every replica has the
// same token and session key); the replica passing it on only refuses
// what the holder would refuse too, and audits nothing but a failure to
// reach the holder.

// HolderFinder tells which replica holds a stack; the daemon implements
// it. A server whose API does not forwards nothing.
type HolderFinder interface {
	// HolderURL is the API URL of the replica holding stack, when
	// another replica holds it; empty otherwise.
	HolderURL(stack string) string
}

// holderElsewhere is the API URL of the replica to pass r to, or "": r
// is a holder-only request about a stack another replica holds, not
// passed on already.
func (s *Server) holderElsewhere(r *http.Request, rt route) string {
	hf, ok := s.api.(HolderFinder)
	if !ok || rt.Scope != scopeStack || r.Header.Get(forwardedHeader) != "" || !holderOnly(r) {
		return ""
	}
	return hf.HolderURL(rt.Stack)
}

// holderOnly says whether r is one of the requests only a stack's holder
// serves: approve, reject, preview now, and a sync that
// overrides change windows. A sync's body is read and put back.
func holderOnly(r *http.Request) bool {
	seg := segments(r.URL)
	switch {
	case r.Method == http.MethodPost && (match(seg, "api", "v1", "stacks", "*", "approve") || match(seg, "api", "v1", "stacks", "*", "reject") ||
		match(seg, "stacks", "*", "approve") || match(seg, "stacks", "*", "reject") ||
		match(seg, "api", "v1", "stacks", "*", "preview") || match(seg, "stacks", "*", "preview")):
		return true
	case r.Method == http.MethodPost && (match(seg, "api", "v1", "stacks", "*", "sync") || match(seg, "stacks", "*", "sync")):
		return asksOverride(r)
	}
	return false
}

// asksOverride says whether the sync r asks to override change windows:
// a JSON body with overrideWindow true, or the page's form field. It
// reads the body and puts it back for the handler or the holder.
func asksOverride(r *http.Request) bool {
	if r.Body == nil {
		return false
	}
	body, err := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(body))
	if err != nil {
		return false // the handler reads the rest, and answers the error
	}
	var b struct {
		OverrideWindow bool `json:"overrideWindow"`
	}
	if json.Unmarshal(body, &b) == nil {
		return b.OverrideWindow
	}
	if !strings.HasPrefix(r.Header.Get("Content-Type"), "application/x-www-form-urlencoded") {
		return false
	}
	form, err := url.ParseQuery(string(body))
	return err == nil && form.Get("overrideWindow") != ""
}

// forward passes r to the replica at base and returns its answer. A
// failure to reach it is answered 502 and audited here, as the holder
// audits nothing then.
func (s *Server) forward(w http.ResponseWriter, r *http.Request, base string, p model.Principal, rt route) {
	target, err := url.Parse(base)
	if err != nil || (target.Scheme != "http" && target.Scheme != "https") {
		s.unreachable(w, r, p, rt, "the replica holding the stack advertises no usable URL")
		return
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.SetXForwarded()
			if proto := pr.In.Header.Get("X-Forwarded-Proto"); proto != "" {
				pr.Out.Header.Set("X-Forwarded-Proto", proto) // a proxy in front said so
			}
			pr.Out.Header.Set(forwardedHeader, "1")
		},
		Transport: s.peers,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			s.log.Warn("cannot reach the replica holding a stack", "stack", rt.Stack, "replica", target.Host, "err", err)
			s.unreachable(w, r, p, rt, "cannot reach the replica holding the stack")
		},
	}
	s.log.Info("passing a request on to the replica holding the stack", "stack", rt.Stack, "replica", target.Host, "path", r.URL.Path)
	rp.ServeHTTP(w, r)
}

// unreachable answers and audits a request the holder could not get.
func (s *Server) unreachable(w http.ResponseWriter, r *http.Request, p model.Principal, rt route, why string) {
	writeError(w, http.StatusBadGateway, why)
	s.record(r, p, rt.Action, rt.Stack, model.AuditFailed, http.StatusBadGateway, why)
}
