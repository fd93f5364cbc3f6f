package cluster

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// openKeys is a Cluster connected to the shared etcd under a prefix of
// its own, never started: the signing keys need no session.
func openKeys(t *testing.T) *Cluster {
	t.Helper()
	c, err := Open(context.Background(), Options{Endpoints: etcd(t), Prefix: newPrefix(), Node: "keys"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func publicJWK(kid string) []byte {
	return []byte(`{"kty":"RSA","kid":"` + kid + `","alg":"RS256","use":"sig","n":"0vx7agoebGcQSuuPiLJXZptN9nndrQmbXEps2aiAFbWhM78LhWx4cbbfAAtVT86zwu1RK7aPFFxuhDR1L6tSoc_BJECPebWKRXjBZCiFV4n3oknjhMstn64tZ_2W-5JsGY4Hc5n9yBXArwl93lqt7_RN5w6Cf0h4QyQ5v-65YGjQR0_FDW2QvzqY368QQMicAtaSqzs8KJZgnYb9c7d0zgdAZHzu6qMQvRL5hajrn1n91CbOpbISD08qNLyrdkt-bFTWhAI4vMQFh6WeZu0fM4lFd2NcRwr3XPksINHaQ-G_xBniIqbw0Ls1jF44-csFCur-kEgU8awapJzKnqDKgw","e":"AQAB"}`)
}

// published are the values listed now.
func published(t *testing.T, c *Cluster) []string {
	t.Helper()
	keys, err := c.PublishedKeys(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, k := range keys {
		out = append(out, string(k))
	}
	slices.Sort(out)
	return out
}

// leaseOf is the lease kid's key is bound to now; 0 when it is absent.
func leaseOf(t *testing.T, c *Cluster, kid string) clientv3.LeaseID {
	t.Helper()
	resp, err := c.cli.Get(context.Background(), c.key("oidc-keys/", kid))
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) == 0 {
		return 0
	}
	return clientv3.LeaseID(resp.Kvs[0].Lease)
}

// leaseEnded says whether etcd no longer knows the lease.
func leaseEnded(t *testing.T, c *Cluster, id clientv3.LeaseID) bool {
	t.Helper()
	resp, err := c.cli.TimeToLive(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return resp.TTL == -1
}

// within waits for cond, failing the test after limit.
func within(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", limit, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestSigningKeysPublishListWithdraw: keys published by two replicas
// (neither with a session) are listed by both, under their own prefix
// only; a withdrawn key is gone at once, with its lease.
func TestSigningKeysPublishListWithdraw(t *testing.T) {
	a := openKeys(t)
	b, err := Open(context.Background(), Options{Endpoints: a.opts.Endpoints, Prefix: a.opts.Prefix, Node: "keys-b"})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	other := openKeys(t) // another cluster on the same etcd
	ctx := context.Background()
	until := time.Now().Add(time.Hour)
	if err := a.PublishKey(ctx, "ka", publicJWK("ka"), until); err != nil {
		t.Fatal(err)
	}
	if err := b.PublishKey(ctx, "kb", publicJWK("kb"), until); err != nil {
		t.Fatal(err)
	}
	if err := other.PublishKey(ctx, "kx", publicJWK("kx"), until); err != nil {
		t.Fatal(err)
	}
	want := []string{string(publicJWK("ka")), string(publicJWK("kb"))}
	for _, c := range []*Cluster{a, b} {
		if got := published(t, c); !slices.Equal(got, want) {
			t.Fatalf("%s lists %q, want %q", c.opts.Node, got, want)
		}
	}
	lease := leaseOf(t, a, "ka")
	if lease == 0 {
		t.Fatal("ka is bound to no lease")
	}
	if ttl, err := a.cli.TimeToLive(ctx, lease); err != nil || ttl.GrantedTTL < 3590 || ttl.GrantedTTL > 3601 {
		t.Errorf("ka's lease: %+v, %v; want about an hour", ttl, err)
	}
	if err := b.WithdrawKey(ctx, "ka"); err != nil {
		t.Fatal(err)
	}
	if got := published(t, a); !slices.Equal(got, want[1:]) {
		t.Errorf("after withdrawing ka: %q, want %q", got, want[1:])
	}
	if !leaseEnded(t, a, lease) {
		t.Error("ka's lease outlived its withdrawal")
	}
	if err := a.WithdrawKey(ctx, "ka"); err != nil {
		t.Errorf("withdrawing an absent key: %v", err)
	}
	if got := published(t, other); !slices.Equal(got, []string{string(publicJWK("kx"))}) {
		t.Errorf("the other cluster lists %q", got)
	}
}

// TestSigningKeyExpires: a key published until two seconds from now
// leaves etcd by itself, with its lease, no one doing anything more.
func TestSigningKeyExpires(t *testing.T) {
	c := openKeys(t)
	if err := c.PublishKey(context.Background(), "short", publicJWK("short"), time.Now().Add(2*time.Second)); err != nil {
		t.Fatal(err)
	}
	lease := leaseOf(t, c, "short")
	if lease == 0 {
		t.Fatal("the key was not put, or bound to no lease")
	}
	if ttl, err := c.cli.TimeToLive(context.Background(), lease); err != nil || ttl.GrantedTTL != 2 {
		t.Errorf("lease: %+v, %v; want a granted TTL of 2 s", ttl, err)
	}
	// Read in etcd, not listed: a listing deletes a key past its time.
	within(t, 30*time.Second, "the key leaves etcd with its lease", func() bool { return leaseOf(t, c, "short") == 0 })
	if !leaseEnded(t, c, lease) {
		t.Error("the key left etcd, its lease did not end")
	}
	if got := published(t, c); len(got) != 0 {
		t.Errorf("listed %q", got)
	}
}

// TestSigningKeyPastItsTime: a key whose time is over is not listed even
// while etcd keeps it (a lease a new etcd leader granted its whole TTL
// again, say), and the listing deletes it; a value that is no published
// key is left out.
func TestSigningKeyPastItsTime(t *testing.T) {
	c := openKeys(t)
	ctx := context.Background()
	if err := c.PublishKey(ctx, "live", publicJWK("live"), time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	over := `{"jwk":` + string(publicJWK("over")) + `,"until":"` + time.Now().Add(-time.Second).UTC().Format(time.RFC3339Nano) + `"}`
	if _, err := c.cli.Put(ctx, c.key("oidc-keys/", "over"), over); err != nil {
		t.Fatal(err)
	}
	if _, err := c.cli.Put(ctx, c.key("oidc-keys/", "raw"), string(publicJWK("raw"))); err != nil {
		t.Fatal(err)
	}
	if got := published(t, c); !slices.Equal(got, []string{string(publicJWK("live"))}) {
		t.Errorf("listed %q, want the live key alone", got)
	}
	if resp, err := c.cli.Get(ctx, c.key("oidc-keys/", "over")); err != nil || len(resp.Kvs) != 0 {
		t.Errorf("the key past its time is still in etcd: %v, %v", resp, err)
	}
}

// TestSigningKeyRepublished: publishing a kid again replaces its value
// and its lease, and extends its life: the first lease ends (revoked by
// the republish) and the key stays, bound to the new lease.
func TestSigningKeyRepublished(t *testing.T) {
	c := openKeys(t)
	ctx := context.Background()
	firstUntil := time.Now().Add(2 * time.Second)
	if err := c.PublishKey(ctx, "k1", []byte(`{"kty":"RSA","kid":"k1","n":"AQAB","e":"AQAB"}`), firstUntil); err != nil {
		t.Fatal(err)
	}
	first := leaseOf(t, c, "k1")
	if err := c.PublishKey(ctx, "k1", publicJWK("k1"), time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	second := leaseOf(t, c, "k1")
	if first == 0 || second == 0 || first == second {
		t.Fatalf("leases %x then %x: want two", first, second)
	}
	within(t, 30*time.Second, "the first lease ends", func() bool { return leaseEnded(t, c, first) })
	// And past the end the first publish asked for.
	time.Sleep(time.Until(firstUntil.Add(time.Second)))
	if got := published(t, c); !slices.Equal(got, []string{string(publicJWK("k1"))}) {
		t.Errorf("after the first lease ended: %q", got)
	}
	if leaseOf(t, c, "k1") != second || leaseEnded(t, c, second) {
		t.Error("the key is not bound to its new lease")
	}
}

// TestEtcdPutRebindsLease is what PublishKey relies on: a put with a new
// lease binds the key to it, so that the old lease ending, revoked or by
// itself, leaves the newer put alone.
func TestEtcdPutRebindsLease(t *testing.T) {
	c := openKeys(t)
	ctx := context.Background()
	key := c.key("oidc-keys/", "rebind")
	grant := func(ttl int64) clientv3.LeaseID {
		l, err := c.cli.Grant(ctx, ttl)
		if err != nil {
			t.Fatal(err)
		}
		return l.ID
	}
	for _, revoked := range []bool{true, false} {
		old, fresh := grant(2), grant(3600)
		if _, err := c.cli.Put(ctx, key, "old", clientv3.WithLease(old)); err != nil {
			t.Fatal(err)
		}
		if _, err := c.cli.Put(ctx, key, "new", clientv3.WithLease(fresh)); err != nil {
			t.Fatal(err)
		}
		if revoked {
			if _, err := c.cli.Revoke(ctx, old); err != nil {
				t.Fatal(err)
			}
		}
		within(t, 30*time.Second, "the old lease ends", func() bool { return leaseEnded(t, c, old) })
		resp, err := c.cli.Get(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "new" || clientv3.LeaseID(resp.Kvs[0].Lease) != fresh {
			t.Fatalf("revoked %v: after the old lease ended the key is %v", revoked, resp.Kvs)
		}
	}
}

// TestSigningKeyPrivateRefused: a JWK with a private member (in any
// case), or anything but a JSON object, or a kid not its own, is never
// written.
func TestSigningKeyPrivateRefused(t *testing.T) {
	c := openKeys(t)
	ctx := context.Background()
	pub := string(publicJWK("k"))
	withMember := func(m string) []byte { return []byte(strings.TrimSuffix(pub, "}") + `,"` + m + `":"c2VjcmV0"}`) }
	cases := map[string][]byte{
		"rsa d":         withMember("d"),
		"rsa p":         withMember("p"),
		"rsa q":         withMember("q"),
		"rsa dp":        withMember("dp"),
		"rsa dq":        withMember("dq"),
		"rsa qi":        withMember("qi"),
		"rsa D":         withMember("D"),
		"symmetric":     []byte(`{"kty":"oct","kid":"k","k":"c2VjcmV0"}`),
		"ec private":    []byte(`{"kty":"EC","kid":"k","crv":"P-256","x":"AQ","y":"AQ","d":"AQ"}`),
		"array":         []byte(`[` + pub + `]`),
		"string":        []byte(`"` + pub + `"`),
		"null":          []byte(`null`),
		"not JSON":      []byte(`kty=RSA`),
		"empty":         nil,
		"another's kid": publicJWK("other"),
	}
	for name, jwk := range cases {
		if err := c.PublishKey(ctx, "k", jwk, time.Now().Add(time.Hour)); err == nil {
			t.Errorf("%s: published %s", name, jwk)
		} else if strings.Contains(err.Error(), "c2VjcmV0") {
			t.Errorf("%s: the error shows the secret: %v", name, err)
		}
	}
	for _, kid := range []string{"", "a/b"} {
		if err := c.PublishKey(ctx, kid, publicJWK(kid), time.Now().Add(time.Hour)); err == nil {
			t.Errorf("kid %q published", kid)
		}
	}
	if got := published(t, c); len(got) != 0 {
		t.Errorf("listed after refusals: %q", got)
	}
	if err := c.PublishKey(ctx, "k", publicJWK("k"), time.Now().Add(time.Hour)); err != nil {
		t.Errorf("a public JWK: %v", err)
	}
}
