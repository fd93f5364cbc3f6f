package cluster

import (
	"fmt"
	"testing"
)

func TestOwner(t *testing.T) {
	for _, tc := range []struct {
		name    string
		members []string
		want    string
	}{
		{"no member", nil, ""},
		{"one member", []string{"a"}, "a"},
	} {
		if got := Owner("stack", tc.members); got != tc.want {
			t.Errorf("%s: Owner = %q, want %q", tc.name, got, tc.want)
		}
	}
	// The order of the members does not matter.
	if a, b := Owner("s", []string{"n1", "n2", "n3"}), Owner("s", []string{"n3", "n1", "n2"}); a != b {
		t.Errorf("Owner depends on order: %q vs %q", a, b)
	}
}

// TestOwnerSpreadsAndMovesLittle checks rendezvous hashing's two
// promises on 3,000 stacks: each of three members gets about a third, and
// when one leaves only its stacks move, evenly to the other two.
func TestOwnerSpreadsAndMovesLittle(t *testing.T) {
	members := []string{"node-1", "node-2", "node-3"}
	const n = 3000
	count := map[string]int{}
	before := map[string]string{}
	for i := range n {
		s := fmt.Sprintf("stack-%d", i)
		before[s] = Owner(s, members)
		count[before[s]]++
	}
	for _, m := range members {
		if c := count[m]; c < n/3*85/100 || c > n/3*115/100 {
			t.Errorf("%s holds %d of %d stacks", m, c, n)
		}
	}
	gained := map[string]int{}
	for s, was := range before {
		now := Owner(s, members[:2])
		switch {
		case was != "node-3" && now != was:
			t.Fatalf("%s moved from %s to %s though %s is still there", s, was, now, was)
		case was == "node-3":
			gained[now]++
		}
	}
	if a, b := gained["node-1"], gained["node-2"]; a < b*7/10 || b < a*7/10 {
		t.Errorf("node-3's stacks went %d to node-1 and %d to node-2", a, b)
	}
}
