//go:build !linux

package runner

import "syscall"

// procAttr puts the pulumi CLI in a process group of its own, so that it
// is interrupted and killed as a whole.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

// orphansComeHere is false: the orphan reaper finds ended orphans in
// Linux's /proc.
func orphansComeHere() bool { return false }
