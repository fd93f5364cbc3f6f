// Package early is the sandbox's plugin wrapper (see the sandbox
// package), done in an initializer that the Go runtime runs before
// nearly every other of the binary.
//
// Go initializes a binary's packages in the order of their
// dependencies, and among those ready, by import path: the sandbox
// package, which needs os, encoding/json and go-landlock, is reached only
// after some two hundred packages of stackd's binary (RPC registries,
// schemas, templates), milliseconds after the process started. A plugin's
// wrapper, started once for each plugin of each pulumi run, paid them
// every time. This package imports nothing but runtime, syscall and
// unsafe, so its initializer runs among the first: it confines the
// process by the program policy with Landlock's system calls and execs
// the real plugin, as the sandbox package does, with the same rules
// (system.go's lists, the policy's paths, the same rights, best effort
// down to the kernel's ABI).
//
// It acts only when it can do all of that itself; where it cannot tell
// (no /proc), or the policy is not in the form the daemon writes, or the
// kernel's Landlock ABI is older than 2, it leaves the process to the
// sandbox package's initializer, which does the same with the standard
// library and go-landlock. Once it started to confine, a failure ends the
// process: it never runs a plugin unconfined, nor confined in part.
package early

import (
	"runtime"
	"syscall"
)

// The names the sandbox package shares with its wrappers.
const (
	// WrapperName is argv[0] of the sandbox's (the engine's) wrapper.
	WrapperName = "stackd-sandbox"
	// EnvProgram carries the program policy, from the CLI to its plugins.
	EnvProgram = "STACKD_SANDBOX_PROGRAM"
	// ExitWrapper is a wrapper's exit code when it cannot confine itself
	// or start the command: it never runs a command unconfined.
	ExitWrapper = 126
)

// EngineOnly are the variables of the CLI's environment that its plugins
// never see: the passphrase of the stack's secrets is the engine's.
var EngineOnly = []string{"PULUMI_CONFIG_PASSPHRASE", "PULUMI_CONFIG_PASSPHRASE_FILE"}

// init wraps the plugin when this process is a plugin's wrapper: it
// carries the program policy and was not started as the sandbox's wrapper
// (the sandbox package's startedAsPlugin). It returns, having done
// nothing, when it cannot do it alone, and never once it started.
func init() {
	data, ok := syscall.Getenv(EnvProgram)
	if !ok || !supported {
		return
	}
	args, ok := cmdline()
	if !ok || len(args) == 0 || base(args[0]) == WrapperName {
		return
	}
	p, ok := parsePolicy(data)
	if !ok {
		return
	}
	abi := abiVersion()
	if abi < 2 {
		return
	}
	fail(wrapPlugin(args, p, abi))
}

// fail writes the wrapper's error line on stderr and ends the process.
func fail(msg string) {
	line := []byte("stackd sandbox: " + msg + "\n")
	for len(line) > 0 {
		n, err := syscall.Write(2, line)
		if err != nil || n <= 0 {
			break
		}
		line = line[n:]
	}
	syscall.Exit(ExitWrapper)
}

// wrapPlugin confines this process by p and execs the real plugin beside
// args[0], with args[1:]. It returns only on a failure, what failed.
func wrapPlugin(args []string, p policy, abi int) string {
	self := args[0]
	if self == "" || self[0] != '/' {
		return "plugin " + quote(self) + ": not started by an absolute path"
	}
	link := join(dir(self), "."+base(self)+".real")
	real, err := readlink(link)
	if err != nil {
		return "plugin " + self + ": readlink " + link + ": " + err.Error()
	}
	if real == "" || real[0] != '/' {
		real = join(dir(self), real)
	}
	env := programEnv(syscall.Environ(), p.env)
	// A Landlock domain is the calling thread's, and execve keeps it.
	runtime.LockOSThread()
	if msg := restrict(p, abi); msg != "" {
		return "confine plugin " + base(self) + ": " + msg
	}
	err = syscall.Exec(real, append([]string{real}, args[1:]...), env)
	return "exec " + real + ": " + err.Error()
}

// quote is s in double quotes, its quotes and backslashes escaped.
func quote(s string) string {
	b := []byte{'"'}
	for i := 0; i < len(s); i++ {
		if s[i] == '"' || s[i] == '\\' {
			b = append(b, '\\')
		}
		b = append(b, s[i])
	}
	return string(append(b, '"'))
}

// programEnv is environ without the engine's own variables and those
// set, followed by the "NAME=value" of set: a "NAME" alone there only
// removes the engine's.
func programEnv(environ, set []string) []string {
	drop := append([]string{}, EngineOnly...)
	for _, kv := range set {
		drop = append(drop, key(kv))
	}
	env := make([]string, 0, len(environ)+len(set))
	for _, kv := range environ {
		if !contains(drop, key(kv)) {
			env = append(env, kv)
		}
	}
	for _, kv := range set {
		if key(kv) != kv {
			env = append(env, kv)
		}
	}
	return env
}

// key is the name of a "NAME=value" variable.
func key(kv string) string {
	for i := 0; i < len(kv); i++ {
		if kv[i] == '=' {
			return kv[:i]
		}
	}
	return kv
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// cmdline is this process's arguments, read from /proc/self/cmdline: the
// os package, which holds them, is initialized after this one.
func cmdline() ([]string, bool) {
	data, err := readFile("/proc/self/cmdline")
	if err != nil || len(data) == 0 || data[len(data)-1] != 0 {
		return nil, false
	}
	var args []string
	start := 0
	for i, c := range data {
		if c == 0 {
			args = append(args, string(data[start:i]))
			start = i + 1
		}
	}
	return args, true
}

// readFile is the content of the file at path.
func readFile(path string) ([]byte, error) {
	fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer syscall.Close(fd)
	buf := make([]byte, 0, 4096)
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := syscall.Read(fd, buf[len(buf):cap(buf)])
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return nil, err
		}
		if n == 0 {
			return buf, nil
		}
		buf = buf[:len(buf)+n]
	}
}

// readlink is the target of the symbolic link at path.
func readlink(path string) (string, error) {
	for size := 256; ; size *= 2 {
		buf := make([]byte, size)
		n, err := syscall.Readlink(path, buf)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return "", err
		}
		if n < size {
			return string(buf[:n]), nil
		}
	}
}
