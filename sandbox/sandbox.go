// Package sandbox confines the process trees stackd starts (the pulumi CLI,
// its language host and its plugins) with Landlock, so that a program
// committed to a tracked repository reaches its own stack's files and the
// system's, and nothing else of the host: not the daemon's state, not
// another stack's checkout, state or passphrase, not the daemon's secrets,
// not the daemon's /proc entries. And it ends them: nothing a program
// starts outlives its operation.
//
// Both are done by a small wrapper: the daemon starts its own binary with
// the wrapper's name as argv[0]; this package's initializer sees that
// name, confines the process (Landlock confines the calling thread and
// everything it later starts) and runs the real command as its child, in
// its process group. The wrapper is a child subreaper: whatever the
// command's tree leaves behind (a plugin, a double fork, a setsid'd
// daemon) comes to it, and once the command exits it kills all of it
// before it exits the same way (see Reaper). The daemon itself stays
// unconfined, and a caller's exec.Cmd is only rewritten (Confine, Reap,
// Watch), so process groups, signals and pipes work as before.
//
// Landlock needs Linux 5.13 or later; the rules here use ABI 7 at most and
// degrade to what the kernel has. The network is not restricted unless
// Options.ConnectTCP asks for it. The wrapper's reaping needs no Landlock
// and runs with the sandbox off too.
package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"syscall"

	"github.com/landlock-lsm/go-landlock/landlock"
	llsys "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"

	"github.com/stackd/stackd/sandbox/internal/early"
)

// Modes of the --sandbox flag.
const (
	ModeLandlock = "landlock"
	ModeOff      = "off"
)

// wrapperName is argv[0] of a wrapper process; envPolicy carries its
// Landlock policy, envWatchdog its watchdog and envReap the descriptor it
// reports its kills on. The wrapper acts only when its name and one of
// them are there.
const (
	wrapperName = early.WrapperName
	envPolicy   = "STACKD_SANDBOX_POLICY"
	envWatchdog = "STACKD_SANDBOX_WATCHDOG"
	envReap     = "STACKD_SANDBOX_REAP"
)

// exitWrapper is the wrapper's exit code when it cannot confine itself or
// start the command: it never runs a command unconfined.
const exitWrapper = early.ExitWrapper

// init turns this process into the wrapper when it was started as one
// (see Confine, Reap, Watch), and never returns then. It runs as a
// package initializer, so that the wrapper starts the command before the
// initializers of the binary's heavier packages (templates, schemas, RPC
// registries) cost every pulumi process milliseconds: any binary that
// imports this package serves as its own wrapper. A plugin's wrapper is
// done earlier still, by the early package (see program.go).
func init() {
	if policy, ok := startedAsPlugin(); ok {
		err := wrapPlugin(policy)
		fmt.Fprintf(os.Stderr, "stackd sandbox: %v\n", err)
		os.Exit(exitWrapper)
	}
	if filepath.Base(os.Args[0]) != wrapperName {
		return
	}
	env := map[string]string{}
	for _, k := range []string{envPolicy, envWatchdog, envReap} {
		if v, ok := os.LookupEnv(k); ok {
			env[k] = v
			os.Unsetenv(k) // not the command's
		}
	}
	if len(env) == 0 {
		return
	}
	code, err := wrap(env, os.Args[1:])
	if err != nil {
		fmt.Fprintf(os.Stderr, "stackd sandbox: %v\n", err)
	}
	os.Exit(code)
}

// ProtectSelf makes this process (the daemon) non-dumpable: its
// /proc/<pid> entries that need ptrace access (environ, maps, fd, mem)
// are then closed to every process of the same user without
// CAP_SYS_PTRACE, and confined processes have no capability. Landlock's
// own ptrace rule covers attaching, not reading /proc/<pid>/environ. It
// also keeps the daemon's memory, which holds secrets, out of core dumps.
func ProtectSelf() error {
	return unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
}

// Options configure a Landlock sandbox.
type Options struct {
	// ReadOnly and ReadWrite are paths every confined process may read
	// (and execute), or read and write, besides its own (--sandbox-ro,
	// --sandbox-rw). A path that does not exist is skipped.
	ReadOnly, ReadWrite []string
	// ConnectTCP, when not empty, are the only TCP ports confined
	// processes may connect to (on kernels with Landlock ABI 4 or later).
	ConnectTCP []uint16
}

// Landlock confines commands with Landlock.
type Landlock struct {
	opts Options
	abi  int
}

// ABI is the Landlock ABI version the kernel offers, 0 when it has none.
func ABI() int {
	v, err := llsys.LandlockGetABIVersion()
	if err != nil {
		return 0
	}
	return v
}

// ErrUnsupported says the kernel does not enforce Landlock.
var ErrUnsupported = errors.New("the kernel does not enforce Landlock (Linux 5.13 or later with landlock in the lsm= boot list)")

// New checks that the kernel enforces Landlock and that this binary can
// serve as the wrapper.
func New(opts Options) (*Landlock, error) {
	abi := ABI()
	if abi < 1 {
		return nil, ErrUnsupported
	}
	if len(opts.ConnectTCP) > 0 && abi < 4 {
		return nil, fmt.Errorf("restricting TCP ports needs Landlock ABI 4 (Linux 6.7); this kernel has ABI %d", abi)
	}
	return &Landlock{opts: opts, abi: abi}, nil
}

// ABI is the Landlock ABI version enforced.
func (l *Landlock) ABI() int { return l.abi }

// policy is what the wrapper receives.
type policy struct {
	ReadOnly   []string `json:"ro,omitempty"`
	ReadWrite  []string `json:"rw,omitempty"`
	ConnectTCP []uint16 `json:"tcp,omitempty"`
}

// Confine rewrites cmd, not started yet, so that it runs confined: it may
// read readOnly, read and write readWrite, and the system paths a process
// needs; everything else of the file system is denied, and so are ptrace,
// signals and abstract sockets reaching processes outside the sandbox
// (the daemon among them). cmd.Path must be absolute.
func (l *Landlock) Confine(cmd *exec.Cmd, readOnly, readWrite []string) error {
	path := target(cmd)
	if !filepath.IsAbs(path) {
		return fmt.Errorf("sandbox: command %q is not an absolute path", path)
	}
	p := policy{
		ReadOnly:   append(slices.Concat(readOnly, l.opts.ReadOnly), filepath.Dir(path)),
		ReadWrite:  slices.Concat(readWrite, l.opts.ReadWrite),
		ConnectTCP: l.opts.ConnectTCP,
	}
	data, err := json.Marshal(p)
	if err != nil {
		return fmt.Errorf("sandbox: %w", err)
	}
	throughWrapper(cmd, envPolicy+"="+string(data))
	return nil
}

// target is the command cmd runs, through the wrapper or not.
func target(cmd *exec.Cmd) string {
	if cmd.Path == selfExe && len(cmd.Args) > 1 && cmd.Args[0] == wrapperName {
		return cmd.Args[1]
	}
	return cmd.Path
}

// selfExe starts the running binary again.
const selfExe = "/proc/self/exe"

// throughWrapper makes cmd, not started yet, start the wrapper with env
// added, unless it does already; the wrapper then runs cmd's command.
func throughWrapper(cmd *exec.Cmd, env string) {
	base := cmd.Env
	if base == nil {
		base = os.Environ()
	}
	cmd.Env = append(slices.Clip(base), env)
	if cmd.Path == selfExe && len(cmd.Args) > 0 && cmd.Args[0] == wrapperName {
		return
	}
	cmd.Args = append([]string{wrapperName, cmd.Path}, cmd.Args[1:]...)
	cmd.Path = selfExe
	cmd.Err = nil // exec.Command's lookup of the original name no longer matters
}

// wrap confines this process by the JSON policy of env[envPolicy] when
// there is one, then runs args as its child (see supervise), under the
// watchdog of env[envWatchdog] and reporting its kills on the descriptor
// env[envReap] when they are there. It returns the exit code the
// wrapper ends with.
func wrap(env map[string]string, args []string) (int, error) {
	if len(args) == 0 {
		return exitWrapper, errors.New("no command")
	}
	var wd *watchdog
	if s, ok := env[envWatchdog]; ok {
		var err error
		if wd, err = parseWatchdog(s); err != nil {
			return exitWrapper, err
		}
		syscall.CloseOnExec(wd.fd) // not the command's
	}
	var report *os.File
	if s, ok := env[envReap]; ok {
		fd, err := strconv.Atoi(s)
		if err != nil || fd < 3 {
			return exitWrapper, fmt.Errorf("bad report descriptor %q", s)
		}
		syscall.CloseOnExec(fd)
		report = os.NewFile(uintptr(fd), "report")
	}
	// Capabilities are per thread: drop them on the thread that starts
	// the child, and keep it.
	runtime.LockOSThread()
	if policy, ok := env[envPolicy]; ok {
		if err := confineSelf(policy); err != nil {
			return exitWrapper, err
		}
	}
	return supervise(args, wd, report)
}

// confineSelf drops this thread's capabilities and applies the JSON
// policy to the process.
func confineSelf(data string) error {
	var p policy
	if err := json.Unmarshal([]byte(data), &p); err != nil {
		return fmt.Errorf("read policy: %w", err)
	}
	if err := dropCapabilities(); err != nil {
		return fmt.Errorf("drop capabilities: %w", err)
	}
	if err := restrict(p); err != nil {
		return fmt.Errorf("confine: %w", err)
	}
	return nil
}

// config is what Landlock restricts: the file system and IPC scopes of
// ABI 7, and TCP connects when ports are named. Best effort: a kernel with
// an older ABI restricts what it can.
func config(tcp bool) landlock.Config {
	c := landlock.Config{HandledAccessFS: landlock.V7.HandledAccessFS, Scoped: landlock.V7.Scoped}
	if tcp {
		c.HandledAccessNet = landlock.V7.HandledAccessNet
	}
	return c.BestEffort()
}

// restrict applies p to this process.
func restrict(p policy) error {
	rules := systemRules()
	roDirs, roFiles := splitDirs(p.ReadOnly)
	rwDirs, rwFiles := splitDirs(p.ReadWrite)
	rules = append(rules,
		landlock.RODirs(roDirs...), landlock.ROFiles(roFiles...),
		landlock.RWDirs(rwDirs...).WithRefer(), landlock.RWFiles(rwFiles...))
	for _, port := range p.ConnectTCP {
		rules = append(rules, landlock.ConnectTCP(port))
	}
	return config(len(p.ConnectTCP) > 0).Restrict(rules...)
}

// splitDirs sorts paths into directories and other files, as Landlock
// grants them different rights; paths that do not exist are left out.
func splitDirs(paths []string) (dirs, files []string) {
	for _, p := range paths {
		fi, err := os.Stat(p)
		switch {
		case err != nil:
		case fi.IsDir():
			dirs = append(dirs, p)
		default:
			files = append(files, p)
		}
	}
	return dirs, files
}
