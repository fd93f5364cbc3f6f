package web

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/stackd/stackd/daemon/access"
	"github.com/stackd/stackd/daemon/model"
	"github.com/stackd/stackd/web/metrics"
	"github.com/stackd/stackd/web/view"
)

// Sign-in through OpenID Connect (Options.SignIn): GET /auth/login starts
// it and sends the browser to the issuer, GET /auth/callback finishes it
// and sets the session cookie, POST /auth/logout deletes that cookie.
// GET /auth/cli hands a signed-in user's session to `stackd login`.
// Signing in and out, and every failure to, are recorded in the audit
// trail; a failure shows a plain page, never the issuer's answer.

// Actions of the audit trail that no role governs; package metrics
// names them, as the label values of stackd_audit_total.
const (
	auditSignIn  = metrics.ActionSignIn
	auditSignOut = metrics.ActionSignOut
)

// flowTTL bounds a sign-in in progress: its cookie's lifetime.
const flowTTL = 10 * time.Minute

// routeSignIn registers the sign-in endpoints.
func (s *Server) routeSignIn(mux *http.ServeMux) {
	mux.HandleFunc("POST "+logoutPath, s.logout)
	if s.opts.SignIn == nil {
		return
	}
	mux.HandleFunc("GET "+loginPath, s.login)
	mux.HandleFunc("GET "+callbackPath, s.callback)
	mux.HandleFunc("GET "+cliPath, s.cliLogin)
}

// login starts a sign-in that returns to ?return= (a path of this
// server; the stack list by default).
func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	ret, ok := s.returnTo(w, r, r.URL.Query().Get("return"))
	if !ok {
		return
	}
	redirect, flow, err := s.opts.SignIn.Start(ret)
	if err != nil {
		s.log.Warn("cannot start a sign-in", "err", err)
		s.signInFailed(w, r, http.StatusBadRequest, "cannot start the sign-in: "+err.Error())
		return
	}
	s.setCookie(w, r, &http.Cookie{Name: flowCookie, Value: flow, Path: "/auth/", MaxAge: int(flowTTL / time.Second)})
	http.Redirect(w, r, redirect, http.StatusFound)
}

// callback finishes a sign-in: the issuer sent the browser back with a
// code (or an error) and the state that the flow cookie must match.
func (s *Server) callback(w http.ResponseWriter, r *http.Request) {
	c, err := r.Cookie(flowCookie)
	if err != nil || c.Value == "" {
		s.signInFailed(w, r, http.StatusBadRequest,
			"no sign-in was started in this browser, or it took longer than "+flowTTL.String()+": sign in again")
		return
	}
	s.clearCookie(w, r, flowCookie, "/auth/") // used once, whatever the outcome
	p, session, ret, err := s.opts.SignIn.Finish(r.Context(), r.URL.Query(), c.Value)
	if err != nil {
		status := http.StatusBadRequest
		if errors.Is(err, access.ErrUnauthenticated) {
			status = http.StatusUnauthorized
		}
		s.signInFailed(w, r, status, err.Error())
		return
	}
	if !access.LocalPath(ret) {
		ret = "/"
	}
	cookie := &http.Cookie{Name: sessionCookie, Value: session, Path: "/"}
	if s.opts.SessionTTL > 0 {
		cookie.MaxAge = int(s.opts.SessionTTL / time.Second)
	}
	s.setCookie(w, r, cookie)
	s.record(r, p, auditSignIn, "", model.AuditAllowed, http.StatusSeeOther, "")
	http.Redirect(w, r, ret, http.StatusSeeOther)
}

// SessionIssuer is what an Options.SignIn may also implement: a new
// session for a signed-in user, for `stackd login`. Without it the CLI
// is given the browser's own session cookie.
type SessionIssuer interface {
	IssueSession(p model.Principal) (string, error)
}

// cliLogin hands a session to `stackd login`, which listens on this
// host's loopback and opened this page with ?port= and ?state=. A
// browser not signed in is sent to sign in and comes back here. The
// session goes to http://127.0.0.1:PORT/callback only, with the state,
// which the CLI checks: only a program on the machine of the browser
// can receive it, and a page that sends someone here gives its session
// to that machine's loopback, not to the page.
func (s *Server) cliLogin(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	target, err := cliRedirect(q.Get("port"), q.Get("state"))
	if err != nil {
		s.signInFailed(w, r, http.StatusBadRequest, "stackd login: "+err.Error())
		return
	}
	p := principal(r) // the guard read the session cookie
	if p.Kind != model.PrincipalUser {
		http.Redirect(w, r, loginPath+"?"+url.Values{"return": {r.URL.RequestURI()}}.Encode(), http.StatusSeeOther)
		return
	}
	session, err := s.cliSession(r, p)
	if err != nil {
		s.log.Error("cannot issue a session for stackd login", "user", p.Name, "err", err)
		s.signInFailed(w, r, http.StatusInternalServerError, "cannot issue a session for the CLI")
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Referrer-Policy", "no-referrer")
	s.record(r, p, auditSignIn, "", model.AuditAllowed, http.StatusSeeOther, "via the CLI (stackd login)")
	http.Redirect(w, r, target+"&token="+url.QueryEscape(session), http.StatusSeeOther)
}

// cliSession is the session `stackd login` receives for p: a new one
// when Options.SignIn can issue it, else the browser's.
func (s *Server) cliSession(r *http.Request, p model.Principal) (string, error) {
	if is, ok := s.opts.SignIn.(SessionIssuer); ok {
		return is.IssueSession(p)
	}
	c, err := r.Cookie(sessionCookie)
	if err != nil {
		return "", err
	}
	return c.Value, nil
}

// cliRedirect is where /auth/cli sends a session: the callback of
// `stackd login` on this host's loopback, port being its port (1024 to
// 65535, digits only) and state its random state (8 to 128 characters,
// letters, digits, '-' and '_', so that it needs no escaping). Nothing
// else is ever a target, so /auth/cli cannot redirect elsewhere.
func cliRedirect(port, state string) (string, error) {
	n, err := strconv.Atoi(port)
	if err != nil || strconv.Itoa(n) != port || n < 1024 || n > 65535 { // digits only, no sign, no leading 0
		return "", fmt.Errorf("port %q is not a port from 1024 to 65535", view.Clip(port, 16))
	}
	if len(state) < 8 || len(state) > 128 || strings.ContainsFunc(state, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_')
	}) {
		return "", errors.New("the state must be 8 to 128 letters, digits, '-' or '_'")
	}
	return "http://127.0.0.1:" + port + "/callback?state=" + state, nil
}

// logout deletes the session cookie. The session itself stays valid
// until it expires (a copy of the cookie still works): it is signed, not
// kept.
func (s *Server) logout(w http.ResponseWriter, r *http.Request) {
	p := principal(r) // the guard read the session cookie
	s.clearCookie(w, r, sessionCookie, "/")
	s.record(r, p, auditSignOut, "", model.AuditAllowed, http.StatusSeeOther, "")
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

// returnTo is where a sign-in returns to: ret, a path of this server,
// or the stack list when it is empty. Anything else is refused (400,
// recorded), and ok is false.
func (s *Server) returnTo(w http.ResponseWriter, r *http.Request, ret string) (_ string, ok bool) {
	if ret == "" {
		return "/", true
	}
	if !access.LocalPath(ret) {
		s.signInFailed(w, r, http.StatusBadRequest, "the return address is not a path of this server")
		return "", false
	}
	return ret, true
}

// signInFailed shows why a sign-in failed and records it.
func (s *Server) signInFailed(w http.ResponseWriter, r *http.Request, status int, reason string) {
	s.record(r, anonymous, auditSignIn, "", model.AuditUnauthenticated, status, reason)
	s.renderError(w, r, status, "Sign-in failed", "The sign-in failed: "+reason)
}

// setCookie sets c with the flags every cookie of the UI has: HttpOnly
// (no script reads it), SameSite=Lax (a cross-site POST does not carry
// it, a top-level navigation back from the issuer does) and Secure when
// the page is served over HTTPS.
func (s *Server) setCookie(w http.ResponseWriter, r *http.Request, c *http.Cookie) {
	c.HttpOnly, c.SameSite, c.Secure = true, http.SameSiteLaxMode, s.secureCookies(r)
	http.SetCookie(w, c)
}

// clearCookie tells the browser to delete the cookie name of path.
func (s *Server) clearCookie(w http.ResponseWriter, r *http.Request, name, path string) {
	s.setCookie(w, r, &http.Cookie{Name: name, Value: "", Path: path, MaxAge: -1})
}

// secureCookies says whether cookies set in answer to r are marked
// Secure, so that a browser sends them over HTTPS only: always with
// Options.SecureCookies (the daemon is reached through https URLs), and
// when r came over TLS or through a proxy that says the client used
// https (X-Forwarded-Proto). The header can be forged, but only to have
// the sender's own cookies marked Secure.
func (s *Server) secureCookies(r *http.Request) bool {
	if s.opts.SecureCookies || r.TLS != nil {
		return true
	}
	proto, _, _ := strings.Cut(r.Header.Get("X-Forwarded-Proto"), ",")
	return strings.EqualFold(strings.TrimSpace(proto), "https")
}
