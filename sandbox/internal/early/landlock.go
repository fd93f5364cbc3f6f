package early

import (
	"syscall"
	"unsafe"
)

// Landlock's access rights, as go-landlock's syscall package names them.
const (
	accessExecute = 1 << iota
	accessWriteFile
	accessReadFile
	accessReadDir
	accessRemoveDir
	accessRemoveFile
	accessMakeChar
	accessMakeDir
	accessMakeReg
	accessMakeSock
	accessMakeFifo
	accessMakeBlock
	accessMakeSym
	accessRefer
	accessTruncate
	accessIoctlDev
)

const (
	netBindTCP = 1 << iota
	netConnectTCP
)

const (
	scopeAbstractUnixSocket = 1 << iota
	scopeSignal
)

// What the sandbox restricts: Landlock ABI 7's file system rights and
// IPC scopes, and its TCP rights when ports are named (go-landlock's
// landlock.V7).
const (
	handledFS     = accessIoctlDev<<1 - 1
	handledNet    = netBindTCP | netConnectTCP
	handledScoped = scopeAbstractUnixSocket | scopeSignal
)

// The rights of go-landlock's rules RODirs, ROFiles, RWDirs and RWFiles.
const (
	fileRights = accessExecute | accessWriteFile | accessTruncate | accessReadFile
	readRights = accessExecute | accessReadFile | accessReadDir
	rwRights   = readRights | accessWriteFile | accessRemoveDir | accessRemoveFile | accessMakeChar |
		accessMakeDir | accessMakeReg | accessMakeSock | accessMakeFifo | accessMakeBlock |
		accessMakeSym | accessTruncate
	roDirs  = readRights
	roFiles = readRights & fileRights
	rwDirs  = rwRights
	rwFiles = rwRights & fileRights
)

// System paths every confined process may use (the sandbox package's
// system rules). /etc is not among them as a whole: operators keep tokens
// and secrets there (/etc/stackd); only what name resolution, TLS, time
// zones and the dynamic linker read is.
var (
	SystemRODirs = []string{
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
	SystemROFiles = []string{
		"/etc/resolv.conf", "/etc/hosts", "/etc/nsswitch.conf", "/etc/host.conf",
		"/etc/gai.conf", "/etc/passwd", "/etc/group", "/etc/localtime", "/etc/timezone",
		"/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/os-release", "/etc/mime.types",
		"/etc/protocols", "/etc/services",
		"/etc/ssl/openssl.cnf", "/etc/ssl/cert.pem", "/etc/pki/tls/openssl.cnf", "/etc/pki/tls/cert.pem",
		"/dev/random", "/dev/urandom",
	}
	SystemRWFiles = []string{"/dev/null", "/dev/zero", "/dev/full"}
)

// Listable is where confined processes may list directories: every name
// of the file system, no file's content. `pulumi install` reads every
// directory from the project's up to the root (looking for a policy
// pack) and fails at the first it cannot.
const Listable = "/"

// Landlock's system calls and flags.
const (
	createRulesetVersion = 1 << 0
	createRulesetErrata  = 1 << 1
	ruleTypePathBeneath  = 1
	ruleTypeNetPort      = 2
	prSetNoNewPrivs      = 38
	oPath                = 0x200000
)

// fsRule grants access to paths; missing paths are skipped when
// ignoreMissing, an error otherwise.
type fsRule struct {
	access        uint64
	paths         []string
	ignoreMissing bool
}

// abiVersion is the Landlock ABI the kernel offers, as go-landlock
// counts it: 0 without Landlock, and 5 for a kernel of ABI 6 or later
// whose signal scoping is not fixed (erratum 2).
func abiVersion() int {
	v, _, e := syscall.RawSyscall(sysLandlockCreateRuleset, 0, 0, createRulesetVersion)
	if e != 0 || int(v) < 1 {
		return 0
	}
	abi := int(v)
	if abi >= 6 {
		errata, _, e := syscall.RawSyscall(sysLandlockCreateRuleset, 0, 0, createRulesetErrata)
		if e != 0 || errata&0x2 == 0 {
			abi = 5
		}
	}
	return abi
}

// supportedFS, supportedNet and supportedScoped are what the kernel's
// Landlock ABI can restrict (ABI 1 and later).
func supportedFS(abi int) uint64 {
	switch {
	case abi >= 5:
		return accessIoctlDev<<1 - 1
	case abi >= 3:
		return accessTruncate<<1 - 1
	case abi == 2:
		return accessRefer<<1 - 1
	}
	return accessMakeSym<<1 - 1
}

func supportedNet(abi int) uint64 {
	if abi >= 4 {
		return netBindTCP | netConnectTCP
	}
	return 0
}

func supportedScoped(abi int) uint64 {
	if abi >= 6 {
		return scopeAbstractUnixSocket | scopeSignal
	}
	return 0
}

// rules are the rules of p: the system's, then p's paths (those that
// exist, directories and other files apart) and ports.
func rules(p policy) ([]fsRule, []uint16) {
	roD, roF := splitDirs(p.ro)
	rwD, rwF := splitDirs(p.rw)
	return []fsRule{
		{accessReadDir, []string{Listable}, false},
		{roDirs, SystemRODirs, true},
		{roFiles, SystemROFiles, true},
		{rwFiles, SystemRWFiles, true},
		{roDirs, roD, false},
		{roFiles, roF, false},
		{rwDirs | accessRefer, rwD, false},
		{rwFiles, rwF, false},
	}, p.tcp
}

// restrict confines the calling thread, and what it execs, by p: the
// sandbox package's restrict, done as go-landlock's best effort does it
// for an ABI of 2 or later. It returns what failed, or "".
func restrict(p policy, abi int) string {
	fsRules, ports := rules(p)
	attr := rulesetAttr{
		handledFS: handledFS & supportedFS(abi),
		scoped:    handledScoped & supportedScoped(abi),
	}
	if len(ports) > 0 {
		attr.handledNet = handledNet & supportedNet(abi)
	}
	fd, _, e := syscall.RawSyscall(sysLandlockCreateRuleset, uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr), 0)
	if e != 0 {
		return "landlock_create_ruleset: " + e.Error()
	}
	defer syscall.Close(int(fd))
	for _, r := range fsRules {
		access := r.access & attr.handledFS
		if access == 0 {
			continue
		}
		for _, path := range r.paths {
			if err := addPath(int(fd), path, access); err != nil {
				if r.ignoreMissing && err == syscall.ENOENT {
					continue
				}
				return "populating ruleset for " + quote(path) + ": " + err.Error()
			}
		}
	}
	for _, port := range ports {
		access := netConnectTCP & attr.handledNet
		if access == 0 {
			continue
		}
		rule := netPortAttr{access: access, port: uint64(port)}
		if _, _, e := syscall.RawSyscall6(sysLandlockAddRule, fd, ruleTypeNetPort, uintptr(unsafe.Pointer(&rule)), 0, 0, 0); e != 0 {
			return "landlock_add_rule for port " + itoa(int(port)) + ": " + e.Error()
		}
	}
	if _, _, e := syscall.RawSyscall6(syscall.SYS_PRCTL, prSetNoNewPrivs, 1, 0, 0, 0, 0); e != 0 {
		return "prctl(PR_SET_NO_NEW_PRIVS): " + e.Error()
	}
	if _, _, e := syscall.RawSyscall(sysLandlockRestrictSelf, fd, 0, 0); e != 0 {
		return "landlock_restrict_self: " + e.Error()
	}
	return ""
}

// addPath adds a rule granting access beneath path.
func addPath(rulesetFD int, path string, access uint64) error {
	fd, err := syscall.Open(path, oPath|syscall.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer syscall.Close(fd)
	rule := pathBeneathAttr{access: access, parentFD: int32(fd)}
	_, _, e := syscall.RawSyscall6(sysLandlockAddRule, uintptr(rulesetFD), ruleTypePathBeneath, uintptr(unsafe.Pointer(&rule)), 0, 0, 0)
	if e != 0 {
		return e
	}
	return nil
}

// splitDirs sorts paths into directories and other files, as Landlock
// grants them different rights; paths that do not exist are left out.
func splitDirs(paths []string) (dirs, files []string) {
	for _, p := range paths {
		var st syscall.Stat_t
		err := syscall.Stat(p, &st)
		for err == syscall.EINTR {
			err = syscall.Stat(p, &st)
		}
		if err != nil {
			continue
		}
		if st.Mode&syscall.S_IFMT == syscall.S_IFDIR {
			dirs = append(dirs, p)
		} else {
			files = append(files, p)
		}
	}
	return dirs, files
}

// rulesetAttr is struct landlock_ruleset_attr (with ABI 10's quiet
// masks, zero, as go-landlock passes it).
type rulesetAttr struct {
	handledFS, handledNet, scoped             uint64
	quietAccessFS, quietAccessNet, quietScope uint64
}

// pathBeneathAttr is struct landlock_path_beneath_attr, packed: 12 bytes
// that the kernel reads, then padding.
type pathBeneathAttr struct {
	access   uint64
	parentFD int32
	_        int32
}

// netPortAttr is struct landlock_net_port_attr.
type netPortAttr struct {
	access, port uint64
}

// itoa is n in decimal, n >= 0.
func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var b []byte
	for ; n > 0; n /= 10 {
		b = append([]byte{byte('0' + n%10)}, b...)
	}
	return string(b)
}
