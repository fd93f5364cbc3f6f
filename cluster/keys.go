package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// The public halves of the replicas' OpenID signing keys (identity's
// Directory) live under oidc-keys/<kid>, each value a publishedKey (the
// public JWK and until when it is listed) bound to a lease of its own
// that ends then: the key leaves etcd by itself when its last token
// expired, even if its replica never comes back. The lease alone is not
// exact: unless etcd checkpoints leases (its LeaseCheckpoint feature,
// off by default), a new etcd leader grants every lease its whole TTL
// again, and a month-long lease that meets a leader change every month
// would never end. So PublishedKeys also leaves out, and deletes, a key
// whose time is over.
//
// These writes are not fenced, and need no session: a replica cut off
// from the cluster, or between two sessions, still signs tokens with its
// key, and the clouds must still find that key in whichever replica's
// JWKS they read. That is safe because only public keys are written here
// (PublishKey refuses a JWK with private members): a key lists no more
// than what any JWKS shows to anyone, and a replica that is cut off
// only lists its own keys, for as long as it asked, or withdraws them.

// privateJWKMembers are the members of a JWK that only a private key
// has (RFC 7518: RSA's d, p, q, dp, dq, qi and oth, EC's and OKP's d, a
// symmetric key's k).
var privateJWKMembers = []string{"d", "p", "q", "dp", "dq", "qi", "oth", "k"}

// publishedKey is the value of oidc-keys/<kid>.
type publishedKey struct {
	JWK   json.RawMessage `json:"jwk"`
	Until time.Time       `json:"until"`
}

// PublishKey lists jwk, a public JWK, under kid until the time given:
// it is put with that time, bound to a lease of its own granted for what
// is left until then (at least a second). Publishing a kid again replaces its value and its
// lease; the previous lease is revoked, which deletes nothing since the
// put bound the key to the new one (and should the revocation fail, that
// lease only lapses, as empty). A JWK with private members is refused:
// secrets never go to etcd in clear.
func (c *Cluster) PublishKey(ctx context.Context, kid string, jwk []byte, until time.Time) error {
	if err := checkKeyID(kid); err != nil {
		return fmt.Errorf("cluster: publish signing key: %w", err)
	}
	if err := checkPublicJWK(kid, jwk); err != nil {
		return fmt.Errorf("cluster: publish signing key %s: %w", kid, err)
	}
	value, err := json.Marshal(publishedKey{JWK: jwk, Until: until.UTC()})
	if err != nil {
		return fmt.Errorf("cluster: publish signing key %s: %w", kid, err)
	}
	ttl := max(int64(1), int64((time.Until(until)+time.Second-1)/time.Second))
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	lease, err := c.cli.Grant(ctx, ttl)
	if err != nil {
		return fmt.Errorf("cluster: publish signing key %s: lease: %w", kid, err)
	}
	resp, err := c.cli.Put(ctx, c.key("oidc-keys/", kid), string(value), clientv3.WithLease(lease.ID), clientv3.WithPrevKV())
	if err != nil {
		c.revoke(lease.ID)
		return fmt.Errorf("cluster: publish signing key %s: %w", kid, err)
	}
	if prev := resp.PrevKv; prev != nil && prev.Lease != 0 && clientv3.LeaseID(prev.Lease) != lease.ID {
		c.revoke(clientv3.LeaseID(prev.Lease))
	}
	return nil
}

// WithdrawKey removes kid at once, and revokes its lease.
func (c *Cluster) WithdrawKey(ctx context.Context, kid string) error {
	if err := checkKeyID(kid); err != nil {
		return fmt.Errorf("cluster: withdraw signing key: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	resp, err := c.cli.Delete(ctx, c.key("oidc-keys/", kid), clientv3.WithPrevKV())
	if err != nil {
		return fmt.Errorf("cluster: withdraw signing key %s: %w", kid, err)
	}
	for _, prev := range resp.PrevKvs {
		if prev.Lease != 0 {
			c.revoke(clientv3.LeaseID(prev.Lease))
		}
	}
	return nil
}

// PublishedKeys are the JWKs listed now, from every replica, by kid. A
// key whose time is over is left out, and deleted unless it was
// published again meanwhile.
func (c *Cluster) PublishedKeys(ctx context.Context) ([][]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	resp, err := c.cli.Get(ctx, c.opts.Prefix+"oidc-keys/", clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("cluster: read the published signing keys: %w", err)
	}
	now := time.Now()
	out := make([][]byte, 0, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		var k publishedKey
		if err := json.Unmarshal(kv.Value, &k); err != nil || len(k.JWK) == 0 {
			c.log.Warn("a published signing key is unreadable: left out", "key", string(kv.Key))
			continue
		}
		if !now.Before(k.Until) {
			del, err := c.cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(string(kv.Key)), "=", kv.ModRevision)).
				Then(clientv3.OpDelete(string(kv.Key))).Commit()
			if err == nil && del.Succeeded && kv.Lease != 0 {
				c.revoke(clientv3.LeaseID(kv.Lease))
			}
			continue
		}
		out = append(out, k.JWK)
	}
	return out, nil
}

// revoke ends a lease that holds no key of ours any more, if etcd
// answers in a second; else the lease lapses by itself.
func (c *Cluster) revoke(id clientv3.LeaseID) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, _ = c.cli.Revoke(ctx, id)
}

// checkKeyID accepts a key ID that is one segment of a key.
func checkKeyID(kid string) error {
	if kid == "" || strings.ContainsAny(kid, "/\x00") {
		return fmt.Errorf("key ID %q: want a non-empty ID without a slash", kid)
	}
	return nil
}

// checkPublicJWK accepts a JSON object without private members, whose
// kid, if it has one, is kid.
func checkPublicJWK(kid string, jwk []byte) error {
	var members map[string]json.RawMessage
	if err := json.Unmarshal(jwk, &members); err != nil || members == nil {
		return errors.New("not a JWK: want a JSON object")
	}
	// Compared without case: some JSON readers (Go's encoding/json
	// among them) match members to fields so, and would read "D" as d.
	for name := range members {
		if slices.Contains(privateJWKMembers, strings.ToLower(name)) {
			return fmt.Errorf("refused: the JWK has the private member %q (only public keys are published)", name)
		}
	}
	if raw, ok := members["kid"]; ok {
		var got string
		if err := json.Unmarshal(raw, &got); err != nil || got != kid {
			return fmt.Errorf("the JWK's kid %s is not %q", raw, kid)
		}
	}
	return nil
}
