package auth

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/stackd/stackd/daemon/access"
	"github.com/stackd/stackd/daemon/model"
)

// FlowTTL is how long a sign-in may take, from Start to Finish: the
// lifetime of the flow cookie.
const FlowTTL = 10 * time.Minute

// Defaults of OIDCOptions.
const (
	DefaultNameClaim   = "email"
	DefaultGroupsClaim = "groups"
)

// DefaultScopes are requested unless OIDCOptions.Scopes says otherwise.
// Groups need a scope of their own at some providers (Dex: "groups"),
// which others refuse as unknown, so it is not among them.
var DefaultScopes = []string{oidc.ScopeOpenID, "profile", "email"}

// discoveryTimeout bounds fetching the provider's discovery document
// when Start needs it.
const discoveryTimeout = 15 * time.Second

// maxNameLen bounds a user's name and subject, which a session cookie
// carries (OpenID Connect bounds a subject to 255 characters).
const maxNameLen = 256

// maxUsedStates bounds the states remembered to refuse a replayed
// callback.
const maxUsedStates = 10000

// ErrReturnTo is wrapped by Start for a return path that is not a path
// of this server (a redirect elsewhere); web answers it with 400.
var ErrReturnTo = errors.New("the return path must be a path of this server")

// OIDCOptions configure sign-in through an OpenID provider.
type OIDCOptions struct {
	// IssuerURL is the provider's issuer, where its discovery document
	// is (e.g. https://dex.example.com, https://accounts.google.com).
	IssuerURL string
	// ClientID and ClientSecret are the client registered at the
	// provider. An empty secret makes a public client, which PKCE alone
	// protects.
	ClientID     string
	ClientSecret string
	// RedirectURL is the callback registered at the provider, served by
	// web: e.g. https://stackd.example.com/auth/callback.
	RedirectURL string
	// Scopes requested; nil: DefaultScopes. "openid" is always added.
	Scopes []string
	// NameClaim names the user: DefaultNameClaim unless set. A sign-in
	// without it (a missing or empty claim, or an email the provider says
	// is unverified) is refused: no other claim stands in for it.
	NameClaim string
	// GroupsClaim holds the user's groups, a list of strings or one
	// string: DefaultGroupsClaim unless set.
	GroupsClaim string
	// SessionTTL is how long a session lasts: DefaultSessionTTL unless
	// set.
	SessionTTL time.Duration
	// HTTPClient talks to the provider; nil: one with a 30 s timeout.
	HTTPClient *http.Client
	// Log receives sign-ins and refusals. Nil: discarded.
	Log *slog.Logger
}

// SignIn implements access.SignIn: OpenID Connect's authorization code
// flow, with PKCE (S256), state and nonce, for the web UI. The provider
// is discovered when first needed, so that the daemon starts while its
// provider is down; Discover checks it at start.
type SignIn struct {
	opts   OIDCOptions
	access *Access
	log    *slog.Logger

	mu       sync.Mutex
	provider *oidc.Provider
	verifier *oidc.IDTokenVerifier
	config   oauth2.Config
	// used remembers the states of callbacks taken, until their flow
	// expires, to refuse a replay (on this replica; the provider refuses
	// a code used twice anyway).
	used map[string]time.Time
}

var _ access.SignIn = (*SignIn)(nil)

// NewSignIn sets up sign-in through the provider o names, with a's
// session key (Options.SessionKey, which must be set) and roles file,
// and has a match users' names with its bindings as o.NameClaim means
// them (Access.Allowed).
func NewSignIn(a *Access, o OIDCOptions) (*SignIn, error) {
	if a.sessions == nil {
		return nil, errors.New("sign-in needs a session key")
	}
	if err := checkURL(o.IssuerURL, "issuer URL"); err != nil {
		return nil, err
	}
	if err := checkURL(o.RedirectURL, "redirect URL"); err != nil {
		return nil, err
	}
	if o.ClientID == "" {
		return nil, errors.New("sign-in needs the client ID registered at the provider")
	}
	o.Scopes = scopes(o.Scopes)
	if o.NameClaim == "" {
		o.NameClaim = DefaultNameClaim
	}
	if o.GroupsClaim == "" {
		o.GroupsClaim = DefaultGroupsClaim
	}
	if o.SessionTTL <= 0 {
		o.SessionTTL = DefaultSessionTTL
	}
	if o.HTTPClient == nil {
		o.HTTPClient = &http.Client{Timeout: 30 * time.Second}
	}
	a.emailNames.Store(o.NameClaim == "email")
	s := &SignIn{opts: o, access: a, log: o.Log, used: map[string]time.Time{}}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	return s, nil
}

func checkURL(s, what string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return fmt.Errorf("sign-in: the %s must be an absolute http(s) URL", what)
	}
	return nil
}

// scopes adds openid to the requested scopes if missing.
func scopes(s []string) []string {
	if s == nil {
		s = DefaultScopes
	}
	if !slices.Contains(s, oidc.ScopeOpenID) {
		s = append([]string{oidc.ScopeOpenID}, s...)
	}
	return slices.Clone(s)
}

// SessionTTL is how long a session lasts: the session cookie's Max-Age.
func (s *SignIn) SessionTTL() time.Duration { return s.opts.SessionTTL }

// IssueSession signs a new session for p, a signed-in user, lasting
// SessionTTL from now: the credential `stackd login` receives, which
// Access.Bearer and Access.Session accept like the cookie.
func (s *SignIn) IssueSession(p model.Principal) (string, error) {
	if p.Kind != model.PrincipalUser || p.Name == "" {
		return "", fmt.Errorf("a session is issued to a signed-in user only, not to a %s", p.Kind)
	}
	return newSession(s.access.sessions, p, s.access.now(), s.opts.SessionTTL)
}

// Discover fetches the provider's discovery document, if not done yet;
// cmd calls it at start to report a wrong issuer early.
func (s *SignIn) Discover(ctx context.Context) error {
	_, err := s.discover(ctx)
	return err
}

// discover returns the provider's OAuth2 config and ID token verifier,
// fetching its discovery document the first time it succeeds.
func (s *SignIn) discover(ctx context.Context) (*oidc.IDTokenVerifier, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.provider != nil {
		return s.verifier, nil
	}
	p, err := oidc.NewProvider(oidc.ClientContext(ctx, s.opts.HTTPClient), s.opts.IssuerURL)
	if err != nil {
		return nil, fmt.Errorf("discover the OpenID provider %s: %w", s.opts.IssuerURL, err)
	}
	s.provider = p
	// The key set outlives ctx: it fetches the provider's keys again
	// whenever a token is signed with an unknown one.
	s.verifier = p.VerifierContext(oidc.ClientContext(context.Background(), s.opts.HTTPClient),
		&oidc.Config{ClientID: s.opts.ClientID, Now: s.access.now})
	s.config = oauth2.Config{
		ClientID:     s.opts.ClientID,
		ClientSecret: s.opts.ClientSecret,
		Endpoint:     p.Endpoint(),
		RedirectURL:  s.opts.RedirectURL,
		Scopes:       s.opts.Scopes,
	}
	return s.verifier, nil
}

// flowClaims is what the flow cookie holds: the secrets of one sign-in,
// bound to the browser that started it.
type flowClaims struct {
	State    string `json:"st"`
	Nonce    string `json:"no"`
	Verifier string `json:"cv"`
	ReturnTo string `json:"rt"`
	Expires  int64  `json:"exp"`
}

// Start begins a sign-in that returns to returnTo ("" is "/"): the
// provider's authorization URL to send the browser to, and the value of
// the flow cookie to set (HttpOnly, Secure, SameSite=Lax, since the
// provider's redirect back is a cross-site navigation; Max-Age FlowTTL).
// A return path that is not a path of this server wraps ErrReturnTo.
func (s *SignIn) Start(returnTo string) (redirect, flowCookie string, err error) {
	if returnTo == "" {
		returnTo = "/"
	}
	if !access.LocalPath(returnTo) {
		return "", "", fmt.Errorf("sign-in: %w", ErrReturnTo)
	}
	ctx, cancel := context.WithTimeout(context.Background(), discoveryTimeout)
	defer cancel()
	if _, err := s.discover(ctx); err != nil {
		return "", "", err
	}
	f := flowClaims{State: random(), Nonce: random(), Verifier: oauth2.GenerateVerifier(),
		ReturnTo: returnTo, Expires: s.access.now().Add(FlowTTL).Unix()}
	flowCookie, err = s.access.flows.sign(f)
	if err != nil {
		return "", "", err
	}
	redirect = s.oauth2().AuthCodeURL(f.State, oidc.Nonce(f.Nonce), oauth2.S256ChallengeOption(f.Verifier))
	return redirect, flowCookie, nil
}

func (s *SignIn) oauth2() *oauth2.Config {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.config
	return &c
}

// random is 32 random bytes, base64url: a state or a nonce.
func random() string {
	b := make([]byte, 32)
	rand.Read(b) // never fails (crypto/rand)
	return base64.RawURLEncoding.EncodeToString(b)
}

// Finish completes a sign-in on the callback: from the callback's query
// (code and state, or the provider's error) and the flow cookie, it
// checks the state, exchanges the code with the PKCE verifier, verifies
// the ID token and its nonce, and reads the user's name and groups. It
// returns who signed in, their session cookie (HttpOnly, Secure,
// SameSite=Lax, Max-Age SessionTTL) and the path to return to. Every
// error wraps access.ErrUnauthenticated; web clears the flow cookie
// either way.
func (s *SignIn) Finish(ctx context.Context, query url.Values, flowCookie string) (model.Principal, string, string, error) {
	p, returnTo, err := s.finish(ctx, query, flowCookie)
	if err != nil {
		s.log.Warn("sign-in refused", "err", err)
		return anonymous, "", "", refused(err)
	}
	groups, cut := sessionGroups(p.Groups, s.access.Policy())
	if cut {
		s.log.Warn("a user's groups do not fit a session cookie; kept those the roles file binds", "user", p.Name, "groups", len(p.Groups), "kept", len(groups))
	}
	p.Groups = groups
	session, err := newSession(s.access.sessions, p, s.access.now(), s.opts.SessionTTL)
	if err != nil {
		return anonymous, "", "", refused(err)
	}
	s.log.Info("signed in", "user", p.Name, "subject", p.Subject, "groups", len(p.Groups))
	return p, session, returnTo, nil
}

// refused wraps a sign-in's error with access.ErrUnauthenticated.
func refused(err error) error {
	if errors.Is(err, access.ErrUnauthenticated) {
		return fmt.Errorf("sign-in: %w", err)
	}
	return fmt.Errorf("sign-in: %w: %w", err, access.ErrUnauthenticated)
}

func (s *SignIn) finish(ctx context.Context, query url.Values, flowCookie string) (model.Principal, string, error) {
	f, err := s.checkFlow(query, flowCookie)
	if err != nil {
		return anonymous, "", err
	}
	verifier, err := s.discover(ctx)
	if err != nil {
		return anonymous, "", err
	}
	ctx = oidc.ClientContext(ctx, s.opts.HTTPClient)
	tok, err := s.oauth2().Exchange(ctx, query.Get("code"), oauth2.VerifierOption(f.Verifier))
	if err != nil {
		return anonymous, "", fmt.Errorf("exchange the code at the provider: %w", err)
	}
	raw, ok := tok.Extra("id_token").(string)
	if !ok || raw == "" {
		return anonymous, "", errors.New("the provider returned no ID token")
	}
	idt, err := verifier.Verify(ctx, raw)
	if err != nil {
		return anonymous, "", fmt.Errorf("ID token refused: %w", err)
	}
	if err := s.checkIDToken(idt, f.Nonce); err != nil {
		return anonymous, "", err
	}
	claims, err := s.claims(ctx, idt, tok)
	if err != nil {
		return anonymous, "", err
	}
	name, err := userName(claims, s.opts.NameClaim)
	if err != nil {
		return anonymous, "", err
	}
	if len(name) > maxNameLen || len(idt.Subject) > maxNameLen {
		return anonymous, "", fmt.Errorf("the user's name or subject is longer than %d bytes", maxNameLen)
	}
	return model.Principal{Kind: model.PrincipalUser, Name: name, Subject: idt.Subject,
		Groups: groupsOf(claims[s.opts.GroupsClaim])}, f.ReturnTo, nil
}

// checkFlow checks the flow cookie, the provider's answer and the state,
// and takes the state so that it cannot be used again.
func (s *SignIn) checkFlow(query url.Values, flowCookie string) (flowClaims, error) {
	var f flowClaims
	if flowCookie == "" {
		return f, errors.New("no sign-in in progress in this browser (the flow cookie is missing): start again")
	}
	if err := s.access.flows.open(flowCookie, &f); err != nil {
		return f, fmt.Errorf("flow cookie: %w", err)
	}
	now := s.access.now()
	switch {
	case !now.Before(time.Unix(f.Expires, 0)):
		return f, fmt.Errorf("the sign-in took longer than %s: start again", FlowTTL)
	case query.Get("error") != "":
		return f, fmt.Errorf("the provider refused: %s", providerError(query))
	case query.Get("state") == "":
		return f, errors.New("the callback has no state")
	case subtle.ConstantTimeCompare([]byte(query.Get("state")), []byte(f.State)) != 1:
		return f, errors.New("the callback's state is not this browser's sign-in")
	case query.Get("code") == "":
		return f, errors.New("the callback has no code")
	}
	if !s.takeState(f.State, time.Unix(f.Expires, 0), now) {
		return f, errors.New("this sign-in's callback was already used (a replay)")
	}
	return f, nil
}

// providerError words the provider's error answer, bounded, since it is
// shown to the user and logged.
func providerError(q url.Values) string {
	msg := q.Get("error")
	if d := q.Get("error_description"); d != "" {
		msg += ": " + d
	}
	msg = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return -1
		}
		return r
	}, msg)
	if len(msg) > 200 {
		msg = msg[:200] + "…"
	}
	return msg
}

// takeState records state as used until expires; false if it was. When
// the record is full, expired states go first, then arbitrary ones.
func (s *SignIn) takeState(state string, expires, now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, seen := s.used[state]; seen {
		return false
	}
	if len(s.used) >= maxUsedStates {
		for k, exp := range s.used {
			if !now.Before(exp) {
				delete(s.used, k)
			}
		}
		for k := range s.used {
			if len(s.used) < maxUsedStates {
				break
			}
			delete(s.used, k)
		}
	}
	s.used[state] = expires
	return true
}

// checkIDToken checks what go-oidc leaves to its caller: the nonce, and
// the authorized party of a token for several audiences.
func (s *SignIn) checkIDToken(idt *oidc.IDToken, nonce string) error {
	if subtle.ConstantTimeCompare([]byte(idt.Nonce), []byte(nonce)) != 1 {
		return errors.New("ID token refused: its nonce is not this sign-in's")
	}
	if len(idt.Audience) > 1 {
		var c struct {
			AZP string `json:"azp"`
		}
		if err := idt.Claims(&c); err != nil || c.AZP != s.opts.ClientID {
			return errors.New("ID token refused: issued for several audiences and not authorized for this client")
		}
	}
	if idt.Subject == "" {
		return errors.New("ID token refused: no subject")
	}
	return nil
}

// claims returns the ID token's claims. When the name or groups claim is
// not among them, the provider's userinfo endpoint, if it has one, is
// asked for the missing ones (some providers keep the ID token small);
// its answer must be about the same subject.
func (s *SignIn) claims(ctx context.Context, idt *oidc.IDToken, tok *oauth2.Token) (map[string]any, error) {
	var claims map[string]any
	if err := idt.Claims(&claims); err != nil {
		return nil, fmt.Errorf("ID token claims: %w", err)
	}
	_, hasName := claims[s.opts.NameClaim]
	_, hasGroups := claims[s.opts.GroupsClaim]
	s.mu.Lock()
	p := s.provider
	s.mu.Unlock()
	if (hasName && hasGroups) || p.UserInfoEndpoint() == "" {
		return claims, nil
	}
	info, err := p.UserInfo(ctx, oauth2.StaticTokenSource(tok))
	if err != nil {
		return nil, fmt.Errorf("read the user's claims from the provider: %w", err)
	}
	if info.Subject != idt.Subject {
		return nil, errors.New("the provider's userinfo is about another subject than the ID token")
	}
	var more map[string]any
	if err := info.Claims(&more); err != nil {
		return nil, fmt.Errorf("userinfo claims: %w", err)
	}
	if _, ok := claims["email"]; !ok {
		// An email and whether it is verified come from the same answer.
		delete(claims, "email_verified")
	}
	for k, v := range more {
		if _, ok := claims[k]; !ok {
			claims[k] = v
		}
	}
	return claims, nil
}

// userName is the user's name: the value of nameClaim, a non-empty
// string, else an error that names the claim. For the email claim, an
// email the provider says is not verified is refused: anyone could have
// typed it. No other claim (preferred_username, the subject) stands in
// for a missing one: its names are another namespace, where a user may
// pick one that a binding written for nameClaim gives roles to.
func userName(claims map[string]any, nameClaim string) (string, error) {
	v, _ := claims[nameClaim].(string)
	switch {
	case strings.TrimSpace(v) == "":
		return "", fmt.Errorf("the provider gave no %q claim (a non-empty string), which names the user", nameClaim)
	case nameClaim == "email" && unverified(claims["email_verified"]):
		return "", fmt.Errorf("the provider says the %q claim is not verified (email_verified: false)", nameClaim)
	}
	return v, nil
}

// unverified says whether an email_verified claim says no; some
// providers send it as a string.
func unverified(v any) bool {
	switch v := v.(type) {
	case bool:
		return !v
	case string:
		return strings.EqualFold(v, "false")
	}
	return false
}

// groupsOf reads a groups claim: a list of strings, or one string.
// Anything else (a number, a list of objects) gives no groups.
func groupsOf(v any) []string {
	var out []string
	switch v := v.(type) {
	case string:
		out = append(out, v)
	case []any:
		for _, g := range v {
			if s, ok := g.(string); ok {
				out = append(out, s)
			}
		}
	}
	out = slices.DeleteFunc(out, func(s string) bool { return strings.TrimSpace(s) == "" })
	slices.Sort(out)
	return slices.Compact(out)
}
