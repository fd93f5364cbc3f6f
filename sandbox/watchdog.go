package sandbox

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// The watchdog makes a command's process group die with the daemon that
// started it, even when that daemon cannot act: a replica frozen by
// SIGSTOP, or a VM paused, keeps its lease no longer, and another
// replica takes its stacks over; its pulumi processes must not go on
// writing beside the new holder's. The daemon writes a byte on a pipe
// every little while (Heartbeat); the wrapper, which runs the command as
// its child, kills every process of the operation (see supervise), then
// its process group and itself, when no byte came for the bound, or when
// the pipe closes (the daemon is gone).

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
func parseWatchdog(s string) (*watchdog, error) {
	a, b, ok := strings.Cut(s, ":")
	fd, err1 := strconv.Atoi(a)
	ns, err2 := strconv.ParseInt(b, 10, 64)
	if !ok || err1 != nil || err2 != nil || fd < 3 || ns <= 0 {
		return nil, fmt.Errorf("bad watchdog setting %q", s)
	}
	return &watchdog{fd: fd, bound: time.Duration(ns)}, nil
}

// stopped starts reading the heartbeat and returns the reason to kill
// the operation's processes once the heartbeat stopped for the bound or
// its pipe closed (the daemon is frozen or gone).
func (wd *watchdog) stopped() <-chan string {
	beats := os.NewFile(uintptr(wd.fd), "heartbeat")
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
	why := make(chan string, 1)
	go func() {
		timer := time.NewTimer(wd.bound)
		defer timer.Stop()
		for {
			select {
			case <-beat:
				timer.Reset(wd.bound)
			case <-gone:
				why <- "stackd closed the heartbeat pipe (it ended)"
				return
			case <-timer.C:
				why <- fmt.Sprintf("no heartbeat from stackd for %s (stopped or frozen)", wd.bound)
				return
			}
		}
	}()
	return why
}
