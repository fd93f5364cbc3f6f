package sandbox

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"

	"github.com/stackd/stackd/sandbox/internal/early"
)

// The engine is trusted, the program is not: a confined pulumi CLI may
// write what it reports (its event log, a saved plan, the state), and
// the plugins it starts (the language host that runs the program, the
// providers), and whatever they start, must not. Landlock confines a
// process and its descendants alike, so each plugin enters a narrower
// domain, nested in the CLI's, as it starts: the CLI starts it from a
// path where the daemon put a link to its own binary beside a link to
// the real plugin, .<name>.real. A process not started as the sandbox's
// wrapper that finds the program policy in its environment confines
// itself by it and execs the real plugin in its place (same pid). The
// early package's initializer does it, among the binary's first, for a
// policy as Nest writes it; this package's initializer, with the same
// rules, does it for one the early package leaves (see wrapPlugin).

// envProgram carries the program policy, from the CLI to its plugins.
const envProgram = early.EnvProgram

// engineOnly are the variables of the CLI's environment that its plugins
// never see: the passphrase of the stack's secrets is the engine's. The
// program policy stays: a plugin that starts another (the language host
// loading a provider's schema) starts it through its wrapper too.
var engineOnly = early.EngineOnly

// programPolicy is what a plugin's wrapper receives.
type programPolicy struct {
	policy
	// Env are variables ("NAME=value") set in place of the CLI's; a
	// "NAME" alone removes the CLI's.
	Env []string `json:"env,omitempty"`
}

// Nest makes the plugins cmd starts through links to this binary (see
// above) run in a domain nested in cmd's: they may read readOnly, read
// and write readWrite, with the system's paths and the Options' paths,
// and whatever cmd may not, they may not either. env replaces the same
// variables of cmd's environment for them ("NAME=value"), or removes
// them ("NAME"). Call it after Confine.
func (l *Landlock) Nest(cmd *exec.Cmd, readOnly, readWrite, env []string) error {
	p := programPolicy{
		policy: policy{
			ReadOnly:   slices.Concat(readOnly, l.opts.ReadOnly),
			ReadWrite:  slices.Concat(readWrite, l.opts.ReadWrite),
			ConnectTCP: l.opts.ConnectTCP,
		},
		Env: env,
	}
	data, err := json.Marshal(p)
	if err != nil {
		return fmt.Errorf("sandbox: %w", err)
	}
	if cmd.Env == nil {
		cmd.Env = os.Environ()
	}
	cmd.Env = append(slices.Clip(cmd.Env), envProgram+"="+string(data))
	return nil
}

// startedAsPlugin says whether this process is a plugin's wrapper: it
// carries a program policy and was not started as the sandbox's wrapper.
func startedAsPlugin() (string, bool) {
	policy, ok := os.LookupEnv(envProgram)
	return policy, ok && filepath.Base(os.Args[0]) != wrapperName
}

// wrapPlugin confines this process by the program policy and execs the
// real plugin beside os.Args[0]. It returns only on a failure. The early
// package does the same before this package is initialized, and leaves it
// only what it cannot do alone: a policy that is not as encoding/json
// writes it (a plugin may start another with a policy of its own, which,
// nested, can only narrow its own), a kernel of Landlock ABI 1, no /proc.
func wrapPlugin(data string) error {
	self := os.Args[0]
	if !filepath.IsAbs(self) {
		return fmt.Errorf("plugin %q: not started by an absolute path", self)
	}
	real, err := os.Readlink(filepath.Join(filepath.Dir(self), "."+filepath.Base(self)+".real"))
	if err != nil {
		return fmt.Errorf("plugin %s: %w", self, err)
	}
	if !filepath.IsAbs(real) {
		real = filepath.Join(filepath.Dir(self), real)
	}
	var p programPolicy
	if err := json.Unmarshal([]byte(data), &p); err != nil {
		return fmt.Errorf("read the program policy: %w", err)
	}
	env := programEnv(os.Environ(), p.Env)
	runtime.LockOSThread()
	if err := restrict(p.policy); err != nil {
		return fmt.Errorf("confine plugin %s: %w", filepath.Base(self), err)
	}
	err = syscall.Exec(real, append([]string{real}, os.Args[1:]...), env)
	return fmt.Errorf("exec %s: %w", real, err)
}

// programEnv is environ without the engine's own variables and those
// set, followed by the "NAME=value" of set: a "NAME" alone there only
// removes the engine's.
func programEnv(environ, set []string) []string {
	drop := slices.Clone(engineOnly)
	for _, kv := range set {
		k, _, _ := strings.Cut(kv, "=")
		drop = append(drop, k)
	}
	env := slices.DeleteFunc(slices.Clone(environ), func(kv string) bool {
		k, _, _ := strings.Cut(kv, "=")
		return slices.Contains(drop, k)
	})
	for _, kv := range set {
		if strings.Contains(kv, "=") {
			env = append(env, kv)
		}
	}
	return env
}
