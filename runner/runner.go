package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/stackd/stackd/daemon"
	"github.com/stackd/stackd/daemon/model"
	"github.com/stackd/stackd/daemon/spec"
)

// DefaultTimeout bounds an operation whose Operation.Timeout and
// Options.Timeout are both zero.
const DefaultTimeout = time.Hour

// Options configure a Runner.
type Options struct {
	// Bin is the directory of the pulumi CLI, its language hosts and
	// plugins.
	Bin string
	// DataDir holds the runner's state: workspaces/<name>/ per stack,
	// backend/ (the default file backend), pulumi-home/ (the shared
	// PULUMI_HOME) and tmp/ (the children's TMPDIR).
	DataDir string
	// DefaultBackend is the backend of workspaces without one; empty means
	// file://<DataDir>/backend.
	DefaultBackend string
	// PassphraseFile holds the passphrase of the passphrase secrets
	// provider. Empty means <DataDir>/passphrase, generated on first use;
	// a file named here must exist. Without it, stacks created on the
	// data dir's own backend get a passphrase each, in
	// <DataDir>/passphrases/<digest of the stack's identity>.
	PassphraseFile string
	// Timeout bounds an operation without its own (DefaultTimeout).
	Timeout time.Duration
	// InstallTimeout bounds one `pulumi install` (DefaultInstallTimeout).
	InstallTimeout time.Duration
	// KillDelay and OutputLimit are passed to the Command.
	KillDelay   time.Duration
	OutputLimit int
	// Env is added to every pulumi process's environment ("NAME=value"):
	// --env-file. Values of secret-looking names are hidden in logs.
	Env []string
	// PassEnv are globs of the daemon's own environment variables passed
	// to every pulumi process (--pass-env: AWS_*, GOOGLE_*, ARM_*, …).
	PassEnv []string
	// Logger receives the runner's records; nil means slog.Default().
	Logger *slog.Logger
	// Sandbox, when set, confines every pulumi process tree to what its
	// stack may reach (see Runner.access).
	Sandbox Confiner
	// Watchdog and Heartbeat make every pulumi process tree die when the
	// daemon stops for Heartbeat (see CommandOptions).
	Watchdog  Watchdog
	Heartbeat time.Duration
	// Reaper ends whatever a pulumi process tree leaves running (see CommandOptions).
	Reaper Reaper
	// ProjectPlugins lets projects declare plugins of their own in
	// Pulumi.yaml (--allow-project-plugins): the engine runs them from
	// the checkout, unconfined by the program's domain (see engine.go).
	ProjectPlugins bool
	// EngineGOGC is the GOGC of the engine of a small stack (see gc.go);
	// 0 leaves Go's default to every process.
	EngineGOGC int
	// Secrets, when set, is told the passphrases and the secret values of
	// the daemon-wide environment as the runner reads them, so that the
	// daemon scrubs them from every stack's output, not only from the
	// operations that use them.
	Secrets func(values ...string)
	// Identity makes the cloud credentials of the stacks that ask for
	// them (spec.credentials); nil fails their operations.
	Identity Identity
	// Claims keeps the claims of Pulumi stacks on shared backends (see
	// claims.go): a cluster's, shared by its replicas. Nil means files
	// in <DataDir>/claims/.
	Claims Claims
}

// Runner runs Pulumi operations with the pulumi CLI; it implements
// daemon.Runner. Each operation is one CLI process once the stack exists
// and its config is unchanged: the result is read from the engine's event
// log instead of follow-up commands. Its methods are safe for concurrent
// use on different stacks.
type Runner struct {
	opts       Options
	cmd        *Command
	log        *slog.Logger
	hostname   string
	digestKey  []byte
	claims     Claims
	passphrase string // for redaction; empty when the file is not readable
	// ownPassphrases gives stacks of the data dir's backend a passphrase
	// each (no PassphraseFile was given).
	ownPassphrases bool
	// wrapper is the plugin wrapper (this binary) when programs run
	// confined, empty otherwise (see engine.go).
	wrapper string
	// secretDaemonEnv are the values of the daemon-wide environment
	// (PassEnv, Env) whose names say secret: hidden in logs and outputs.
	secretDaemonEnv []string
	// tokens are the cloud credentials' tokens made for each stack, masked
	// in its operations until they expire (see mintedTokens).
	tokens mintedTokens
	// stateSizes are the bytes of each stack's state as last read (see
	// sizeKey): they decide its engine's GOGC (see gc.go).
	stateSizes sync.Map
}

var _ daemon.Runner = (*Runner)(nil)

// New prepares DataDir and checks the CLI in opts.Bin.
func New(ctx context.Context, opts Options) (*Runner, error) {
	if opts.DataDir == "" {
		return nil, errors.New("runner: no data directory")
	}
	dataDir, err := filepath.Abs(opts.DataDir)
	if err != nil {
		return nil, fmt.Errorf("runner: data directory: %w", err)
	}
	opts.DataDir = dataDir
	if err := validateEnv(opts.Env); err != nil {
		return nil, fmt.Errorf("runner: %w", err)
	}
	r := &Runner{opts: opts, log: opts.Logger}
	if r.log == nil {
		r.log = slog.Default()
	}
	if r.opts.Timeout <= 0 {
		r.opts.Timeout = DefaultTimeout
	}
	if r.opts.DefaultBackend == "" {
		r.opts.DefaultBackend = "file://" + filepath.Join(dataDir, "backend")
	}
	if err := r.prepareDataDir(); err != nil {
		return nil, fmt.Errorf("runner: %w", err)
	}
	r.claims = opts.Claims
	if r.claims == nil {
		r.claims = fileClaims{dir: filepath.Join(dataDir, "claims")}
	}
	if r.hostname, err = os.Hostname(); err != nil {
		return nil, fmt.Errorf("runner: hostname: %w", err)
	}
	var engine string
	if opts.Sandbox != nil {
		if engine, err = r.prepareEngine(); err != nil {
			return nil, fmt.Errorf("runner: %w", err)
		}
	}
	r.cmd, err = NewCommand(ctx, CommandOptions{
		Bin:         opts.Bin,
		Engine:      engine,
		PassEnv:     opts.PassEnv,
		Env:         r.daemonEnv(),
		KillDelay:   opts.KillDelay,
		OutputLimit: opts.OutputLimit,
		Sandbox:     opts.Sandbox,
		Watchdog:    opts.Watchdog,
		Heartbeat:   opts.Heartbeat,
		Reaper:      opts.Reaper,
	})
	if err != nil {
		return nil, fmt.Errorf("runner: %w", err)
	}
	r.installAmbient(ctx, ambientProviders(r.cmd.SearchPath()))
	for _, kv := range r.cmd.env {
		if k, v, _ := strings.Cut(kv, "="); spec.SecretName(k) && len(v) >= minRedactSecret {
			r.secretDaemonEnv = append(r.secretDaemonEnv, v)
		}
	}
	r.learnSecrets()
	go r.cmd.reapOrphans(ctx)
	return r, nil
}

// prepareDataDir creates the directories, the passphrase file and the
// key of the config digests, and removes the credentials of operations
// a crash left (no operation runs yet).
func (r *Runner) prepareDataDir() error {
	if err := os.RemoveAll(filepath.Join(r.opts.DataDir, CredentialsDir)); err != nil {
		return fmt.Errorf("the credentials of earlier operations: %w", err)
	}
	for _, sub := range []string{"", "workspaces", "pulumi-home", "pulumi-home/plugins", "tmp", "home"} {
		if err := os.MkdirAll(filepath.Join(r.opts.DataDir, sub), 0o700); err != nil {
			return err
		}
	}
	if r.opts.DefaultBackend == r.localBackend() {
		if err := os.MkdirAll(filepath.Join(r.opts.DataDir, "backend"), 0o700); err != nil {
			return err
		}
	}
	if r.opts.PassphraseFile == "" {
		r.ownPassphrases = r.opts.DefaultBackend == r.localBackend()
		r.opts.PassphraseFile = filepath.Join(r.opts.DataDir, "passphrase")
		if _, err := ensureSecretFile(r.opts.PassphraseFile); err != nil {
			return fmt.Errorf("passphrase: %w", err)
		}
	}
	if data, err := os.ReadFile(r.opts.PassphraseFile); err == nil {
		r.passphrase = strings.TrimSpace(string(data))
	} else {
		return fmt.Errorf("passphrase: %w", err)
	}
	key, err := ensureSecretFile(filepath.Join(r.opts.DataDir, "digest.key"))
	if err != nil {
		return fmt.Errorf("digest key: %w", err)
	}
	r.digestKey = key
	return nil
}

// localBackend is the file backend in the data dir.
func (r *Runner) localBackend() string { return "file://" + filepath.Join(r.opts.DataDir, "backend") }

// daemonEnv is the environment every pulumi process gets on top of the
// Command's allowlist. PULUMI_DEBUG_COMMANDS enables --event-log.
func (r *Runner) daemonEnv() []string {
	env := []string{
		"HOME=" + filepath.Join(r.opts.DataDir, "home"),
		"PULUMI_HOME=" + filepath.Join(r.opts.DataDir, "pulumi-home"),
		"PULUMI_SKIP_UPDATE_CHECK=true",
		"PULUMI_IGNORE_AMBIENT_PLUGINS=true", // see plugins.go
		// The engine would run what it downloaded (see engine.go).
		"PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION=true",
		"TMPDIR=" + filepath.Join(r.opts.DataDir, "tmp"),
	}
	env = append(env, r.opts.Env...)
	return append(env, "PULUMI_DEBUG_COMMANDS=true")
}

// Run performs op: it creates the stack when needed, brings its config up
// to date and runs the operation in one CLI process. A ReadOnly op works
// on a copy of the runner's state of the stack (see scratch). A stale lock left on
// a file backend by a dead process of this host is broken, and the
// operation tried once more. With op.BreakLock, whatever lock the stack
// has is broken first: the daemon knows its holder is gone.
func (r *Runner) Run(ctx context.Context, op model.Operation) (model.Result, error) {
	timeout := op.Timeout
	if timeout <= 0 {
		timeout = r.opts.Timeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	w, err := r.open(op.Workspace)
	if err != nil {
		return model.Result{}, err
	}
	if op.ReadOnly {
		done, err := r.scratch(ctx, w)
		if err != nil {
			return model.Result{}, err
		}
		defer done()
	}
	if op.BreakLock {
		// Before anything: creating the stack here fails too while the
		// lock is held. A stack that does not exist has no lock.
		if _, err := r.breakLock(ctx, w); err != nil {
			r.log.Warn("cannot break the stack's lock", "stack", w.Name, "err", err)
		}
	}
	if err := r.installIfChanged(ctx, w, op.Log); err != nil {
		return model.Result{}, err
	}
	if err := r.ensureStack(ctx, w); err != nil {
		return model.Result{}, err
	}
	if err := r.applyConfig(ctx, w); err != nil {
		return model.Result{}, err
	}
	res, err := r.operateAcquiring(ctx, w, op)
	if isLockError(err) {
		broken, lockErr := r.breakStaleLock(ctx, w)
		if broken {
			res, err = r.operate(ctx, w, op)
		} else if lockErr != nil {
			r.log.Warn("the stack's lock stays", "stack", w.Name, "err", lockErr)
		}
	}
	if op.Export && !op.ReadOnly && !interrupted(ctx, err) {
		res.Resources, res.Exported = r.export(ctx, w, op, err)
		res.ExportFailed = !res.Exported
	}
	if err == nil && destroys(op) && op.Remove {
		w.forget()
		r.stateSizes.Delete(sizeKey(w))
		r.unclaim(ctx, w)
	}
	return res, err
}

// interrupted says whether the operation that ended with err was cut
// short: its context ended, or its process was killed, by the watchdog
// when this daemon was frozen past the heartbeat bound (it may have lost
// the stack meanwhile). No pulumi process runs after such an operation:
// a replica cut off from its stack leaves the backend to the new holder.
func interrupted(ctx context.Context, err error) bool {
	var e *Error
	return ctx.Err() != nil || errors.As(err, &e) && e.ExitCode == -1
}

// export reads the resources of w's state after op, which ended with
// opErr: a removed stack has none; a failed export is logged, and says
// nothing.
func (r *Runner) export(ctx context.Context, w *workspace, op model.Operation, opErr error) ([]model.Resource, bool) {
	if opErr == nil && destroys(op) && op.Remove {
		return []model.Resource{}, true
	}
	rs, err := r.exportResources(ctx, w)
	if err != nil {
		r.log.Warn("cannot export the stack's resources", "stack", w.Name, "err", err)
		return nil, false
	}
	return rs, true
}

// Outputs reads ws's outputs with secrets in clear. It logs no value.
func (r *Runner) Outputs(ctx context.Context, ws model.Workspace) (map[string]any, error) {
	w, err := r.open(ws)
	if err != nil {
		return nil, err
	}
	out, err := r.pulumi(ctx, w, call{what: "read outputs"},
		"stack", "output", "--json", "--show-secrets", "--stack", w.Stack)
	if err != nil {
		return nil, err
	}
	outputs := map[string]any{}
	if err := decodeJSON(strings.NewReader(out), &outputs); err != nil {
		return nil, fmt.Errorf("read outputs of stack %s: decode: %w", w.Stack, err)
	}
	return outputs, nil
}

// open is workspace, with w's directories made and its state moved into
// its own backend when it is still in the shared one.
func (r *Runner) open(ws model.Workspace) (*workspace, error) {
	w, err := r.workspace(ws)
	if err != nil {
		return nil, err
	}
	if err := r.mkdirs(w); err != nil {
		return nil, err
	}
	if w.backend == r.localBackend() {
		if err := os.MkdirAll(r.ownStateDir(w), 0o700); err != nil {
			return nil, fmt.Errorf("stack %s: backend: %w", w.Name, err)
		}
	}
	if err := r.moveState(w); err != nil {
		return nil, err
	}
	return w, nil
}

// call describes one auxiliary CLI process.
type call struct {
	// what names the step in errors: "create stack", "set config".
	what  string
	dir   string // defaults to the project directory
	stdin io.Reader
}

// pulumi runs an auxiliary CLI command (not the operation) for w and
// returns its stdout. A failure is an *Error naming c.what with the end
// of stderr, redacted.
func (r *Runner) pulumi(ctx context.Context, w *workspace, c call, args ...string) (string, error) {
	dir := c.dir
	if dir == "" {
		dir = w.ProjectDir
	}
	start := time.Now()
	stdout, stderr, code, err := r.cmd.RunIn(ctx, r.access(w), dir, c.stdin, nil, nil, r.env(w), args...)
	r.log.Debug("pulumi command", "stack", w.Name, "command", strings.Join(args[:min(2, len(args))], " "), "code", code, "duration", time.Since(start))
	if err == nil {
		return stdout, nil
	}
	msg := tailLines(stderr, 10)
	if msg == "" {
		msg = fmt.Sprintf("exit code %d", code)
	}
	return stdout, &Error{
		Op:       c.what,
		Message:  c.what + ": " + w.redact.Replace(msg),
		ExitCode: code,
		Err:      err,
		locked:   lockedText(stderr),
	}
}

// Error is a failed pulumi process. Its message is what the engine or the
// CLI said went wrong, without the workspace's known secrets.
type Error struct {
	// Op is the operation ("up", "preview", …) or the step ("create
	// stack", "set config", …) that failed.
	Op       string
	Message  string
	ExitCode int
	// Err is the process's error; it wraps the context's error when the
	// process was cancelled or timed out.
	Err    error
	locked bool
}

func (e *Error) Error() string { return e.Message }

func (e *Error) Unwrap() error { return e.Err }

// isLockError tells whether err is a pulumi process that failed because
// another update holds the stack's lock.
func isLockError(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.locked
}

// lockedText tells whether the CLI's stderr reports a concurrent update:
// the texts auto.IsConcurrentUpdateError looks for.
func lockedText(stderr string) bool {
	return strings.Contains(stderr, "the stack is currently locked by") ||
		strings.Contains(stderr, "[409] Conflict: Another update is currently in progress.")
}

// tailLines is the last n non-empty lines of s, at most 2000 bytes.
func tailLines(s string, n int) string {
	var lines []string
	for line := range strings.Lines(s) {
		if line = strings.TrimRight(line, "\r\n"); strings.TrimSpace(line) != "" {
			lines = append(lines, line)
		}
	}
	lines = lines[max(len(lines)-n, 0):]
	out := strings.Join(lines, "\n")
	if len(out) > 2000 {
		out = "…" + out[len(out)-2000:]
	}
	return out
}
