package runner

import "syscall"

// procAttr puts the pulumi CLI in a process group of its own (so that it
// is interrupted and killed as a whole), and has Linux kill it when
// stackd dies: a replica killed during an update must not leave a CLI
// running that another replica's update would overlap once the lock is
// broken.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
