package runner

import (
	"os"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// procAttr puts the pulumi CLI in a session and process group of its own
// (so that it is interrupted and killed as a whole), and has Linux kill it
// when stackd dies: a replica killed during an update must not leave a
// CLI running that another replica's update would overlap once the lock
// is broken. A session of its own also keeps every process of its tree
// out of stackd's process group, which a process may join only from the
// same session, and which the orphan reaper spares; and it has no
// controlling terminal to reach.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGKILL}
}

// orphansComeHere reports whether orphaned processes are reparented to
// this process: it is PID 1 (a container without an init) or a child
// subreaper (PR_SET_CHILD_SUBREAPER).
func orphansComeHere() bool {
	if os.Getpid() == 1 {
		return true
	}
	// The C int the kernel writes. The conversion stays in the call of
	// the assembly Syscall: only there is on kept in place until the
	// call returns (unix.Prctl is Go code, where a stack that grows
	// would move on away).
	var on int32
	_, _, errno := unix.Syscall6(unix.SYS_PRCTL, unix.PR_GET_CHILD_SUBREAPER, uintptr(unsafe.Pointer(&on)), 0, 0, 0, 0)
	return errno == 0 && on != 0
}
