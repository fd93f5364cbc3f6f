package cluster

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// PulumiClaims are the claims of Pulumi stacks (runner.Claims) in etcd,
// under claims/<identity>, each holding the name of the stack that
// claimed it. Every replica shares them: two stacks held by two
// replicas cannot both claim one Pulumi stack. A claim outlives its
// replica's session (it is bound to no lease); it ends when its stack is
// removed with its Pulumi stack.
type PulumiClaims struct{ c *Cluster }

// PulumiClaims are the cluster's claims of Pulumi stacks.
func (c *Cluster) PulumiClaims() PulumiClaims { return PulumiClaims{c: c} }

// Claim makes stack the owner of identity in one transaction unless the
// key exists, and returns the owner: stack, or whoever holds the key.
func (p PulumiClaims) Claim(ctx context.Context, identity, stack string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	key := p.c.key("claims/", identity)
	resp, err := p.c.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, stack)).
		Else(clientv3.OpGet(key)).Commit()
	if err != nil {
		return "", fmt.Errorf("cluster: claim a Pulumi stack: %w", err)
	}
	if resp.Succeeded {
		return stack, nil
	}
	kvs := resp.Responses[0].GetResponseRange().Kvs
	if len(kvs) == 0 { // the compare and the get see one revision
		return "", fmt.Errorf("cluster: claim a Pulumi stack: no claim under %s", key)
	}
	return string(kvs[0].Value), nil
}

// Release deletes identity's claim if stack holds it, compared in the
// same transaction: another stack's claim stays.
func (p PulumiClaims) Release(ctx context.Context, identity, stack string) error {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	key := p.c.key("claims/", identity)
	if _, err := p.c.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.Value(key), "=", stack)).
		Then(clientv3.OpDelete(key)).Commit(); err != nil {
		return fmt.Errorf("cluster: release a Pulumi stack's claim: %w", err)
	}
	return nil
}
