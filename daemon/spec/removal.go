package spec

import (
	"fmt"
	"maps"
	"slices"
)

// MassRemoval says why applying next would remove too many of cur's
// stacks: all of them or more than half, in all or in one source (a Git
// directory emptied by a commit is one source of several). Empty means it
// may go ahead.
func MassRemoval(cur, next *Config) string {
	if cur == nil || len(cur.Stacks) == 0 {
		return ""
	}
	total, removed := map[string]int{}, map[string]int{}
	for _, s := range cur.Stacks {
		total[s.Source]++
		if next.Stack(s.Name) == nil {
			removed[s.Source]++
		}
	}
	all := 0
	for _, n := range removed {
		all += n
	}
	if tooMany(all, len(cur.Stacks)) {
		return fmt.Sprintf("the new config removes %d of the %d stacks; refusing it as a safeguard against an emptied or truncated config (allow it once with stackd reload --allow-removal %d, or start with --allow-mass-removal)", all, len(cur.Stacks), all)
	}
	for _, src := range slices.Sorted(maps.Keys(removed)) {
		if tooMany(removed[src], total[src]) {
			return fmt.Sprintf("the new config removes %d of the %d stacks of %s; refusing it as a safeguard against an emptied or truncated config (allow it once with stackd reload --allow-removal %d, or start with --allow-mass-removal)", removed[src], total[src], src, all)
		}
	}
	return ""
}

// RemovedCount is how many stacks of cur next lacks.
func RemovedCount(cur, next *Config) int {
	n := 0
	for _, s := range cur.Stacks {
		if next.Stack(s.Name) == nil {
			n++
		}
	}
	return n
}

func tooMany(removed, of int) bool {
	return removed > 0 && (removed == of || removed*2 > of)
}
