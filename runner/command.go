package runner

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/blang/semver"
	"github.com/pulumi/pulumi/sdk/v3/go/auto"
)

// Defaults of CommandOptions.
const (
	DefaultKillDelay   = 10 * time.Second
	DefaultOutputLimit = 16 << 20
)

// inheritedEnv lists the daemon's environment variables a pulumi process
// may see. Everything else (cloud credentials, tokens, NOTIFY_SOCKET) must
// be declared per stack.
var inheritedEnv = []string{
	"PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "USER", "LOGNAME",
	"SSL_CERT_FILE", "SSL_CERT_DIR",
	"HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy",
}

// CommandOptions configure a Command.
type CommandOptions struct {
	// Bin is the directory holding the pulumi CLI; it is also put first on
	// the children's PATH, so language hosts and plugins there are found.
	Bin string
	// Engine, when set, is the directory of the CLI to run in Bin's place
	// (see engine.go).
	Engine string
	// Env is added to the inherited allowlist for every process: the
	// daemon-wide settings (PULUMI_HOME, PULUMI_SKIP_UPDATE_CHECK, …).
	Env []string
	// PassEnv are globs of further variables of the daemon's environment
	// that every process inherits.
	PassEnv []string
	// KillDelay is how long a cancelled process group has between SIGINT
	// and SIGKILL (DefaultKillDelay).
	KillDelay time.Duration
	// OutputLimit bounds the stdout and stderr a Run keeps and returns
	// (DefaultOutputLimit each). Writers passed to Run see everything.
	OutputLimit int
	// Sandbox, when set, confines every process tree (see Access).
	Sandbox Confiner
	// Watchdog, with Heartbeat, makes every process tree die when this
	// process stops sending it heartbeats for Heartbeat: frozen (SIGSTOP,
	// a paused VM) or gone. A replica's operations then end with its
	// lease, before another replica takes its stacks over.
	Watchdog  Watchdog
	Heartbeat time.Duration
	// Reaper, when set, ends every process a CLI process starts when
	// that process ends (see Reaper).
	Reaper Reaper
}

// Reaper ends every process a command starts with the command: the
// sandbox package's Reaper, whose wrapper runs the CLI as its child, is a
// child subreaper and kills whatever is left once the CLI exits. A
// wrapper killed from outside (the kill of its process group past the
// timeout) leaves its orphans to this process, which kills them when
// orphans come here (see orphansComeHere and killOrphans).
type Reaper interface {
	// Reap rewrites cmd, not started yet, so that whatever cmd starts
	// ends when cmd's process exits. The caller calls ended once cmd
	// ended or failed to start; it says whether everything cmd started
	// is known to have ended (else orphans may be left).
	Reap(cmd *exec.Cmd) (ended func() (clean bool), err error)
	// Killed counts n processes this process killed itself, orphans
	// left by a wrapper that was killed.
	Killed(n int)
}

// Watchdog kills the process group of a command whose heartbeat stops
// (the sandbox package's Watchdog).
type Watchdog interface {
	// Watch rewrites cmd, not started yet, so that its group is killed
	// when no byte came on heartbeat, a pipe's read end, for bound.
	Watch(cmd *exec.Cmd, heartbeat *os.File, bound time.Duration) error
	// Heartbeat writes on w until done is closed, then closes w.
	Heartbeat(w io.WriteCloser, bound time.Duration, done <-chan struct{})
}

// Confiner confines the process tree of a command not started yet: it
// may read (and execute) readOnly, read and write readWrite, and what any
// process needs of the system; nothing else (the sandbox package's
// Landlock).
type Confiner interface {
	Confine(cmd *exec.Cmd, readOnly, readWrite []string) error
	// Nest makes the plugins cmd starts through the wrapper run in a
	// domain nested in cmd's: they may read readOnly and read and write
	// readWrite of what cmd may, and get env in place of the same
	// variables of cmd's environment. Their wrapper execs the file that
	// the link .<name>.real beside their path leads to.
	Nest(cmd *exec.Cmd, readOnly, readWrite, env []string) error
}

// Access is what a confined process tree may reach of the file system
// besides the system's libraries and the CLI's directory.
type Access struct {
	ReadOnly, ReadWrite []string
	// Program, when set, confines further the plugins the command starts
	// through the wrapper (see engine.go).
	Program *ProgramAccess
}

// Command runs the pulumi CLI for the Automation API in a sandbox; it
// implements auto.PulumiCommand. Each process gets an allowlisted
// environment instead of the daemon's, leads its own session and process
// group, and is interrupted (so that the engine can release its lock) and
// then killed as a group when its context ends; with a Reaper, nothing it
// started outlives it. Command is safe for concurrent use.
type Command struct {
	path    string
	version semver.Version
	env     []string
	opts    CommandOptions
}

var _ auto.PulumiCommand = (*Command)(nil)

// NewCommand checks the CLI in opts.Bin by running "pulumi version".
func NewCommand(ctx context.Context, opts CommandOptions) (*Command, error) {
	if opts.KillDelay <= 0 {
		opts.KillDelay = DefaultKillDelay
	}
	if opts.OutputLimit <= 0 {
		opts.OutputLimit = DefaultOutputLimit
	}
	bin, err := filepath.Abs(opts.Bin)
	if err != nil {
		return nil, fmt.Errorf("pulumi directory: %w", err)
	}
	c := &Command{path: filepath.Join(cmpOr(opts.Engine, bin), "pulumi"), opts: opts}
	c.env = c.baseEnv(os.Environ())
	out, _, _, err := c.Run(ctx, "", nil, nil, nil, nil, "version")
	if err != nil {
		return nil, fmt.Errorf("run %s version: %w", c.path, err)
	}
	if c.version, err = semver.ParseTolerant(strings.TrimSpace(out)); err != nil {
		return nil, fmt.Errorf("parse pulumi version %q: %w", strings.TrimSpace(out), err)
	}
	return c, nil
}

// baseEnv is the allowlisted part of environ, with Bin first on PATH,
// followed by opts.Env.
func (c *Command) baseEnv(environ []string) []string {
	var env []string
	path := c.opts.Bin
	for _, kv := range environ {
		k, v, _ := strings.Cut(kv, "=")
		switch {
		case k == "PATH" && v != "":
			path += string(os.PathListSeparator) + v
		case slices.Contains(inheritedEnv, k), matchesAny(c.opts.PassEnv, k):
			env = append(env, kv)
		}
	}
	env = append(env, "PATH="+path)
	return append(env, c.opts.Env...)
}

// SearchPath is the PATH of the processes c starts.
func (c *Command) SearchPath() string {
	var path string
	for _, kv := range c.env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v
		}
	}
	return path
}

// matchesAny says whether name matches one of the globs.
func matchesAny(globs []string, name string) bool {
	for _, g := range globs {
		if ok, _ := path.Match(g, name); ok {
			return true
		}
	}
	return false
}

// Version is the CLI's version.
func (c *Command) Version() semver.Version { return c.version }

// Run runs pulumi with args in workdir, which is all it may write when the
// Command has a sandbox. additionalEnv comes last, so it overrides the
// base environment. It returns what the process printed (up to the output
// limit), its exit code and an error when it failed.
func (c *Command) Run(ctx context.Context, workdir string, stdin io.Reader,
	additionalOutput, additionalErrorOutput []io.Writer, additionalEnv []string, args ...string,
) (string, string, int, error) {
	var access Access
	if workdir != "" {
		access.ReadWrite = []string{workdir}
	}
	return c.RunIn(ctx, access, workdir, stdin, additionalOutput, additionalErrorOutput, additionalEnv, args...)
}

// RunIn is Run with the process tree confined to access when the Command
// has a sandbox.
func (c *Command) RunIn(ctx context.Context, access Access, workdir string, stdin io.Reader,
	additionalOutput, additionalErrorOutput []io.Writer, additionalEnv []string, args ...string,
) (string, string, int, error) {
	if !slices.Contains(args, "--non-interactive") {
		args = append([]string{"--non-interactive"}, args...)
	}
	cmd := exec.Command(c.path, args...)
	cmd.Dir = workdir
	cmd.Env = append(append(slices.Clip(c.env), additionalEnv...), "PULUMI_AUTOMATION_API=true")
	cmd.Stdin = stdin
	stdout := &headBuffer{limit: c.opts.OutputLimit}
	stderr := &tailBuffer{limit: c.opts.OutputLimit}
	cmd.Stdout = io.MultiWriter(append(additionalOutput, stdout)...)
	cmd.Stderr = io.MultiWriter(append(additionalErrorOutput, stderr)...)
	cmd.SysProcAttr = procAttr()
	if c.opts.Sandbox != nil {
		if err := c.confine(cmd, access); err != nil {
			return "", "", -2, fmt.Errorf("sandbox: %w", err)
		}
	}
	ended := func() bool { return false } // orphans may be left
	if c.opts.Reaper != nil {
		var err error
		if ended, err = c.opts.Reaper.Reap(cmd); err != nil {
			return "", "", -2, fmt.Errorf("reaper: %w", err)
		}
	}
	hb, err := c.watch(cmd)
	if err != nil {
		ended()
		return "", "", -2, err
	}

	err = c.runGroup(ctx, cmd, hb)
	if !ended() {
		c.endOrphans()
	}
	code := -2 // the Automation API's "unknown"
	var exitErr *exec.ExitError
	switch {
	case err == nil:
		code = 0
	case errors.As(err, &exitErr):
		code = exitErr.ExitCode()
	}
	if err == nil && stdout.dropped > 0 {
		err = fmt.Errorf("pulumi printed more than %d bytes on stdout", c.opts.OutputLimit)
	}
	return stdout.String(), stderr.String(), code, err
}

// confine confines cmd, and the plugins it starts, to access.
func (c *Command) confine(cmd *exec.Cmd, access Access) error {
	if err := c.opts.Sandbox.Confine(cmd, access.ReadOnly, access.ReadWrite); err != nil {
		return err
	}
	if p := access.Program; p != nil {
		return c.opts.Sandbox.Nest(cmd, p.ReadOnly, p.ReadWrite, p.Env)
	}
	return nil
}

// heartbeat is the daemon's end of a watched command's heartbeat pipe.
type heartbeat struct {
	r, w  *os.File
	bound time.Duration
	beat  func(w io.WriteCloser, bound time.Duration, done <-chan struct{})
	done  chan struct{}
}

// watch puts cmd under the watchdog when c has one; nil otherwise.
func (c *Command) watch(cmd *exec.Cmd) (*heartbeat, error) {
	if c.opts.Watchdog == nil || c.opts.Heartbeat <= 0 {
		return nil, nil
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("watchdog: %w", err)
	}
	if err := c.opts.Watchdog.Watch(cmd, r, c.opts.Heartbeat); err != nil {
		r.Close()
		w.Close()
		return nil, fmt.Errorf("watchdog: %w", err)
	}
	return &heartbeat{r: r, w: w, bound: c.opts.Heartbeat, beat: c.opts.Watchdog.Heartbeat, done: make(chan struct{})}, nil
}

// started closes the read end the child holds now, and starts beating
// when the child started; else it closes the pipe.
func (h *heartbeat) started(ok bool) {
	if h == nil {
		return
	}
	h.r.Close()
	if !ok {
		h.w.Close()
		return
	}
	go h.beat(h.w, h.bound, h.done)
}

// stop ends the heartbeat, once the command ended.
func (h *heartbeat) stop() {
	if h != nil {
		close(h.done)
	}
}

// runGroup starts cmd in its own process group and waits for it. When ctx
// ends first, the group gets SIGINT, then SIGKILL after KillDelay. Once
// the CLI exits, whatever it left in its group (a plugin that ignored its
// parent's exit) is killed.
func (c *Command) runGroup(ctx context.Context, cmd *exec.Cmd, hb *heartbeat) error {
	err := liveCLIs.start(cmd)
	hb.started(err == nil)
	if err != nil {
		return err
	}
	defer liveCLIs.done(cmd.Process.Pid)
	pgid := cmd.Process.Pid
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		select {
		case <-done:
			return
		case <-ctx.Done():
		}
		_ = syscall.Kill(-pgid, syscall.SIGINT)
		select {
		case <-done:
		case <-time.After(c.opts.KillDelay):
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
		}
	}()
	err = cmd.Wait()
	hb.stop()
	close(done)
	wg.Wait()
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	if ctxErr := ctx.Err(); ctxErr != nil && err != nil {
		err = fmt.Errorf("%w (%w)", ctxErr, err)
	}
	return err
}

// headBuffer keeps the first limit bytes written and counts the rest.
type headBuffer struct {
	bytes.Buffer
	limit   int
	dropped int
}

func (b *headBuffer) Write(p []byte) (int, error) {
	room := max(b.limit-b.Len(), 0)
	if len(p) > room {
		b.dropped += len(p) - room
		b.Buffer.Write(p[:room])
		return len(p), nil
	}
	return b.Buffer.Write(p)
}

// tailBuffer keeps the last limit bytes written: an error is at the end.
type tailBuffer struct {
	buf     []byte
	limit   int
	dropped int
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.buf = append(b.buf, p...)
	if over := len(b.buf) - b.limit; over > 0 {
		b.dropped += over
		b.buf = append(b.buf[:0], b.buf[over:]...)
	}
	return len(p), nil
}

func (b *tailBuffer) String() string {
	if b.dropped == 0 {
		return string(b.buf)
	}
	return fmt.Sprintf("[… %d bytes dropped …]\n%s", b.dropped, b.buf)
}
