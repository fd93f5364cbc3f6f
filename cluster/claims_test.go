package cluster

import (
	"context"
	"testing"
)

// TestPulumiClaims: the first stack to claim a Pulumi stack holds it,
// on whichever replica it asks; another stack is told the owner; a
// release by another stack leaves the claim, the owner's frees it.
func TestPulumiClaims(t *testing.T) {
	eps := etcd(t)
	prefix := newPrefix()
	one := openAt(t, eps, prefix, "node-1").PulumiClaims()
	two := openAt(t, eps, prefix, "node-2").PulumiClaims()
	ctx := context.Background()
	claim := func(p PulumiClaims, stack, want string) {
		t.Helper()
		if owner, err := p.Claim(ctx, "id-1", stack); err != nil || owner != want {
			t.Fatalf("%s claims: owner %q, %v; want %q", stack, owner, err, want)
		}
	}
	claim(one, "first", "first")
	claim(one, "first", "first")
	claim(two, "first", "first")
	claim(two, "second", "first")
	if owner, err := two.Claim(ctx, "id-2", "second"); err != nil || owner != "second" {
		t.Fatalf("another identity: owner %q, %v", owner, err)
	}
	if err := two.Release(ctx, "id-1", "second"); err != nil {
		t.Fatal(err)
	}
	claim(two, "second", "first")
	if err := one.Release(ctx, "id-1", "first"); err != nil {
		t.Fatal(err)
	}
	claim(two, "second", "second")
	claim(one, "first", "second")
	if err := one.Release(ctx, "id-3", "first"); err != nil {
		t.Errorf("releasing what nobody claimed: %v", err)
	}
	other := openAt(t, eps, newPrefix(), "node-1").PulumiClaims()
	if owner, err := other.Claim(ctx, "id-1", "first"); err != nil || owner != "first" {
		t.Errorf("another cluster's prefix: owner %q, %v", owner, err)
	}
}
