package identity

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"slices"
	"strings"
	"sync"
	"text/template"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/stackd/stackd/daemon/model"
)

// Defaults of Options.
const (
	DefaultRotation = 30 * 24 * time.Hour
	DefaultTokenTTL = 15 * time.Minute
	// DefaultSubject is the sub claim's template: a trust policy pins it,
	// with a wildcard for the operation, to one stack and one scope.
	DefaultSubject = "stack:{{.Stack}}:op:{{.Operation}}:scope:{{.Scope}}"
	// JWKSPath and DiscoveryPath are where the issuer's documents are
	// served, below the issuer URL.
	JWKSPath      = "/.well-known/jwks.json"
	DiscoveryPath = "/.well-known/openid-configuration"
)

// maxSubject is the longest sub claim: AWS and Azure take up to 255
// characters (Google's mapped google.subject only 127).
const maxSubject = 255

// Directory shares the public halves of a cluster's signing keys, so
// that every replica's JWKS holds every replica's keys (cluster
// implements it on etcd). A private key never leaves the replica that
// made it.
type Directory interface {
	// PublishKey lists jwk (a public JWK) under kid until the time given.
	PublishKey(ctx context.Context, kid string, jwk []byte, until time.Time) error
	// WithdrawKey removes kid at once.
	WithdrawKey(ctx context.Context, kid string) error
	// PublishedKeys are the JWKs listed now, from every replica.
	PublishedKeys(ctx context.Context) ([][]byte, error)
}

// Options configure an Issuer.
type Options struct {
	// URL is the issuer: the https URL the clouds reach, which serves the
	// discovery document and the JWKS (http only on loopback, for tests).
	URL string
	// Dir holds KeyFile.
	Dir string
	// Rotation is how long a key signs before the next one takes over.
	Rotation time.Duration
	// TokenTTL is the longest a token lives; an operation's token lives
	// no longer than the operation's timeout either, and is made anew
	// before it expires.
	TokenTTL time.Duration
	// Subject is the sub claim's template (text/template over Claims).
	Subject string
	// Directory, in a cluster, shares the public keys.
	Directory Directory
	Log       *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Issuer signs stackd's tokens. It is safe for concurrent use.
type Issuer struct {
	opts    Options
	subject *template.Template

	mu      sync.Mutex
	keys    []*key // oldest first; the last is current
	rotated chan struct{}
	minted  map[[2]string]uint64
	// listed is until when each key is listed in the Directory, as this
	// process listed it; withdraw are the keys to withdraw from it.
	listed   map[string]time.Time
	withdraw []string

	cacheMu   sync.Mutex
	cached    []jose.JSONWebKey
	cachedAt  time.Time
	cacheLife time.Duration
}

// New loads the issuer's keys from opts.Dir, or makes the first one, and
// rotates them when the current one is overdue.
func New(ctx context.Context, opts Options) (*Issuer, error) {
	if err := checkURL(opts.URL); err != nil {
		return nil, err
	}
	opts.URL = strings.TrimSuffix(opts.URL, "/")
	if opts.Rotation <= 0 {
		opts.Rotation = DefaultRotation
	}
	if opts.TokenTTL <= 0 {
		opts.TokenTTL = DefaultTokenTTL
	}
	if opts.Subject == "" {
		opts.Subject = DefaultSubject
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	sub, err := template.New("subject").Option("missingkey=error").Parse(opts.Subject)
	if err != nil {
		return nil, fmt.Errorf("--oidc-subject: %w", err)
	}
	// A field the claims lack fails here; a label a stack lacks only
	// fails that stack's tokens.
	check := template.Must(template.New("subject").Option("missingkey=zero").Parse(opts.Subject))
	if err := check.Execute(io.Discard, Claims{Stack: "example", Operation: "up", Scope: model.ScopeWrite}); err != nil {
		return nil, fmt.Errorf("--oidc-subject: %w", err)
	}
	i := &Issuer{opts: opts, subject: sub, rotated: make(chan struct{}), minted: map[[2]string]uint64{}, listed: map[string]time.Time{}, cacheLife: 2 * time.Second}
	if i.keys, err = loadKeys(opts.Dir); err != nil {
		return nil, err
	}
	if err := i.Maintain(ctx); err != nil {
		return nil, err
	}
	return i, nil
}

// checkURL accepts https URLs, and http ones on loopback.
func checkURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("--oidc-issuer-url %q: want an https URL without query, such as https://stackd.example.com", raw)
	}
	switch {
	case u.Scheme == "https":
	case u.Scheme == "http" && (u.Hostname() == "localhost" || strings.HasPrefix(u.Hostname(), "127.") || u.Hostname() == "::1"):
	default:
		return fmt.Errorf("--oidc-issuer-url %q: clouds fetch the issuer's keys over https only", raw)
	}
	return nil
}

// URL is the issuer, the iss claim of its tokens.
func (i *Issuer) URL() string { return i.opts.URL }

// publishMargin is how much longer than its tokens the current key is
// listed in the Directory: Maintain lists it again every few minutes, so
// that a replica's key leaves every JWKS soon after the replica is gone
// for good, and a key lost from the Directory comes back.
const publishMargin = 10 * time.Minute

// Maintain rotates the current key once it signed for Rotation, drops
// retired keys whose last token expired, and keeps the Directory in
// line with the keys (lists them, withdraws what an emergency rotation
// could not). cmd calls it every minute; New once.
func (i *Issuer) Maintain(ctx context.Context) error {
	i.mu.Lock()
	defer i.mu.Unlock()
	now := i.opts.Now()
	changed := false
	if cur := i.current(); cur == nil || now.Sub(cur.Created) >= i.opts.Rotation {
		if err := i.rotateLocked(ctx, now, false); err != nil {
			return err
		}
		changed = true
	}
	kept := i.keys[:0]
	for _, k := range i.keys {
		if k.published(now, i.opts.TokenTTL) {
			kept = append(kept, k)
		} else {
			changed = true
			delete(i.listed, k.ID)
		}
	}
	i.keys = kept
	if changed {
		if err := saveKeys(i.opts.Dir, i.keys); err != nil {
			return err
		}
	}
	return i.syncDirectory(ctx, now)
}

// syncDirectory lists each key in the Directory until its last token
// expires (the current one for TokenTTL and publishMargin more, again
// every few minutes), and withdraws the keys an emergency rotation
// dropped.
func (i *Issuer) syncDirectory(ctx context.Context, now time.Time) error {
	if i.opts.Directory == nil {
		return nil
	}
	var errs []error
	pending := i.withdraw[:0]
	for _, kid := range i.withdraw {
		if err := i.opts.Directory.WithdrawKey(ctx, kid); err != nil {
			errs = append(errs, fmt.Errorf("withdraw signing key %s: %w", kid, err))
			pending = append(pending, kid)
		}
	}
	i.withdraw = pending
	for _, k := range i.keys {
		want, listed := k.publishedUntil(i.opts.TokenTTL), i.listed[k.ID]
		switch {
		case want.IsZero() && listed.Sub(now) > i.opts.TokenTTL+publishMargin/2:
			continue // current, listed recently
		case want.IsZero():
			want = now.Add(i.opts.TokenTTL + publishMargin)
		case listed.Equal(want):
			continue // retired, listed until its last token expires
		}
		if err := i.publish(ctx, k, want); err != nil {
			errs = append(errs, err)
			continue
		}
		i.listed[k.ID] = want
	}
	return errors.Join(errs...)
}

// Rotate makes a new key current at once. The previous one stays
// published until its last token expired, unless emergency: then every
// earlier key (the current one and those retired) is dropped and
// withdrawn at once, and the tokens they signed stop validating for the
// relying parties that read the JWKS again (they cache it: see
// docs/credentials.md); running operations get new tokens (see Rotated).
// The new key is listed in the Directory before anything else changes;
// a withdrawal that fails is logged and tried again by Maintain.
func (i *Issuer) Rotate(ctx context.Context, emergency bool) (string, error) {
	i.mu.Lock()
	defer i.mu.Unlock()
	now := i.opts.Now()
	if err := i.rotateLocked(ctx, now, emergency); err != nil {
		return "", err
	}
	if err := saveKeys(i.opts.Dir, i.keys); err != nil {
		return "", err
	}
	if err := i.syncDirectory(ctx, now); err != nil {
		i.opts.Log.Error("the cluster's JWKS is not yet in line with the rotation; tried again every minute", "err", err)
	}
	i.dropCache() // what a JWKS read while the keys were withdrawn
	return i.current().ID, nil
}

// rotateLocked puts a new key in place of the current one. It changes
// nothing when the new key cannot be listed in the Directory: the
// current key signs on.
func (i *Issuer) rotateLocked(ctx context.Context, now time.Time, emergency bool) error {
	k, err := newKey(now)
	if err != nil {
		return err
	}
	if i.opts.Directory != nil {
		until := now.Add(i.opts.TokenTTL + publishMargin)
		if err := i.publish(ctx, k, until); err != nil {
			return err
		}
		i.listed[k.ID] = until
	}
	old := i.current()
	switch {
	case emergency:
		// The file that leaked holds every key it still keeps.
		for _, x := range i.keys {
			i.withdraw = append(i.withdraw, x.ID)
			delete(i.listed, x.ID)
		}
		i.keys = nil
	case old != nil:
		old.Retired = now
	}
	i.keys = append(i.keys, k)
	close(i.rotated)
	i.rotated = make(chan struct{})
	i.dropCache()
	what := "rotated"
	switch {
	case old == nil:
		what = "made"
	case emergency:
		what = "rotated in an emergency: the earlier keys are withdrawn"
	}
	i.opts.Log.Info("OpenID signing key "+what, "kid", k.ID)
	return nil
}

// publish lists k in the Directory until the time given.
func (i *Issuer) publish(ctx context.Context, k *key, until time.Time) error {
	data, err := json.Marshal(k.public())
	if err != nil {
		return fmt.Errorf("publish signing key %s: %w", k.ID, err)
	}
	if err := i.opts.Directory.PublishKey(ctx, k.ID, data, until); err != nil {
		return fmt.Errorf("publish signing key %s: %w", k.ID, err)
	}
	return nil
}

// current is the key that signs: the newest, unless retired.
func (i *Issuer) current() *key {
	if len(i.keys) == 0 || !i.keys[len(i.keys)-1].Retired.IsZero() {
		return nil
	}
	return i.keys[len(i.keys)-1]
}

// Rotated is closed when the signing key changes: a running operation
// then makes its tokens anew.
func (i *Issuer) Rotated() <-chan struct{} {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.rotated
}

// KeyAge is how long the current key has signed.
func (i *Issuer) KeyAge() time.Duration {
	i.mu.Lock()
	defer i.mu.Unlock()
	if cur := i.current(); cur != nil {
		return i.opts.Now().Sub(cur.Created)
	}
	return 0
}

// RotationPeriod is Options.Rotation.
func (i *Issuer) RotationPeriod() time.Duration { return i.opts.Rotation }

// Minted counts the tokens signed, by stack and scope.
func (i *Issuer) Minted() map[[2]string]uint64 {
	i.mu.Lock()
	defer i.mu.Unlock()
	out := make(map[[2]string]uint64, len(i.minted))
	for k, v := range i.minted {
		out[k] = v
	}
	return out
}

// Claims are the claims of a token beside the registered ones.
type Claims struct {
	Stack       string            `json:"stack"`
	Labels      map[string]string `json:"labels,omitempty"`
	Repository  string            `json:"repository,omitempty"`
	Commit      string            `json:"commit,omitempty"`
	Operation   string            `json:"operation"`
	Scope       string            `json:"scope"`
	PullRequest int               `json:"pull_request,omitempty"`
	Author      string            `json:"author,omitempty"`
	ApprovedBy  string            `json:"approved_by,omitempty"`
}

// claimsOf are req's claims.
func claimsOf(req model.IdentityRequest) Claims {
	return Claims{Stack: req.Stack, Labels: req.Labels, Repository: req.Repository, Commit: req.Commit,
		Operation: req.Operation, Scope: req.Scope, PullRequest: req.PullRequest, Author: req.Author, ApprovedBy: req.ApprovedBy}
}

// subjectOf is the sub claim of c.
func (i *Issuer) subjectOf(c Claims) (string, error) {
	if c.Labels == nil {
		c.Labels = map[string]string{}
	}
	var b bytes.Buffer
	if err := i.subject.Execute(&b, c); err != nil {
		return "", fmt.Errorf("subject: %w", err)
	}
	sub := b.String()
	if sub == "" || len(sub) > maxSubject {
		return "", fmt.Errorf("subject %q: must be 1 to %d characters", sub, maxSubject)
	}
	return sub, nil
}

// Mint signs a token for req and audience, living ttl or TokenTTL,
// whichever is shorter.
func (i *Issuer) Mint(req model.IdentityRequest, audience string, ttl time.Duration) (string, time.Time, error) {
	if req.Stack == "" || audience == "" || (req.Scope != model.ScopeRead && req.Scope != model.ScopeWrite) {
		return "", time.Time{}, errors.New("mint a token: stack, audience and scope are required")
	}
	c := claimsOf(req)
	sub, err := i.subjectOf(c)
	if err != nil {
		return "", time.Time{}, fmt.Errorf("mint a token for stack %s: %w", req.Stack, err)
	}
	if ttl <= 0 || ttl > i.opts.TokenTTL {
		ttl = i.opts.TokenTTL
	}
	var id [16]byte
	_, _ = rand.Read(id[:])
	i.mu.Lock()
	cur := i.current()
	i.mu.Unlock()
	if cur == nil {
		return "", time.Time{}, errors.New("mint a token: no signing key")
	}
	now := i.opts.Now()
	exp := now.Add(ttl)
	std := jwt.Claims{Issuer: i.opts.URL, Subject: sub, Audience: jwt.Audience{audience}, Expiry: jwt.NewNumericDate(exp),
		IssuedAt: jwt.NewNumericDate(now), NotBefore: jwt.NewNumericDate(now), ID: hex.EncodeToString(id[:])}
	tok, err := jwt.Signed(cur.signer).Claims(std).Claims(c).Serialize()
	if err != nil {
		return "", time.Time{}, fmt.Errorf("mint a token for stack %s: %w", req.Stack, err)
	}
	i.mu.Lock()
	i.minted[[2]string{req.Stack, req.Scope}]++
	i.mu.Unlock()
	return tok, exp, nil
}

// Discovery is the OpenID provider configuration document: what a
// relying party reads to find the JWKS.
func (i *Issuer) Discovery() []byte {
	doc := map[string]any{
		"issuer":                                i.opts.URL,
		"jwks_uri":                              i.opts.URL + JWKSPath,
		"response_types_supported":              []string{"id_token"},
		"subject_types_supported":               []string{"public"},
		"id_token_signing_alg_values_supported": []string{string(jose.RS256)},
		"scopes_supported":                      []string{"openid"},
		"claims_supported": []string{"iss", "sub", "aud", "exp", "iat", "nbf", "jti", "stack", "labels", "repository",
			"commit", "operation", "scope", "pull_request", "author", "approved_by"},
	}
	data, _ := json.MarshalIndent(doc, "", "  ")
	return data
}

// JWKS is the key set relying parties check tokens with: this issuer's
// current and retired keys that may still have live tokens, and in a
// cluster every replica's (read at most every two seconds).
func (i *Issuer) JWKS(ctx context.Context) ([]byte, error) {
	keys, err := i.publishedKeys(ctx)
	if err != nil {
		return nil, err
	}
	return json.Marshal(jose.JSONWebKeySet{Keys: keys})
}

// publishedKeys are the keys of the JWKS, by ID.
func (i *Issuer) publishedKeys(ctx context.Context) ([]jose.JSONWebKey, error) {
	now := i.opts.Now()
	var keys []jose.JSONWebKey
	i.mu.Lock()
	for _, k := range i.keys {
		if k.published(now, i.opts.TokenTTL) {
			keys = append(keys, k.public())
		}
	}
	dropped := slices.Clone(i.withdraw) // withdrawn here, maybe not yet in the Directory
	i.mu.Unlock()
	if i.opts.Directory != nil {
		for _, k := range i.directoryKeys(ctx) {
			if !slices.Contains(dropped, k.KeyID) && !slices.ContainsFunc(keys, func(x jose.JSONWebKey) bool { return x.KeyID == k.KeyID }) {
				keys = append(keys, k)
			}
		}
	}
	slices.SortFunc(keys, func(a, b jose.JSONWebKey) int { return strings.Compare(a.KeyID, b.KeyID) })
	return keys, nil
}

// directoryKeys reads the Directory, or what was read of it in the last
// cacheLife, answer or failure: the JWKS needs no token, and anyone may
// ask for it. When the Directory cannot be read, the last keys read of it stand in (none
// after a rotation of this replica's), so that an etcd outage does not
// stop the clouds from checking this replica's own tokens.
func (i *Issuer) directoryKeys(ctx context.Context) []jose.JSONWebKey {
	i.cacheMu.Lock()
	defer i.cacheMu.Unlock()
	now := i.opts.Now()
	if !i.cachedAt.IsZero() && now.Sub(i.cachedAt) < i.cacheLife {
		return i.cached
	}
	raw, err := i.opts.Directory.PublishedKeys(ctx)
	// A failure is not tried again sooner than an answer is read again:
	// each request would otherwise wait on etcd, and log.
	i.cachedAt = now
	if err != nil {
		i.opts.Log.Warn("cannot read the cluster's signing keys: the JWKS lists the last ones read", "err", err)
		return i.cached
	}
	keys := []jose.JSONWebKey{}
	for _, data := range raw {
		var k jose.JSONWebKey
		if err := k.UnmarshalJSON(data); err != nil || !k.IsPublic() || !k.Valid() {
			i.opts.Log.Warn("a published signing key is not a public JWK: left out of the JWKS")
			continue
		}
		keys = append(keys, k)
	}
	i.cached = keys
	return keys
}

// dropCache forgets what was read of the Directory.
func (i *Issuer) dropCache() {
	i.cacheMu.Lock()
	i.cached, i.cachedAt = nil, time.Time{}
	i.cacheMu.Unlock()
}
