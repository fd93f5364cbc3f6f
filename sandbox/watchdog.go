package sandbox

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The watchdog makes a command's process group die with the daemon that
// started it, even when that daemon cannot act: a replica frozen by
// SIGSTOP, or a VM paused, keeps its lease no longer, and another
// replica takes its stacks over; its pulumi processes must not go on
// writing beside the new holder's. The daemon writes a byte on a pipe
// every little while (Heartbeat); the wrapper runs the command as its
// child and kills the whole process group, itself included, when no byte
// came for the bound, or when the pipe closes (the daemon is gone).

// Watchdog is the daemon's side of the watchdog.
type Watchdog struct{}

// Watch rewrites cmd, not started yet, so that the wrapper runs it under
// the watchdog: heartbeat is the read end of a pipe, handed to the
// wrapper, and bound the longest time without a byte on it before the
// process group is killed. The caller closes its copy of heartbeat once
// cmd started, and writes on the other end (see Heartbeat) until cmd
// ended. It works with or without Confine, in either order.
func (Watchdog) Watch(cmd *exec.Cmd, heartbeat *os.File, bound time.Duration) error {
	if bound <= 0 {
		return fmt.Errorf("sandbox: watchdog bound %s is not positive", bound)
	}
	fd := 3 + len(cmd.ExtraFiles)
	cmd.ExtraFiles = append(cmd.ExtraFiles, heartbeat)
	throughWrapper(cmd, envWatchdog+"="+strconv.Itoa(fd)+":"+strconv.FormatInt(int64(bound), 10))
	return nil
}

// Heartbeat writes a byte on w every bound/5 until done is closed, then
// closes w. A write that fails (the wrapper ended) stops it early.
func (Watchdog) Heartbeat(w io.WriteCloser, bound time.Duration, done <-chan struct{}) {
	defer w.Close()
	t := time.NewTicker(bound / 5)
	defer t.Stop()
	for {
		if _, err := w.Write([]byte{0}); err != nil {
			return
		}
		select {
		case <-done:
			return
		case <-t.C:
		}
	}
}

// watchdog is the wrapper's side: the heartbeat's descriptor and bound.
type watchdog struct {
	fd    int
	bound time.Duration
}

// parseWatchdog reads "<fd>:<bound in nanoseconds>".
func parseWatchdog(s string) (watchdog, error) {
	a, b, ok := strings.Cut(s, ":")
	fd, err1 := strconv.Atoi(a)
	ns, err2 := strconv.ParseInt(b, 10, 64)
	if !ok || err1 != nil || err2 != nil || fd < 3 || ns <= 0 {
		return watchdog{}, fmt.Errorf("bad watchdog setting %q", s)
	}
	return watchdog{fd: fd, bound: time.Duration(ns)}, nil
}

// supervise runs args as a child in this process's group and returns its
// exit code; when the heartbeat stops for the bound or its pipe closes,
// it kills the group instead (and so itself). A child killed by a signal
// is mirrored: the wrapper ends by the same signal.
func (wd watchdog) supervise(args []string) (int, error) {
	beats := os.NewFile(uintptr(wd.fd), "heartbeat")
	syscall.CloseOnExec(wd.fd)
	// Interrupts reach the whole group, the child among them: the
	// wrapper waits for the child to end rather than dying first. A
	// handled signal, unlike an ignored one, is reset for the child.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	// The child dies with the wrapper; the thread that starts it is
	// locked (wrap), as Pdeathsig fires when that thread ends.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return exitWrapper, fmt.Errorf("start %s: %w", args[0], err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	why := wd.watch(beats, exited)
	if why == "" {
		return exitCode(cmd.ProcessState)
	}
	fmt.Fprintf(os.Stderr, "stackd sandbox: %s; killing the operation's processes\n", why)
	_ = syscall.Kill(0, syscall.SIGKILL) // the whole group, this process too
	select {}
}

// watch waits for the child to exit (""), or for the heartbeat to stop
// or its pipe to close (the reason to kill the group).
func (wd watchdog) watch(beats *os.File, exited <-chan error) string {
	beat, gone := make(chan struct{}, 1), make(chan struct{})
	go func() {
		buf := make([]byte, 64)
		for {
			if _, err := beats.Read(buf); err != nil {
				close(gone)
				return
			}
			select {
			case beat <- struct{}{}:
			default:
			}
		}
	}()
	timer := time.NewTimer(wd.bound)
	defer timer.Stop()
	for {
		select {
		case <-exited:
			return ""
		case <-beat:
			timer.Reset(wd.bound)
		case <-gone:
			return "stackd closed the heartbeat pipe (it ended)"
		case <-timer.C:
			return fmt.Sprintf("no heartbeat from stackd for %s (stopped or frozen)", wd.bound)
		}
	}
}

// exitCode is the code the wrapper ends with for a child that ended as
// ps says: its exit code, or, when a signal killed it, by that signal.
func exitCode(ps *os.ProcessState) (int, error) {
	ws, ok := ps.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() {
		return ps.ExitCode(), nil
	}
	sig := ws.Signal()
	signal.Reset(sig)
	_ = syscall.Kill(os.Getpid(), sig)
	time.Sleep(100 * time.Millisecond) // the signal is on its way
	return 128 + int(sig), errors.New("child killed by " + sig.String())
}
