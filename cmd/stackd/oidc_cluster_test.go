package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"

	"github.com/stackd/stackd/cluster"
	"github.com/stackd/stackd/cluster/etcdtest"
	"github.com/stackd/stackd/daemon/model"
	"github.com/stackd/stackd/identity"
)

// The cluster is the issuer's Directory.
var _ identity.Directory = (*cluster.Cluster)(nil)

// oidcReplica is one replica's issuer, its keys shared through its
// cluster, and the JWKS it serves.
type oidcReplica struct {
	name   string
	issuer *identity.Issuer
	jwks   string
}

const oidcAudience = "sts.amazonaws.com"

func newOIDCReplica(t *testing.T, endpoints []string, node string) *oidcReplica {
	t.Helper()
	ctx := context.Background()
	c, err := cluster.Open(ctx, cluster.Options{Endpoints: endpoints, Prefix: "/stackd/oidc/", Node: node})
	if err != nil {
		t.Fatal(err)
	}
	c.Start()
	t.Cleanup(func() { c.Close() })
	// One public URL for every replica: behind a load balancer, a cloud
	// may read any replica's JWKS.
	i, err := identity.New(ctx, identity.Options{URL: testIssuer, Dir: t.TempDir(), Directory: c})
	if err != nil {
		t.Fatal(err)
	}
	return &oidcReplica{name: node, issuer: i, jwks: serveJWKS(t, i)}
}

// serveJWKS serves i's JWKS as web does, and returns its URL.
func serveJWKS(t *testing.T, i *identity.Issuer) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != identity.JWKSPath {
			http.NotFound(w, r)
			return
		}
		data, err := i.JWKS(r.Context())
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(data)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + identity.JWKSPath
}

func (r *oidcReplica) mint(t *testing.T) string {
	t.Helper()
	tok, _, err := r.issuer.Mint(model.IdentityRequest{Stack: "net-prod", Operation: model.UpdateUp, Scope: model.ScopeWrite}, oidcAudience, 0)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// verifyAt checks tok as a cloud does, with go-oidc, against the JWKS at
// jwksURL, read anew (go-oidc's key set caches what it read).
func verifyAt(jwksURL, tok string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	v := oidc.NewVerifier(testIssuer, oidc.NewRemoteKeySet(ctx, jwksURL), &oidc.Config{ClientID: oidcAudience})
	idt, err := v.Verify(ctx, tok)
	if err == nil && idt.Subject != "stack:net-prod:op:up:scope:write" {
		return fmt.Errorf("verified a token of subject %q", idt.Subject)
	}
	return err
}

// refused says whether err is go-oidc refusing a signature no key of the
// JWKS checks (not a JWKS that could not be read).
func refused(err error) bool {
	return err != nil && strings.Contains(err.Error(), "failed to verify id token signature")
}

// mustVerify fails unless tok verifies against r's JWKS now.
func (r *oidcReplica) mustVerify(t *testing.T, what, tok string) {
	t.Helper()
	if err := verifyAt(r.jwks, tok); err != nil {
		t.Errorf("%s, against %s's JWKS: %v", what, r.name, err)
	}
}

// mustRefuse fails unless tok is refused by r's JWKS now.
func (r *oidcReplica) mustRefuse(t *testing.T, what, tok string) {
	t.Helper()
	if err := verifyAt(r.jwks, tok); !refused(err) {
		t.Errorf("%s, against %s's JWKS: %v; want it refused", what, r.name, err)
	}
}

// waitVerdict waits until tok verifies against r's JWKS (or is refused,
// unless valid): the JWKS reads the cluster's keys at most every two
// seconds.
func (r *oidcReplica) waitVerdict(t *testing.T, what, tok string, valid bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		err := verifyAt(r.jwks, tok)
		if valid && err == nil || !valid && refused(err) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s, against %s's JWKS: still %v after 15s", what, r.name, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestOIDCClusterKeys: two replicas of a cluster, each signing with its
// own key behind one issuer URL, serve each other's public keys: a token
// of either verifies (with go-oidc, as a cloud does) against either's
// JWKS. A key rotated in is served by the other replica within its
// cache's life, and the key it replaced still is, for the tokens it
// signed; a key rotated out in an emergency is refused by the other
// replica once its cache expired.
func TestOIDCClusterKeys(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an etcd member")
	}
	t.Parallel()
	ctx := context.Background()
	etcd := etcdtest.Start(t, 1)
	r1 := newOIDCReplica(t, etcd.Endpoints(), "r1")
	r2 := newOIDCReplica(t, etcd.Endpoints(), "r2")

	// The verifier checks signatures: a token of an issuer of the same
	// URL outside the cluster is refused.
	stranger, err := identity.New(ctx, identity.Options{URL: testIssuer, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	strange := (&oidcReplica{issuer: stranger}).mint(t)
	r1.mustRefuse(t, "a token of an issuer outside the cluster", strange)
	r2.mustRefuse(t, "a token of an issuer outside the cluster", strange)

	tok1, tok2 := r1.mint(t), r2.mint(t)
	// r2 came second: its key may be missing from what r1 read already.
	r1.waitVerdict(t, "r2's token", tok2, true)
	for _, r := range []*oidcReplica{r1, r2} {
		r.mustVerify(t, "r1's token", tok1)
		r.mustVerify(t, "r2's token", tok2)
	}

	// A planned rotation: the new key reaches r2, the old one stays.
	if _, err := r1.issuer.Rotate(ctx, false); err != nil {
		t.Fatal(err)
	}
	tok1b := r1.mint(t)
	r1.mustVerify(t, "r1's token of its new key", tok1b)
	r2.waitVerdict(t, "r1's token of its new key", tok1b, true)
	for _, r := range []*oidcReplica{r1, r2} {
		r.mustVerify(t, "r1's token of its rotated key", tok1)
		r.mustVerify(t, "r2's token", tok2)
	}

	// An emergency rotation: the current key is withdrawn, at once on r1,
	// and on r2 once its cache expired.
	if _, err := r1.issuer.Rotate(ctx, true); err != nil {
		t.Fatal(err)
	}
	tok1c := r1.mint(t)
	r1.mustRefuse(t, "r1's token of its withdrawn key", tok1b)
	r1.mustVerify(t, "r1's token of its newest key", tok1c)
	r2.waitVerdict(t, "r1's token of its withdrawn key", tok1b, false)
	r2.waitVerdict(t, "r1's token of its newest key", tok1c, true)
	r2.mustRefuse(t, "r1's token of its withdrawn key", tok1b)
	for _, r := range []*oidcReplica{r1, r2} {
		r.mustVerify(t, "r2's token", tok2)
	}
}
