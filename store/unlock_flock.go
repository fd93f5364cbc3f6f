//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package store

import (
	"os"
	"syscall"
)

// releaseLock drops bbolt's flock on f, left behind by a panic in
// bbolt.Open. Closing f is not enough: the lock belongs to the open file,
// which the leaked memory mapping keeps referenced.
func releaseLock(f *os.File) {
	_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
}
