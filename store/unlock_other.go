//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package store

import "os"

// releaseLock does nothing where bbolt does not lock with flock.
func releaseLock(*os.File) {}
