package web

import (
	"crypto/sha256"
	"crypto/subtle"
)

// equalSecret compares two secrets in constant time; hashing first makes
// the time independent of their lengths too.
func equalSecret(got, want string) bool {
	g, w := sha256.Sum256([]byte(got)), sha256.Sum256([]byte(want))
	return subtle.ConstantTimeCompare(g[:], w[:]) == 1
}
