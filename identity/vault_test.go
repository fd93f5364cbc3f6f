package identity

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	jwtauth "github.com/hashicorp/vault-plugin-auth-jwt"
	"github.com/hashicorp/vault/sdk/logical"

	"github.com/stackd/stackd/daemon/model"
)

// This file is the acceptance test of the issuer against a relying party
// no one here wrote: HashiCorp Vault's JWT auth method, run in-process
// as a logical.Backend. Vault discovers the issuer over HTTPS (the
// discovery document, then the JWKS it names), checks the signature, iss,
// aud, exp and sub, and binds roles to the claims stack and scope, as a
// stack's trust policy would.

// Vault's roles in these tests: each binds the audience and one stack's
// scope.
const (
	vaultAudience = "vault"
	stackA        = "net-prod"
	stackB        = "app-prod"
	roleARead     = "net-prod-read"
	roleAWrite    = "net-prod-write"
	roleBWrite    = "app-prod-write"
	// rolePreview pins the sub claim itself (bound_subject), not claims.
	rolePreview = "net-prod-preview"
)

var (
	previewA = model.IdentityRequest{Stack: stackA, Operation: model.UpdatePreview, Scope: model.ScopeRead,
		Repository: "https://git.example.com/net.git", Commit: "abc123", PullRequest: 7, Author: "ada"}
	upA = model.IdentityRequest{Stack: stackA, Operation: model.UpdateUp, Scope: model.ScopeWrite,
		Repository: "https://git.example.com/net.git", Commit: "abc123", ApprovedBy: "grace"}
)

// offsetClock is the real time moved by an offset the test sets: Vault
// checks exp, nbf and iat against the real clock.
type offsetClock struct{ offset atomic.Int64 }

func (c *offsetClock) now() time.Time      { return time.Now().Add(time.Duration(c.offset.Load())) }
func (c *offsetClock) set(d time.Duration) { c.offset.Store(int64(d)) }

// vault is an issuer served over HTTPS and a Vault JWT auth backend
// configured to discover it.
type vault struct {
	t       *testing.T
	iss     *Issuer
	clock   *offsetClock
	srv     *httptest.Server
	backend logical.Backend
	storage logical.Storage

	discoveries, jwksFetches atomic.Int32
	mu                       sync.Mutex
	served                   []string // the kids of the last JWKS served
}

// newVault starts the issuer's HTTPS server, the issuer (whose URL is the
// server's), and a Vault JWT backend with the roles above.
func newVault(t *testing.T, mod func(*Options)) *vault {
	t.Helper()
	v := &vault{t: t, clock: &offsetClock{}}
	// The issuer's URL is the server's, known once it listens: the
	// handlers read the issuer set afterwards.
	var iss atomic.Pointer[Issuer]
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+DiscoveryPath, func(w http.ResponseWriter, r *http.Request) {
		v.discoveries.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(iss.Load().Discovery())
	})
	mux.HandleFunc("GET "+JWKSPath, func(w http.ResponseWriter, r *http.Request) {
		data, err := iss.Load().JWKS(r.Context())
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		var set jose.JSONWebKeySet
		if err := json.Unmarshal(data, &set); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		v.mu.Lock()
		v.served = v.served[:0]
		for _, k := range set.Keys {
			v.served = append(v.served, k.KeyID)
		}
		v.mu.Unlock()
		v.jwksFetches.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(data)
	})
	v.srv = httptest.NewTLSServer(mux)
	t.Cleanup(v.srv.Close)

	opts := Options{URL: v.srv.URL, Dir: t.TempDir(), Now: v.clock.now}
	if mod != nil {
		mod(&opts)
	}
	i, err := New(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	iss.Store(i)
	v.iss = i

	conf := &logical.BackendConfig{
		System:      &logical.StaticSystemView{DefaultLeaseTTLVal: time.Hour, MaxLeaseTTLVal: 2 * time.Hour},
		StorageView: &logical.InmemStorage{},
	}
	b, err := jwtauth.Factory(context.Background(), conf)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Cleanup(context.Background()) })
	v.backend, v.storage = b, conf.StorageView

	v.configure()
	if v.discoveries.Load() == 0 {
		t.Fatal("Vault took the config without reading the discovery document")
	}
	role := func(name string, data map[string]any) {
		data["role_type"] = "jwt"
		data["user_claim"] = "sub"
		data["bound_audiences"] = []string{vaultAudience}
		v.write("role/"+name, data)
	}
	role(roleARead, map[string]any{
		"bound_claims": map[string]any{"stack": stackA, "scope": model.ScopeRead},
		// Vault copies these claims into the alias's metadata.
		"claim_mappings": map[string]any{"stack": "stack", "scope": "scope", "operation": "operation",
			"commit": "commit", "repository": "repository"},
	})
	role(roleAWrite, map[string]any{"bound_claims": map[string]any{"stack": stackA, "scope": model.ScopeWrite}})
	role(roleBWrite, map[string]any{"bound_claims": map[string]any{"stack": stackB, "scope": model.ScopeWrite}})
	role(rolePreview, map[string]any{"bound_subject": "stack:" + stackA + ":op:preview:scope:read"})
	return v
}

// configure (re)writes the backend's config: Vault fetches the discovery
// document to check it, and drops its validator, and so the JWKS it
// cached.
func (v *vault) configure() {
	v.t.Helper()
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: v.srv.Certificate().Raw})
	v.write("config", map[string]any{
		"oidc_discovery_url":    v.iss.URL(),
		"oidc_discovery_ca_pem": string(ca),
		"bound_issuer":          v.iss.URL(),
		"jwt_supported_algs":    []string{"RS256"},
	})
}

// write is a write of path that must succeed: a create of a role, an
// update of the config.
func (v *vault) write(path string, data map[string]any) {
	v.t.Helper()
	op := logical.Operation(logical.UpdateOperation)
	if strings.HasPrefix(path, "role/") {
		op = logical.CreateOperation
	}
	resp, err := v.backend.HandleRequest(context.Background(), &logical.Request{
		Operation: op, Path: path, Storage: v.storage, Data: data})
	if err != nil || resp.IsError() {
		v.t.Fatalf("vault write %s: %v %v", path, err, resp.Error())
	}
}

// login asks Vault for a token of role with tok; it returns the alias
// Vault made, or the reason it refused.
func (v *vault) login(role, tok string) (*logical.Alias, error) {
	v.t.Helper()
	resp, err := v.backend.HandleRequest(context.Background(), &logical.Request{
		Operation: logical.UpdateOperation, Path: "login", Storage: v.storage,
		Connection: &logical.Connection{RemoteAddr: "127.0.0.1"},
		Data:       map[string]any{"role": role, "jwt": tok}})
	switch {
	case err != nil:
		return nil, err
	case resp.IsError():
		return nil, resp.Error()
	case resp.Auth == nil || resp.Auth.Alias == nil:
		v.t.Fatalf("vault login %s: a response without auth: %+v", role, resp)
	}
	return resp.Auth.Alias, nil
}

// accept checks that role lets tok in, as the alias sub.
func (v *vault) accept(role, tok, sub string) *logical.Alias {
	v.t.Helper()
	alias, err := v.login(role, tok)
	if err != nil {
		v.t.Fatalf("role %s refused the token: %v", role, err)
	}
	if alias.Name != sub {
		v.t.Errorf("role %s: alias %q, want the sub %q", role, alias.Name, sub)
	}
	return alias
}

// refuse checks that role refuses tok for the reason whose words are
// given, so that it is not refused for another.
func (v *vault) refuse(role, tok string, why ...string) {
	v.t.Helper()
	alias, err := v.login(role, tok)
	if err == nil {
		v.t.Fatalf("role %s let the token in, as %q", role, alias.Name)
	}
	for _, w := range why {
		if !strings.Contains(err.Error(), w) {
			v.t.Errorf("role %s refused the token for %q, want a refusal for %q", role, err, w)
		}
	}
}

// mint is a token of v's issuer for req, with Vault's audience.
func (v *vault) mint(req model.IdentityRequest) string {
	v.t.Helper()
	tok, _, err := v.iss.Mint(req, vaultAudience, 10*time.Minute)
	if err != nil {
		v.t.Fatal(err)
	}
	return tok
}

// servedKeys are the kids of the JWKS Vault last fetched.
func (v *vault) servedKeys() []string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return slices.Clone(v.served)
}

// kid is the key ID in tok's header.
func kid(t *testing.T, tok string) string {
	t.Helper()
	parsed, err := jose.ParseSigned(tok, []jose.SignatureAlgorithm{jose.RS256})
	if err != nil || len(parsed.Signatures) != 1 || parsed.Signatures[0].Header.KeyID == "" {
		t.Fatalf("token header: %v", err)
	}
	return parsed.Signatures[0].Header.KeyID
}

// Refusals for the signature: cap's validator wraps go-oidc's, which
// found no key in the fetched JWKS that verifies the token.
var badSignature = []string{"error verifying token signature", "failed to verify id token signature"}

func TestVaultJWTAuth(t *testing.T) {
	const previewSub, upSub = "stack:" + stackA + ":op:preview:scope:read", "stack:" + stackA + ":op:up:scope:write"

	t.Run("preview token: A's read role, not A's write role", func(t *testing.T) {
		v := newVault(t, nil)
		tok := v.mint(previewA)
		alias := v.accept(roleARead, tok, previewSub)
		for k, want := range map[string]string{"stack": stackA, "scope": "read", "operation": "preview",
			"commit": "abc123", "repository": "https://git.example.com/net.git", "role": roleARead} {
			if alias.Metadata[k] != want {
				t.Errorf("alias metadata %s=%q, want %q (all: %v)", k, alias.Metadata[k], want, alias.Metadata)
			}
		}
		if v.jwksFetches.Load() == 0 {
			t.Error("Vault accepted the token without fetching the JWKS")
		}
		v.accept(rolePreview, tok, previewSub)
		v.refuse(roleAWrite, tok, "error validating claims", `claim "scope" does not match`)
	})

	t.Run("up token: A's write role", func(t *testing.T) {
		v := newVault(t, nil)
		tok := v.mint(upA)
		v.accept(roleAWrite, tok, upSub)
		// bound_subject pins the operation and scope in sub.
		v.refuse(rolePreview, tok, "invalid subject (sub) claim")
	})

	t.Run("stack A's token: not B's role", func(t *testing.T) {
		v := newVault(t, nil)
		v.refuse(roleBWrite, v.mint(upA), "error validating claims", `claim "stack" does not match`)
		b := upA
		b.Stack = stackB
		v.accept(roleBWrite, v.mint(b), "stack:"+stackB+":op:up:scope:write")
	})

	t.Run("expired token", func(t *testing.T) {
		v := newVault(t, nil)
		// Minted an hour ago by the issuer's clock, for 10 minutes: Vault
		// checks exp against the real clock.
		v.clock.set(-time.Hour)
		tok, exp, err := v.iss.Mint(upA, vaultAudience, 10*time.Minute)
		v.clock.set(0)
		if err != nil {
			t.Fatal(err)
		}
		if !exp.Before(time.Now().Add(-40 * time.Minute)) {
			t.Fatalf("the token expires %v, want 50 minutes ago", exp)
		}
		v.refuse(roleAWrite, tok, "invalid expiration time (exp) claim: token is expired")
		v.accept(roleAWrite, v.mint(upA), upSub)
	})

	t.Run("wrong audience", func(t *testing.T) {
		v := newVault(t, nil)
		tok, _, err := v.iss.Mint(upA, AWSAudience, 10*time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		v.refuse(roleAWrite, tok, "invalid audience (aud) claim")
	})

	t.Run("signed by an unrelated key", func(t *testing.T) {
		// Sanity: a token just like stackd's, with the same issuer and
		// claims, but signed by a key the served JWKS lacks, is refused:
		// the tokens accepted above were accepted for stackd's signature.
		v := newVault(t, nil)
		other, err := New(context.Background(), Options{URL: v.iss.URL(), Dir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		forged, _, err := other.Mint(upA, vaultAudience, 10*time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		v.refuse(roleAWrite, forged, badSignature...)
		v.accept(roleAWrite, v.mint(upA), upSub)
	})

	// Vault's JWT backend (cap's jwt.Validator over go-oidc's
	// RemoteKeySet) keeps the JWKS it fetched, and fetches it anew only
	// when a token's signature verifies with none of the cached keys:
	// after a rotation a token of the withdrawn key would still verify
	// with the cached copy. The two cases below make sure Vault's copy is
	// the JWKS served after the rotation, and that the refusal comes from
	// the key missing there: a token of the new key (an unknown kid makes
	// Vault fetch the JWKS), or a config written anew (which drops Vault's
	// validator and its cache).
	t.Run("key rotated out in an emergency", func(t *testing.T) {
		v := newVault(t, nil)
		old := v.mint(upA)
		v.accept(roleAWrite, old, upSub) // Vault caches a JWKS with the old key
		oldKid := kid(t, old)
		if !slices.Contains(v.servedKeys(), oldKid) {
			t.Fatalf("the JWKS Vault fetched %v lacks the signing key %s", v.servedKeys(), oldKid)
		}
		if _, err := v.iss.Rotate(context.Background(), true); err != nil {
			t.Fatal(err)
		}
		fresh := v.mint(upA)
		fetches := v.jwksFetches.Load()
		v.accept(roleAWrite, fresh, upSub)
		if v.jwksFetches.Load() == fetches {
			t.Fatal("Vault verified a token of the new key without fetching the JWKS")
		}
		// go-oidc's key set answers the fetch's waiters before it stores
		// what it fetched, and a token verified meanwhile is answered from
		// that finished fetch, without a fetch of its own, while the
		// cache still holds the old JWKS. Two verifications in a row
		// without a fetch, the second after the store: the cache holds
		// the new key.
		for quiet, deadline := 0, time.Now().Add(10*time.Second); quiet < 2; time.Sleep(10 * time.Millisecond) {
			f := v.jwksFetches.Load()
			v.accept(roleAWrite, fresh, upSub)
			quiet++
			if v.jwksFetches.Load() != f {
				quiet = 0
			}
			if time.Now().After(deadline) {
				t.Fatal("Vault fetched the JWKS for every token of the new key: its cache never held it")
			}
		}
		if keys := v.servedKeys(); slices.Contains(keys, oldKid) || !slices.Contains(keys, kid(t, fresh)) {
			t.Fatalf("JWKS after an emergency rotation: %v, want the new key %s and not the old %s", keys, kid(t, fresh), oldKid)
		}
		fetches = v.jwksFetches.Load()
		v.refuse(roleAWrite, old, badSignature...)
		if v.jwksFetches.Load() == fetches {
			t.Error("Vault refused the old key's token without fetching the JWKS")
		}
	})

	t.Run("key rotated out on schedule", func(t *testing.T) {
		v := newVault(t, func(o *Options) { o.Rotation = time.Hour; o.TokenTTL = 15 * time.Minute })
		// Minted now: its exp is 10 minutes ahead of the real clock
		// throughout; only the issuer's clock moves.
		old := v.mint(upA)
		oldKid := kid(t, old)
		v.accept(roleAWrite, old, upSub)
		// An hour later the key rotates: the old one stays published
		// until its last token expired.
		v.clock.set(time.Hour)
		if err := v.iss.Maintain(context.Background()); err != nil {
			t.Fatal(err)
		}
		v.configure()
		v.accept(roleAWrite, old, upSub)
		if keys := v.servedKeys(); len(keys) != 2 || !slices.Contains(keys, oldKid) {
			t.Fatalf("JWKS right after a rotation: %v, want the old key %s and the new one", keys, oldKid)
		}
		// Once TokenTTL passed, the old key leaves the JWKS.
		v.clock.set(time.Hour + 16*time.Minute)
		if err := v.iss.Maintain(context.Background()); err != nil {
			t.Fatal(err)
		}
		v.configure()
		fetches := v.jwksFetches.Load()
		v.refuse(roleAWrite, old, badSignature...)
		if v.jwksFetches.Load() == fetches {
			t.Fatal("Vault refused the old key's token without fetching the JWKS")
		}
		if keys := v.servedKeys(); len(keys) != 1 || slices.Contains(keys, oldKid) {
			t.Fatalf("JWKS once the old key's tokens expired: %v, want one key, not %s", keys, oldKid)
		}
	})
}
