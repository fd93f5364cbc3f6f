package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"github.com/stackd/stackd/auth"
	"github.com/stackd/stackd/daemon"
	"github.com/stackd/stackd/daemon/audit"
	"github.com/stackd/stackd/daemon/scrub"
	"github.com/stackd/stackd/web"
)

// accessFlags are the flags of access control: the roles file with its
// named tokens, and sign-in through an OpenID provider.
type accessFlags struct {
	authFile             string
	oidcIssuer           string
	oidcClientID         string
	oidcClientSecretFile string
	oidcRedirectURL      string
	oidcNameClaim        string
	oidcGroupsClaim      string
	oidcScopes           stringsFlag
	sessionTTL           time.Duration
	sessionKeyFile       string
}

// callbackPath is where the provider sends the browser back: web serves
// it, and --oidc-redirect-url must end with it.
const callbackPath = "/auth/callback"

func (f *accessFlags) define(fs *flag.FlagSet) {
	fs.StringVar(&f.authFile, "auth-file", "", "roles file: named API tokens, roles per stack and who holds them; reloaded when it changes (unset: the API token alone)")
	fs.StringVar(&f.oidcIssuer, "oidc-issuer", "", "issuer `URL` of the OpenID provider people sign in with (unset: no sign-in)")
	fs.StringVar(&f.oidcClientID, "oidc-client-id", "", "client ID registered at the OpenID provider")
	fs.StringVar(&f.oidcClientSecretFile, "oidc-client-secret-file", "", "file holding the client secret registered at the OpenID provider (unset: a public client, protected by PKCE)")
	fs.StringVar(&f.oidcRedirectURL, "oidc-redirect-url", "", "`URL` of stackd's "+callbackPath+" as browsers reach it, registered at the provider (e.g. https://stackd.example.com"+callbackPath+")")
	fs.StringVar(&f.oidcNameClaim, "oidc-name-claim", auth.DefaultNameClaim, "ID token claim that names a user in the roles file's bindings")
	fs.StringVar(&f.oidcGroupsClaim, "oidc-groups-claim", auth.DefaultGroupsClaim, "ID token claim that lists a user's groups")
	fs.Var(&f.oidcScopes, "oidc-scope", "`scope` to request from the provider (repeatable; default: openid, profile, email; Dex and Keycloak need groups for the groups claim)")
	fs.DurationVar(&f.sessionTTL, "session-ttl", auth.DefaultSessionTTL, "how long a sign-in lasts")
	fs.StringVar(&f.sessionKeyFile, "session-key-file", "", "file holding the key that signs sessions, 64 hex digits; the same on every replica of a cluster (default: generated once into <data-dir>/"+auth.SessionKeyFile+")")
}

// signIn says whether sign-in through an OpenID provider is set up.
func (f *accessFlags) signIn() bool { return f.oidcIssuer != "" }

// check refuses access flags that cannot work.
func (f *accessFlags) check(clustered bool) error {
	partial := f.oidcClientID != "" || f.oidcRedirectURL != "" || f.oidcClientSecretFile != ""
	switch {
	case partial && !f.signIn():
		return usageErrorf("run: --oidc-client-id, --oidc-client-secret-file and --oidc-redirect-url need --oidc-issuer")
	case !f.signIn():
		return nil
	case f.oidcClientID == "" || f.oidcRedirectURL == "":
		return usageErrorf("run: sign-in needs --oidc-client-id and --oidc-redirect-url besides --oidc-issuer")
	case f.sessionTTL <= 0:
		return usageErrorf("run: --session-ttl must be positive")
	case clustered && f.sessionKeyFile == "":
		// Each replica would generate a key of its own and refuse the
		// others' sessions.
		return usageErrorf("run: in a cluster sign-in needs --session-key-file, the same on every replica")
	}
	u, err := url.Parse(f.oidcRedirectURL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || !strings.HasSuffix(u.Path, callbackPath) {
		return usageErrorf("run: --oidc-redirect-url must be the absolute URL of stackd's %s, as browsers reach it", callbackPath)
	}
	return nil
}

// accessSetup is who may do what, for the web server: the roles file
// and sign-in (nil without --auth-file and --oidc-issuer: the API token
// alone), and the audit trail.
type accessSetup struct {
	access *auth.Access
	signIn *auth.SignIn
	audit  audit.Log
	// secure says browsers reach the UI over https (the redirect URL's
	// scheme): every cookie is then Secure.
	secure bool
	// tokenSignIn says the web UI signs people in with API tokens; ttl
	// is how long a session lasts.
	tokenSignIn bool
	ttl         time.Duration
	node        string
	stop        context.CancelFunc
}

// newAccess sets up access control: the admin token (the API token) and
// the roles file, watched for changes, sign-in through the provider and
// with a token; the audit trail is st's when st keeps one. red learns
// the client secret.
func (f *runFlags) newAccess(ctx context.Context, adminToken string, st daemon.Store, node, dataDir string,
	red *scrub.Redactor, log *slog.Logger,
) (*accessSetup, error) {
	s := &accessSetup{node: node, stop: func() {}}
	s.audit, _ = st.(audit.Log)
	if s.audit == nil {
		log.Warn("the store keeps no audit trail: requests are not recorded")
	}
	if f.authFile == "" && !f.signIn() && adminToken == "" {
		return s, nil // --api-no-token: nobody to sign in
	}
	// Signing in with a token needs a session key; in a cluster, the
	// same on every replica (sign-in through the provider requires it).
	s.tokenSignIn = f.signIn() || !f.clusterFlags.enabled() || f.sessionKeyFile != ""
	if !s.tokenSignIn {
		log.Info("the web UI's token sign-in is off: in a cluster it needs --session-key-file, the same on every replica")
	}
	var key []byte
	if s.tokenSignIn {
		var err error
		if key, err = auth.LoadSessionKey(dataDir, f.sessionKeyFile); err != nil {
			return nil, err
		}
	}
	s.ttl = f.sessionTTL
	alog := log.With("component", "auth")
	a, err := auth.New(auth.Options{AdminToken: adminToken, File: f.authFile, SessionKey: key, Log: alog})
	if err != nil {
		return nil, fmt.Errorf("--auth-file: %w", err)
	}
	wctx, stop := context.WithCancel(ctx)
	if _, err := a.Watch(wctx, nil); err != nil {
		stop()
		return nil, err
	}
	s.access, s.stop = a, stop
	if !f.signIn() {
		return s, nil
	}
	if err := f.newSignIn(s, red, alog); err != nil {
		stop()
		return nil, err
	}
	if f.authFile == "" {
		log.Warn("sign-in without --auth-file: signed-in users hold no role, and may only read what everyone may")
	}
	return s, nil
}

// newSignIn sets up sign-in through the OpenID provider, and checks in
// the background that the provider answers: the daemon starts while its
// provider is down, and sign-in works once it is back.
func (f *runFlags) newSignIn(s *accessSetup, red *scrub.Redactor, log *slog.Logger) error {
	secret, err := readSecretFile(f.oidcClientSecretFile, "--oidc-client-secret-file")
	if err != nil {
		return err
	}
	red.Add(secret)
	si, err := auth.NewSignIn(s.access, auth.OIDCOptions{IssuerURL: f.oidcIssuer, ClientID: f.oidcClientID, ClientSecret: secret,
		RedirectURL: f.oidcRedirectURL, Scopes: scopesOf(f.oidcScopes), NameClaim: f.oidcNameClaim, GroupsClaim: f.oidcGroupsClaim,
		SessionTTL: f.sessionTTL, Log: log})
	if err != nil {
		return fmt.Errorf("--oidc-issuer: %w", err)
	}
	s.signIn, s.secure = si, strings.HasPrefix(f.oidcRedirectURL, "https://")
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := si.Discover(ctx); err != nil {
			log.Warn("the OpenID provider does not answer yet; sign-in retries when someone signs in", "issuer", f.oidcIssuer, "err", err)
			return
		}
		log.Info("sign-in through the OpenID provider is ready", "issuer", f.oidcIssuer)
	}()
	return nil
}

// scopesOf is the --oidc-scope values, nil for the provider's defaults.
func scopesOf(flags stringsFlag) []string {
	if len(flags) == 0 {
		return nil
	}
	return []string(flags)
}

// webOptions returns o with access control and the audit trail set.
func (s *accessSetup) webOptions(o web.Options) web.Options {
	o.Audit, o.Node = s.audit, s.node
	if s.access == nil {
		return o
	}
	o.Access = s.access
	if s.tokenSignIn {
		o.TokenSignIn, o.SessionTTL = s.access, s.ttl
	}
	if s.signIn != nil {
		o.SignIn, o.SessionTTL, o.SecureCookies = s.signIn, s.signIn.SessionTTL(), s.secure
	}
	return o
}

// close stops watching the roles file.
func (s *accessSetup) close() {
	if s != nil {
		s.stop()
	}
}
