package cluster

import (
	"crypto/sha256"
	"encoding/binary"
)

// Owner picks the member that should hold stack: the highest of
// score(member, stack) (rendezvous hashing). Every replica computes the
// same answer from the same members, and when a member joins or leaves
// only the stacks it gains or held move. Empty when there is no member.
func Owner(stack string, members []string) string {
	best, bestScore := "", uint64(0)
	for _, m := range members {
		s := score(m, stack)
		if best == "" || s > bestScore || (s == bestScore && m < best) {
			best, bestScore = m, s
		}
	}
	return best
}

// score hashes a member and a stack together; SHA-256 spreads similar
// names (node-1, node-2) evenly, which FNV does not.
func score(member, stack string) uint64 {
	h := sha256.New()
	h.Write([]byte(member))
	h.Write([]byte{0})
	h.Write([]byte(stack))
	var sum [sha256.Size]byte
	return binary.BigEndian.Uint64(h.Sum(sum[:0]))
}
