package web

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/stackd/stackd/daemon/access"
	"github.com/stackd/stackd/daemon/model"
	"github.com/stackd/stackd/web/view"
)

// Signing in with an API token (Options.TokenSignIn): GET /auth/signin
// shows a form that takes the admin token or a named token, and offers
// the OpenID provider when sign-in through it is set up; POST
// /auth/signin checks the token as the API does and sets the same
// session cookie as the provider's sign-in, naming the token, whose
// roles the session then has. The token travels in the form's body
// only, is never logged, echoed or recorded, and the cookie holds a
// session, not the token.
//
// Against login CSRF (a page that signs its visitor in as the
// attacker's token), the form's POST must come from this origin
// (crossOrigin, as every form) and carry the value of a cookie the form
// page set, SameSite=Strict on /auth/signin, which another site can
// neither read nor send. Against guessing, failed attempts are limited
// per client address (the connection's, never X-Forwarded-For, which
// anyone can send): signInBurst, then one every signInEvery; beyond
// them the form answers 429 without looking at the token, and every
// failure waits signInDelay before answering.

// TokenSignIn signs in the holder of an API token (the auth package's
// Access): who holds it and the value of a session cookie lasting ttl
// at most. Errors wrap access.ErrUnauthenticated for a token that is
// not valid, and never hold the token.
type TokenSignIn interface {
	TokenSession(token string, ttl time.Duration) (model.Principal, string, error)
}

// signInPath is the token sign-in form's page.
const signInPath = "/auth/signin"

// formCookie holds the sign-in form's anti-forgery value.
const formCookie = "stackd_form"

// Limits of failed token sign-ins per client address.
const (
	signInBurst = 10
	signInEvery = 6 * time.Second
	signInDelay = 250 * time.Millisecond
	// maxSignInClients bounds the addresses remembered; beyond it, those
	// whose limit is spent are kept and the others forgotten.
	maxSignInClients = 10000
)

// defaultSessionTTL is a token session's lifetime when Options.SessionTTL
// is not set.
const defaultSessionTTL = 12 * time.Hour

// routeTokenSignIn registers the token sign-in form.
func (s *Server) routeTokenSignIn(mux *http.ServeMux) {
	if s.opts.TokenSignIn == nil {
		return
	}
	mux.HandleFunc("GET "+signInPath, s.signInForm)
	mux.HandleFunc("POST "+signInPath, s.signInWithToken)
}

// signInURL is the page where a browser signs in, returning to ret: the
// token form when it is served, else the OpenID provider's sign-in, else
// none.
func (s *Server) signInURL(ret string) string {
	q := "?" + url.Values{"return": {ret}}.Encode()
	switch {
	case s.opts.TokenSignIn != nil:
		return signInPath + q
	case s.opts.SignIn != nil:
		return loginPath + q
	}
	return ""
}

// signInForm shows the form, with a new anti-forgery value.
func (s *Server) signInForm(w http.ResponseWriter, r *http.Request) {
	if ret, ok := s.returnTo(w, r, r.URL.Query().Get("return")); ok {
		s.renderSignIn(w, r, http.StatusOK, ret, "")
	}
}

// renderSignIn shows the form returning to ret, with msg saying why the
// last attempt failed; the token field is always empty.
func (s *Server) renderSignIn(w http.ResponseWriter, r *http.Request, status int, ret, msg string) {
	b := make([]byte, 32)
	rand.Read(b) // never fails (crypto/rand)
	form := base64.RawURLEncoding.EncodeToString(b)
	// SameSite=Strict: never sent with another site's request.
	http.SetCookie(w, &http.Cookie{Name: formCookie, Value: form, Path: signInPath, MaxAge: int(flowTTL / time.Second),
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: s.secureCookies(r)})
	p := view.SignInPage{Page: s.newPage(r, "Sign in"), Return: ret, Form: form, Error: msg}
	if s.opts.SignIn != nil {
		p.Provider = loginPath + "?" + url.Values{"return": {ret}}.Encode()
	}
	p.Who.SignIn, p.Who.Login = false, "" // the page is the sign-in
	s.render(w, status, "signin.html", p)
}

// signInWithToken checks the form's token and, when it is valid, sets
// the session cookie and returns to the form's path of this server.
func (s *Server) signInWithToken(w http.ResponseWriter, r *http.Request) {
	ret, ok := s.returnTo(w, r, r.PostFormValue("return"))
	if !ok {
		return
	}
	c, err := r.Cookie(formCookie)
	if err != nil || c.Value == "" || !equalSecret(r.PostFormValue("form"), c.Value) {
		s.record(r, anonymous, auditSignIn, "", model.AuditUnauthenticated, http.StatusForbidden,
			"the sign-in form was not opened in this browser, or expired")
		s.renderSignIn(w, r, http.StatusForbidden, ret,
			"The form was not opened in this browser, or it was open longer than "+flowTTL.String()+": sign in again.")
		return
	}
	now := time.Now()
	b := s.signInLimit.of(clientAddr(r), now)
	if left, _ := b.left(now, signInBurst, signInEvery); !left {
		w.Header().Set("Retry-After", strconv.Itoa(int(signInEvery/time.Second)))
		s.record(r, anonymous, auditSignIn, "", model.AuditUnauthenticated, http.StatusTooManyRequests,
			"too many failed sign-ins from this address")
		s.renderSignIn(w, r, http.StatusTooManyRequests, ret, "Too many failed sign-ins from this address: try again in a minute.")
		return
	}
	ttl := s.opts.SessionTTL
	if ttl <= 0 {
		ttl = defaultSessionTTL
	}
	p, session, err := s.opts.TokenSignIn.TokenSession(r.PostFormValue("token"), ttl)
	if err != nil {
		b.allow(now, signInBurst, signInEvery) // spend one of the address's attempts
		status := http.StatusUnauthorized
		if !errors.Is(err, access.ErrUnauthenticated) {
			status = http.StatusInternalServerError
			s.log.Error("cannot sign in with a token", "err", err)
		}
		time.Sleep(signInDelay)
		s.record(r, anonymous, auditSignIn, "", model.AuditUnauthenticated, status, err.Error())
		s.renderSignIn(w, r, status, ret, "The token was not accepted: "+err.Error()+".")
		return
	}
	s.clearCookie(w, r, formCookie, signInPath)
	s.setCookie(w, r, &http.Cookie{Name: sessionCookie, Value: session, Path: "/", MaxAge: int(ttl / time.Second)})
	s.record(r, p, auditSignIn, "", model.AuditAllowed, http.StatusSeeOther, "with an API token")
	http.Redirect(w, r, ret, http.StatusSeeOther)
}

// clientAddr is the address r's connection came from, without its port.
func clientAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// signInLimits are the failed sign-ins' buckets, by client address.
type signInLimits struct {
	mu      sync.Mutex
	clients map[string]*bucket
}

// of is addr's bucket. When too many addresses are remembered, those
// whose bucket is full again are forgotten first, then the others.
func (l *signInLimits) of(addr string, now time.Time) *bucket {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.clients == nil {
		l.clients = map[string]*bucket{}
	}
	if b, ok := l.clients[addr]; ok {
		return b
	}
	if len(l.clients) >= maxSignInClients {
		for a, b := range l.clients {
			if _, full := b.left(now, signInBurst, signInEvery); full {
				delete(l.clients, a)
			}
		}
		if len(l.clients) >= maxSignInClients {
			clear(l.clients)
		}
	}
	b := &bucket{}
	l.clients[addr] = b
	return b
}
