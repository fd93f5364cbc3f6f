package web

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"path"
	"strings"

	"github.com/stackd/stackd/daemon/access"
	"github.com/stackd/stackd/daemon/model"
	"github.com/stackd/stackd/web/view"
)

// Access control: every request is identified (a bearer token, else the
// session cookie, else anonymous), mapped by routeOf to an action on a
// stack, allowed or refused (401 without a valid identity, 403 without
// the role), and, when it changes something or is refused, recorded in
// the audit trail (audit.go). With Options.Access nil the single token
// of Options.Token stands in for it: holding the token allows
// everything, and without it only reads are allowed (none with
// ReadRequiresToken).

// scope is what a route's action applies to.
type scope int

const (
	// scopeOpen needs no credential: the probes, the webhook (it has its
	// own secret), static files and the sign-in endpoints.
	scopeOpen scope = iota
	// scopeStack is the stack the path names.
	scopeStack
	// scopeUpdate is the stack of the update the path names.
	scopeUpdate
	// scopeList lists stacks: the list shows those the principal may
	// read.
	scopeList
	// scopeDaemon is daemon-wide: the config, the cluster, the metrics,
	// reload, pause and backup.
	scopeDaemon
	// scopeSet is the StackSet the path names: its stacks (see
	// mayOnSet).
	scopeSet
	// scopeAudit is the audit trail: a stack's (?stack=), which needs
	// read on it, or the whole of it, which needs admin daemon-wide; a
	// role must grant either, even while reads are open.
	scopeAudit
)

// route is what a request asks for, as routeOf maps it.
type route struct {
	Scope scope
	// Action is one of daemon's Action* constants; empty for scopeOpen.
	Action string
	// Stack is the stack named in the path (scopeStack), or in the query
	// (scopeAudit); Update the update named in the path (scopeUpdate);
	// Set the StackSet named in the path (scopeSet).
	Stack, Update, Set string
}

// audited says whether a request on the route is recorded in the audit
// trail whatever its outcome: every action but reading, the trail
// included (refused reads are recorded too, by the guard).
func (rt route) audited() bool {
	return rt.Scope != scopeOpen && rt.Scope != scopeAudit && rt.Action != access.ActionRead
}

// Paths of the sign-in endpoints (signin.go).
const (
	loginPath    = "/auth/login"
	callbackPath = "/auth/callback"
	logoutPath   = "/auth/logout"
	cliPath      = "/auth/cli"
)

// routeOf maps a request to the action it takes and what on. It knows
// every route Handler serves; anything else is read daemon-wide when
// it is a GET or HEAD, else admin, so that a route added without an
// entry here is closed rather than open.
func routeOf(method string, u *url.URL) route {
	seg := segments(u)
	read := method == http.MethodGet || method == http.MethodHead
	daemonWide := func(action string) route { return route{Scope: scopeDaemon, Action: action} }
	if read {
		return readRoute(seg, u.Query())
	}
	if method != http.MethodPost {
		return daemonWide(access.ActionAdmin)
	}
	switch {
	case match(seg, "api", "v1", "webhooks", "git"), match(seg, "auth", "logout"), match(seg, "auth", "signin"):
		return route{Scope: scopeOpen}
	case match(seg, "api", "v1", "reload"), match(seg, "config", "reload"):
		return daemonWide(access.ActionReload)
	case match(seg, "api", "v1", "pause"), match(seg, "api", "v1", "resume"):
		return daemonWide(access.ActionPause)
	case match(seg, "api", "v1", "stacks", "*", "sync"), match(seg, "stacks", "*", "sync"),
		match(seg, "api", "v1", "stacks", "*", "preview"), match(seg, "stacks", "*", "preview"):
		return route{Scope: scopeStack, Action: access.ActionSync, Stack: seg[len(seg)-2]}
	case match(seg, "api", "v1", "stacks", "*", "approve"), match(seg, "api", "v1", "stacks", "*", "reject"),
		match(seg, "stacks", "*", "approve"), match(seg, "stacks", "*", "reject"):
		return route{Scope: scopeStack, Action: access.ActionApprove, Stack: seg[len(seg)-2]}
	case match(seg, "api", "v1", "stacks", "*", "cancel"):
		return route{Scope: scopeStack, Action: access.ActionCancel, Stack: seg[3]}
	case match(seg, "api", "v1", "stacksets", "*", "resume"), match(seg, "api", "v1", "stacksets", "*", "abort"),
		match(seg, "stacksets", "*", "resume"), match(seg, "stacksets", "*", "abort"):
		return route{Scope: scopeSet, Action: access.ActionSync, Set: seg[len(seg)-2]}
	}
	return daemonWide(access.ActionAdmin)
}

// readRoute maps a GET or HEAD request.
func readRoute(seg []string, q url.Values) route {
	stack := func(name string) route { return route{Scope: scopeStack, Action: access.ActionRead, Stack: name} }
	update := func(id string) route { return route{Scope: scopeUpdate, Action: access.ActionRead, Update: id} }
	list := route{Scope: scopeList, Action: access.ActionRead}
	switch {
	case len(seg) == 0, match(seg, "api", "v1", "stacks"), match(seg, "previews"), match(seg, "api", "v1", "previews"),
		match(seg, "stacksets"), match(seg, "api", "v1", "stacksets"):
		return list
	case match(seg, "api", "v1", "stacksets", "*"):
		return route{Scope: scopeSet, Action: access.ActionRead, Set: seg[3]}
	case match(seg, "stacksets", "*"):
		return route{Scope: scopeSet, Action: access.ActionRead, Set: seg[1]}
	case match(seg, "healthz"), match(seg, "readyz"), len(seg) == 2 && seg[0] == "static",
		match(seg, "auth", "login"), match(seg, "auth", "callback"), match(seg, "auth", "cli"), match(seg, "auth", "signin"),
		match(seg, ".well-known", "openid-configuration"), match(seg, ".well-known", "jwks.json"):
		return route{Scope: scopeOpen}
	case match(seg, "api", "v1", "stacks", "*"), match(seg, "api", "v1", "stacks", "*", "updates"),
		match(seg, "api", "v1", "stacks", "*", "resources"), match(seg, "api", "v1", "stacks", "*", "preview"):
		return stack(seg[3])
	case match(seg, "stacks", "*"):
		return stack(seg[1])
	case match(seg, "api", "v1", "updates", "*", "log"):
		return update(seg[3])
	case match(seg, "previews", "*"):
		return update(seg[1])
	case match(seg, "api", "v1", "audit"), match(seg, "audit"):
		if stack := q.Get("stack"); stack != "" {
			return route{Scope: scopeAudit, Action: access.ActionRead, Stack: stack}
		}
		return route{Scope: scopeAudit, Action: access.ActionAdmin}
	case match(seg, "api", "v1", "backup"):
		return route{Scope: scopeDaemon, Action: access.ActionAdmin}
	}
	return route{Scope: scopeDaemon, Action: access.ActionRead}
}

// segments splits u's path, cleaned as the mux cleans it, into its
// unescaped segments: a stack name may hold an escaped slash, which the
// mux's {name} matches as one segment.
func segments(u *url.URL) []string {
	p := path.Clean("/" + u.EscapedPath())
	if p == "/" {
		return nil
	}
	seg := strings.Split(p[1:], "/")
	for i, s := range seg {
		if v, err := url.PathUnescape(s); err == nil {
			seg[i] = v
		}
	}
	return seg
}

// match says whether seg is pattern, "*" matching any one segment.
func match(seg []string, pattern ...string) bool {
	if len(seg) != len(pattern) {
		return false
	}
	for i, p := range pattern {
		if p != "*" && p != seg[i] {
			return false
		}
	}
	return true
}

// Cookies of the web UI. Both are HttpOnly and SameSite=Lax, and Secure
// when the request came over TLS or through a proxy that says so (see
// secureCookies).
const (
	// sessionCookie holds a signed-in user's session (Access.Session).
	sessionCookie = "stackd_session"
	// flowCookie binds a sign-in in progress to the browser that started
	// it (SignIn.Start and Finish); it lives on /auth/ only.
	flowCookie = "stackd_signin"
)

// identity is who a request is.
type identity struct {
	p model.Principal
	// err is set when the request presented a credential that was
	// refused (only with Options.Access); p is then anonymous.
	err error
	// session says the identity, or err, came from the session cookie.
	session bool
}

var anonymous = model.Principal{Kind: model.PrincipalAnonymous}

// identify resolves r's credential: "Authorization: Bearer", else the
// session cookie, else none. Without Options.Access only the token of
// Options.Token is known, and anything else is anonymous.
func (s *Server) identify(r *http.Request) identity {
	token, hasToken := bearerToken(r)
	if s.opts.Access == nil {
		if hasToken && s.opts.Token != "" && equalSecret(token, s.opts.Token) {
			return identity{p: model.Principal{Kind: model.PrincipalAdmin}}
		}
		return identity{p: anonymous}
	}
	if hasToken {
		p, err := s.opts.Access.Bearer(token)
		if err != nil {
			return identity{p: anonymous, err: err}
		}
		return identity{p: p}
	}
	if c, err := r.Cookie(sessionCookie); err == nil && c.Value != "" {
		p, err := s.opts.Access.Session(c.Value)
		if err != nil {
			return identity{p: anonymous, err: err, session: true}
		}
		return identity{p: p, session: true}
	}
	return identity{p: anonymous}
}

// bearerToken is the token of r's "Authorization: Bearer" header.
func bearerToken(r *http.Request) (string, bool) {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	return strings.TrimSpace(token), true
}

type principalKey struct{}

// principal is who made r, as the guard identified it; anonymous for a
// request that did not pass through it.
func principal(r *http.Request) model.Principal {
	if p, ok := r.Context().Value(principalKey{}).(model.Principal); ok {
		return p
	}
	return anonymous
}

func withPrincipal(ctx context.Context, p model.Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// openReads says whether reads need no role: without ReadRequiresToken
// anyone may read, signed in or not.
func (s *Server) openReads() bool { return !s.opts.ReadRequiresToken }

// unprotected says whether no credential is configured at all
// (--api-no-token without a roles file): everyone may do everything.
func (s *Server) unprotected() bool { return s.opts.Access == nil && s.opts.Token == "" }

// allowed says whether p may take action on stack (nil: daemon-wide),
// reads being open to everyone unless ReadRequiresToken; when not, why.
func (s *Server) allowed(p model.Principal, action string, stack *access.StackRef) (bool, string) {
	if action == access.ActionRead && s.openReads() {
		return true, ""
	}
	return s.permit(p, action, stack)
}

// permit asks the roles in force whether p may take action on stack,
// whether or not reads are open: Options.Access, or without it the
// single token, which allows everything to its holder.
func (s *Server) permit(p model.Principal, action string, stack *access.StackRef) (bool, string) {
	if s.opts.Access != nil {
		return s.opts.Access.Allowed(p, action, stack)
	}
	if s.unprotected() || p.Kind == model.PrincipalAdmin {
		return true, ""
	}
	return false, "a valid API token is required (Authorization: Bearer <token>)"
}

// consults says whether deciding on action asks Access about the
// stack: not without Access, nor for reads while they are open.
func (s *Server) consults(action string) bool {
	return s.opts.Access != nil && !(action == access.ActionRead && s.openReads())
}

// RoleLister is what an Options.Access may also implement: the roles that
// would allow action on stack, named in a 403 answer so that the caller
// knows what to ask for.
type RoleLister interface {
	RolesAllowing(action string, stack *access.StackRef) []string
}

// stackRef is what a role's selector sees of the stack name: its name,
// the config source it came from and its labels; only the name for a
// stack the daemon does not know, or without Access, which has no
// selectors.
func (s *Server) stackRef(name string) *access.StackRef {
	ref := &access.StackRef{Name: name}
	if s.opts.Access == nil {
		return ref
	}
	if v, err := s.api.Stack(name); err == nil {
		ref.Source, ref.Labels = v.Source, v.Labels
	}
	return ref
}

// refOf is a known stack's StackRef.
func refOf(v *model.StackView) *access.StackRef {
	return &access.StackRef{Name: v.Name, Source: v.Source, Labels: v.Labels}
}

// decision is the guard's verdict on a request.
type decision struct {
	allowed bool
	// stack is the stack acted on, for the audit trail.
	stack  string
	reason string
}

// authorize decides whether the identified request may take its route.
func (s *Server) authorize(r *http.Request, id identity, rt route) decision {
	if id.err != nil {
		return decision{stack: rt.Stack, reason: id.err.Error()}
	}
	d := decision{stack: rt.Stack}
	if rt.Scope == scopeSet {
		d.stack = view.OwnerOfSet(rt.Set) // the audit trail's subject: "StackSet/NAME"
	}
	if !s.consults(rt.Action) && (rt.Scope == scopeStack || rt.Scope == scopeUpdate || rt.Scope == scopeSet) {
		// The answer does not depend on the stack: no need to look it up.
		d.allowed, d.reason = s.allowed(id.p, rt.Action, &access.StackRef{Name: rt.Stack})
		return d
	}
	switch rt.Scope {
	case scopeStack:
		d.allowed, d.reason = s.allowed(id.p, rt.Action, s.stackRef(rt.Stack))
	case scopeUpdate:
		var ref *access.StackRef // an unknown update: read daemon-wide
		if u, err := s.api.Update(rt.Update); err == nil {
			ref, d.stack = s.stackRef(u.Stack), u.Stack
		}
		d.allowed, d.reason = s.allowed(id.p, rt.Action, ref)
	case scopeSet:
		d.allowed, d.reason = s.mayOnSet(id.p, rt.Action, s.setStacks(rt.Set), s.stackRef)
	case scopeList:
		// A signed-in caller sees the stacks they may read; an anonymous
		// one needs read daemon-wide, or is sent to sign in.
		if id.p.Kind != model.PrincipalAnonymous {
			return decision{allowed: true}
		}
		d.allowed, d.reason = s.allowed(id.p, access.ActionRead, nil)
	case scopeDaemon:
		d.allowed, d.reason = s.allowed(id.p, rt.Action, nil)
	case scopeAudit:
		// The trail names people and addresses: never open to everyone.
		var ref *access.StackRef
		if rt.Stack != "" {
			ref = s.stackRef(rt.Stack)
		}
		d.allowed, d.reason = s.permit(id.p, rt.Action, ref)
	default:
		d.allowed = true
	}
	return d
}

// guard identifies every request, refuses those its principal may not
// make, and records in the audit trail those that change something and
// those refused.
func (s *Server) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rt := routeOf(r.Method, r.URL)
		id := s.identify(r)
		if rt.Scope == scopeOpen {
			next.ServeHTTP(w, r.WithContext(withPrincipal(r.Context(), id.p)))
			return
		}
		d := s.authorize(r, id, rt)
		if !d.allowed {
			s.refuse(w, r, id, rt, d)
			return
		}
		r = r.WithContext(withPrincipal(r.Context(), id.p))
		if base := s.holderElsewhere(r, rt); base != "" {
			s.forward(w, r, base, id.p, rt) // the holder audits it
			return
		}
		if !rt.audited() {
			next.ServeHTTP(w, r)
			return
		}
		rec, note := &statusRecorder{ResponseWriter: w}, &auditNote{}
		next.ServeHTTP(rec, r.WithContext(context.WithValue(r.Context(), auditNoteKey{}, note)))
		action, outcome, reason := cmp.Or(note.action, rt.Action), model.AuditAllowed, rec.reason()
		switch {
		case rec.code() == http.StatusForbidden && note.action != "": // the handler refused the action it took
			outcome = model.AuditDenied
		case rec.code() >= 400:
			outcome = model.AuditFailed
		default:
			reason = note.reason
		}
		s.record(r, id.p, action, d.stack, outcome, rec.code(), reason)
	})
}

// auditNote is what a handler adds to its request's audit record: the
// action it took when it is not the route's (an override of change
// windows, asked through a sync), and the reason its caller gave.
type auditNote struct{ action, reason string }

type auditNoteKey struct{}

// noteAudit sets the audit record's action and reason of r, which the
// guard passed; it does nothing for a request it did not.
func noteAudit(r *http.Request, action, reason string) {
	if n, ok := r.Context().Value(auditNoteKey{}).(*auditNote); ok {
		n.action, n.reason = action, reason
	}
}

// refuse answers a request its principal may not make: 401 without a
// valid identity (a browser asking for a page is sent to sign in when
// sign-in is set up), else 403 saying what was refused and why. Both are
// recorded in the audit trail.
func (s *Server) refuse(w http.ResponseWriter, r *http.Request, id identity, rt route, d decision) {
	p := id.p
	outcome, status := model.AuditDenied, http.StatusForbidden
	if id.err != nil || p.Kind == model.PrincipalAnonymous {
		outcome, status = model.AuditUnauthenticated, http.StatusUnauthorized
	}
	if id.session && id.err != nil {
		s.clearCookie(w, r, sessionCookie, "/") // expired or foreign: start afresh
	}
	switch {
	case status == http.StatusUnauthorized && s.sendToSignIn(r):
		target := loginPath + "?" + url.Values{"return": {returnPath(r)}}.Encode()
		if s.opts.SignIn == nil {
			target = s.signInURL(returnPath(r)) // the token form
		}
		http.Redirect(w, r, target, http.StatusSeeOther)
		if id.err == nil {
			return // a browser without a session, sent to sign in: its sign-in is recorded
		}
		status = http.StatusSeeOther
	case isAPI(r.URL.Path):
		s.refuseAPI(w, status, p, rt.Action, d)
	default:
		s.refusePage(w, r, status, rt.Action, d)
	}
	s.record(r, p, rt.Action, d.stack, outcome, status, d.reason)
}

// refuseAPI answers a refused API request in JSON.
func (s *Server) refuseAPI(w http.ResponseWriter, status int, p model.Principal, action string, d decision) {
	if status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Bearer realm="stackd"`)
		msg := "a valid API token is required (Authorization: Bearer <token>)"
		if s.opts.Access != nil {
			msg = "not authenticated: " + d.reason
		}
		writeError(w, status, msg)
		return
	}
	body := map[string]any{"error": d.reason, "action": action, "principal": p}
	if d.stack != "" {
		body["stack"] = d.stack
	}
	if rl, ok := s.opts.Access.(RoleLister); ok {
		var ref *access.StackRef
		if d.stack != "" {
			ref = s.stackRef(d.stack)
		}
		body["allowedBy"] = rl.RolesAllowing(action, ref)
	}
	writeJSON(w, status, body)
}

// refusePage shows a refused UI request as a page.
func (s *Server) refusePage(w http.ResponseWriter, r *http.Request, status int, action string, d decision) {
	title, msg := "Not allowed", d.reason
	if status == http.StatusUnauthorized {
		title = "Sign-in required"
		if s.opts.Access == nil {
			msg = "This page needs the API token, which a browser does not send: use the API or the stackd client commands with the token."
		}
	}
	if msg == "" {
		msg = fmt.Sprintf("You may not %s here.", action)
	}
	s.renderError(w, r, status, title, msg)
}

// sendToSignIn says whether r, unauthenticated, should be redirected to
// sign in rather than refused: a browser navigating to a UI page while
// sign-in is set up: to the OpenID provider when there is one, else to
// the token form. The pages' own refreshes (fetch) get the 401, so that
// an expired session does not start a sign-in every few seconds.
func (s *Server) sendToSignIn(r *http.Request) bool {
	if (s.opts.SignIn == nil && s.opts.TokenSignIn == nil) || isAPI(r.URL.Path) {
		return false
	}
	mode := r.Header.Get("Sec-Fetch-Mode")
	return mode == "" || mode == "navigate"
}

// isAPI says whether a path is the API's (JSON answers) rather than the
// UI's (pages).
func isAPI(p string) bool {
	return strings.HasPrefix(p, "/api/") || p == "/metrics"
}

// returnPath is where to come back to after signing in: the page asked
// for, or for a form's POST the stack list.
func returnPath(r *http.Request) string {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return "/"
	}
	return r.URL.RequestURI()
}

// statusRecorder notes the status a handler answers and the start of an
// error's body, for the audit trail.
type statusRecorder struct {
	http.ResponseWriter
	status int
	body   []byte // the first bytes of an error's body
}

// maxReason bounds the reason an audit record keeps from an error's
// body.
const maxReason = 512

func (s *statusRecorder) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Write(p []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	if s.status >= 400 && len(s.body) < maxReason {
		s.body = append(s.body, p[:min(len(p), maxReason-len(s.body))]...)
	}
	return s.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController reach the connection (flushes and
// deadlines of followed logs, pauses and backups).
func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

func (s *statusRecorder) code() int {
	if s.status == 0 {
		return http.StatusOK
	}
	return s.status
}

// reason is the error an answer of 400 or more gave: the API's JSON
// "error", else the status's text.
func (s *statusRecorder) reason() string {
	if s.code() < 400 {
		return ""
	}
	if msg := jsonError(s.body); msg != "" {
		return msg
	}
	return http.StatusText(s.code())
}
