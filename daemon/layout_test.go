package daemon

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestImportRules keeps the package layout docs/contributing.md describes: the
// spec is pure, notifications and the loop import no sibling of stackd's,
// and the leaves (gitwatch, runner, store, web, cluster, auth, …) never import each
// other.
func TestImportRules(t *testing.T) {
	const mod = "github.com/stackd/stackd/"
	deps := func(pkg string) []string {
		out, err := exec.Command("go", "list", "-deps", mod+pkg).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", pkg, err)
		}
		return strings.Fields(string(out))
	}
	forbid := func(pkg string, bad func(dep string) bool) {
		for _, dep := range deps(pkg) {
			if dep != mod+pkg && bad(dep) {
				t.Errorf("%s depends on %s", pkg, dep)
			}
		}
	}
	heavy := []string{"go.etcd.io/bbolt", "github.com/go-git/", "github.com/pulumi/", "net/http"}
	isHeavy := func(dep string) bool {
		return slices.ContainsFunc(heavy, func(h string) bool { return strings.HasPrefix(dep, h) })
	}
	forbid("daemon/spec", func(dep string) bool { return strings.HasPrefix(dep, mod) || isHeavy(dep) })
	forbid("daemon/notify", func(dep string) bool { return strings.HasPrefix(dep, mod) && dep != mod+"daemon/spec" })
	for _, pure := range []string{"daemon/livelog", "daemon/sched"} {
		forbid(pure, func(dep string) bool { return strings.HasPrefix(dep, mod) || isHeavy(dep) })
	}
	// The loop's pure parts that work on the shared words import those
	// words and the spec, never the loop; gate reads decide's Observation.
	words := []string{mod + "model", mod + "daemon/spec"}
	for _, pure := range []string{"daemon/scrub", "daemon/conditions", "daemon/decide", "daemon/gate", "daemon/resource", "daemon/resolve"} {
		forbid(pure, func(dep string) bool {
			return strings.HasPrefix(dep, mod) && !slices.Contains(words, dep) && dep != mod+"daemon/decide" || isHeavy(dep)
		})
	}
	forbid("daemon/window", func(dep string) bool {
		return strings.HasPrefix(dep, mod) && dep != mod+"daemon/spec" || isHeavy(dep)
	})
	forbid("daemon/review", func(dep string) bool {
		return strings.HasPrefix(dep, mod) && dep != mod+"daemon/spec" || isHeavy(dep)
	})
	// The shared words import only the spec; the packages of the
	// contracts between leaves (access, audit) import only the words.
	forbid("model", func(dep string) bool {
		return strings.HasPrefix(dep, mod) && dep != mod+"daemon/spec" || isHeavy(dep)
	})
	for _, contract := range []string{"access", "audit"} {
		forbid(contract, func(dep string) bool {
			return strings.HasPrefix(dep, mod) && dep != mod+"model" && dep != mod+"daemon/spec" || isHeavy(dep)
		})
	}
	forbid("daemon", func(dep string) bool {
		return strings.HasPrefix(dep, mod) && !strings.HasPrefix(dep, mod+"daemon/") && dep != mod+"model"
	})
	// auth needs nothing of the loop: its words are model's and access's.
	forbid("auth", func(dep string) bool { return dep == mod+"daemon" })
	leaves := []string{"gitwatch", "runner", "store", "web", "cluster", "forge", "preview", "auth", "policy"}
	for _, leaf := range leaves {
		forbid(leaf, func(dep string) bool {
			return slices.ContainsFunc(leaves, func(l string) bool { return dep == mod+l || strings.HasPrefix(dep, mod+l+"/") })
		})
	}
}
