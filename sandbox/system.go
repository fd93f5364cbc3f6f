package sandbox

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"

	"github.com/landlock-lsm/go-landlock/landlock"
	llsys "github.com/landlock-lsm/go-landlock/landlock/syscall"
)

// System paths every confined process may use. /etc is not among them as
// a whole: operators keep tokens and secrets there (/etc/stackd); only
// what name resolution, TLS, time zones and the dynamic linker read is.
var (
	systemRODirs = []string{
		"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/opt",
		// Certificates, not private keys: /etc/ssl/private and
		// /etc/pki/tls/private stay closed.
		"/etc/ssl/certs", "/etc/pki/ca-trust", "/etc/pki/tls/certs", "/etc/ca-certificates", "/etc/crypto-policies",
		"/etc/alternatives", "/etc/ld.so.conf.d",
		// /proc/<pid> of a process outside the sandbox is still closed:
		// Landlock denies ptrace access to it, which environ, mem, fd
		// and maps need.
		"/proc", "/sys",
	}
	systemROFiles = []string{
		"/etc/resolv.conf", "/etc/hosts", "/etc/nsswitch.conf", "/etc/host.conf",
		"/etc/gai.conf", "/etc/passwd", "/etc/group", "/etc/localtime", "/etc/timezone",
		"/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/os-release", "/etc/mime.types",
		"/etc/protocols", "/etc/services",
		"/etc/ssl/openssl.cnf", "/etc/ssl/cert.pem", "/etc/pki/tls/openssl.cnf", "/etc/pki/tls/cert.pem",
		"/dev/random", "/dev/urandom",
	}
	systemRWFiles = []string{"/dev/null", "/dev/zero", "/dev/full"}
)

// listable is where confined processes may list directories: every
// name of the file system, no file's content. `pulumi install` reads
// every directory from the project's up to the root (looking for a
// policy pack) and fails at the first it cannot.
const listable = "/"

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
