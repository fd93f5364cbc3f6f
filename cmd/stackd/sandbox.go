package main

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/stackd/stackd/runner"
	"github.com/stackd/stackd/sandbox"
)

// sandboxFlags configure the confinement of pulumi processes.
type sandboxFlags struct {
	sandbox     string
	sandboxRO   stringsFlag
	sandboxRW   stringsFlag
	requireSB   bool
	connectTCP  stringsFlag
	sandboxWarn string // set by newSandbox: why programs run unconfined
	// reaper, made by newSandbox, ends and counts what each pulumi
	// process tree leaves running, with the sandbox on or off.
	reaper *sandbox.Reaper
	// projectPlugins lets projects declare plugins in Pulumi.yaml, which
	// the engine runs beside itself, out of the program's domain.
	projectPlugins bool
	// adoptOrphans, set by serve (never by a daemon started within
	// another process, such as a test), makes the process a child
	// subreaper once its start is checked, just before work begins: a
	// refused start leaves the process as it was.
	adoptOrphans bool
}

func (f *sandboxFlags) define(fs *flag.FlagSet) {
	fs.StringVar(&f.sandbox, "sandbox", sandbox.ModeLandlock, "confine every pulumi process: landlock or off")
	fs.Var(&f.sandboxRO, "sandbox-ro", "`PATH` every program may read besides its own files and the system's (repeatable; never the data dir, the secrets dir, the token file's directory or above)")
	fs.Var(&f.sandboxRW, "sandbox-rw", "`PATH` every program may read and write besides its own files (repeatable; never the data dir, the secrets dir, the token file's directory or above)")
	fs.BoolVar(&f.requireSB, "require-sandbox", false, "refuse to start where the kernel cannot enforce the sandbox")
	fs.BoolVar(&f.projectPlugins, "allow-project-plugins", false, "run plugins a project declares in its Pulumi.yaml (plugins:): they run beside the engine, where they could forge what approval and policies judge; only for repositories whose every committer you trust")
	fs.Var(&f.connectTCP, "sandbox-connect-tcp", "TCP `PORT` programs may connect to; when given, no other (repeatable; Landlock ABI 4)")
}

// newSandbox is the runner's sandbox as the flags say; nil runs programs
// unconfined, which f.sandboxWarn then explains. Without Landlock in the
// kernel the daemon starts with that warning, unless --require-sandbox.
func newSandbox(f *sandboxFlags, log *slog.Logger) (runner.Confiner, error) {
	f.reaper = &sandbox.Reaper{}
	switch f.sandbox {
	case sandbox.ModeOff:
		f.sandboxWarn = "--sandbox=off: programs run unconfined and can read every file the stackd user can, the daemon's secrets and other stacks' state among them"
		return nil, nil
	case sandbox.ModeLandlock, "":
	default:
		return nil, usageErrorf("run: --sandbox must be %s or %s", sandbox.ModeLandlock, sandbox.ModeOff)
	}
	ports := make([]uint16, 0, len(f.connectTCP))
	for _, p := range f.connectTCP {
		n, err := strconv.ParseUint(p, 10, 16)
		if err != nil || n == 0 {
			return nil, usageErrorf("run: --sandbox-connect-tcp %q is not a TCP port", p)
		}
		ports = append(ports, uint16(n))
	}
	// The paths as checkSandboxGrants saw them at start: a link changed
	// since does not move them.
	l, err := sandbox.New(sandbox.Options{ReadOnly: resolvePaths(f.sandboxRO), ReadWrite: resolvePaths(f.sandboxRW), ConnectTCP: ports})
	switch {
	case errors.Is(err, sandbox.ErrUnsupported) && !f.requireSB:
		f.sandboxWarn = "the sandbox is off: " + err.Error() + "; programs can read every file the stackd user can"
		log.Error("SANDBOX NOT ENFORCED: " + f.sandboxWarn)
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	if err := sandbox.ProtectSelf(); err != nil {
		return nil, fmt.Errorf("sandbox: %w", err)
	}
	log.Info("programs run in the sandbox", "landlock_abi", l.ABI(), "read_only", len(f.sandboxRO), "read_write", len(f.sandboxRW))
	return l, nil
}

// registerSandboxMetric exports whether programs run confined, and how
// many processes reaper killed because they outlived their operation.
func registerSandboxMetric(reg *prometheus.Registry, enforced bool, reaper *sandbox.Reaper) {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "stackd_sandbox_enforced",
		Help: "1 when every pulumi process runs confined by the sandbox (Landlock), 0 when programs run unconfined.",
	})
	if enforced {
		g.Set(1)
	}
	reg.MustRegister(g)
	if reaper != nil {
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "stackd_leftover_processes_killed_total",
			Help: "Processes a program left running that stackd killed when their operation ended (a process group counts once).",
		}, func() float64 { return float64(reaper.Total()) }))
	}
}

// adoptOrphans makes stackd run a child subreaper (see
// sandbox.AdoptOrphans): what a program leaves running when its wrapper
// was killed past the operation timeout comes to stackd and ends.
func adoptOrphans(log *slog.Logger) {
	if err := sandbox.AdoptOrphans(); err != nil {
		log.Warn("processes a killed operation leaves running may outlive it", "err", err)
	}
}

// nonEmpty is s as a list: none when s is empty.
func nonEmpty(s string) []string {
	if s == "" {
		return nil
	}
	return []string{s}
}
