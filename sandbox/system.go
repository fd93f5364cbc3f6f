package sandbox

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/landlock-lsm/go-landlock/landlock"
	llsys "github.com/landlock-lsm/go-landlock/landlock/syscall"

	"github.com/stackd/stackd/sandbox/internal/early"
)

// System paths every confined process may use, and where it may list
// directories: see the early package, whose plugin wrapper grants the
// same.
var (
	systemRODirs  = early.SystemRODirs
	systemROFiles = early.SystemROFiles
	systemRWFiles = early.SystemRWFiles
)

const listable = early.Listable

func systemRules() []landlock.Rule {
	return []landlock.Rule{
		landlock.PathAccess(llsys.AccessFSReadDir, listable),
		landlock.RODirs(systemRODirs...).IgnoreIfMissing(),
		landlock.ROFiles(systemROFiles...).IgnoreIfMissing(),
		landlock.RWFiles(systemRWFiles...).IgnoreIfMissing(),
	}
}

// dropCapabilities empties the bounding, ambient, inheritable, permitted
// and effective capability sets of the calling thread, so that a command
// started by a daemon that runs as root execs with none: it cannot read
// the daemon's /proc entries (see ProtectSelf) or override file modes.
// For a daemon without capabilities it changes nothing.
func dropCapabilities() error {
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("clear ambient capabilities: %w", err)
	}
	for c := 0; c <= 63; c++ {
		err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0)
		if errors.Is(err, unix.EINVAL) {
			break // past the kernel's last capability
		}
		if err != nil && !errors.Is(err, unix.EPERM) {
			return fmt.Errorf("drop capability %d from the bounding set: %w", c, err)
		}
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var none [2]unix.CapUserData
	if err := unix.Capset(&hdr, &none[0]); err != nil {
		return fmt.Errorf("capset: %w", err)
	}
	return nil
}
