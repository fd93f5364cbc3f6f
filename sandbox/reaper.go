package sandbox

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Nothing a command starts outlives it. The wrapper runs the command as
// its child and is a child subreaper: a process whose parent ends (a
// plugin of a CLI that exited, a double fork, a setsid'd daemon) is
// reparented to it rather than to init. When the command exits, the
// wrapper kills every process left below it, process groups and
// sessions of their own included, waits for them, and only then exits.
// When the wrapper itself is killed (the runner's kill of its process
// group past the timeout), what is left goes to the daemon, itself a
// subreaper, which kills it (the runner's orphan reaper).

// Reaper is the daemon's side of the wrapper's reaping: it counts the
// processes the wrappers, and the daemon itself, had to kill. Its zero
// value is ready; it is safe for concurrent use.
type Reaper struct {
	killed atomic.Uint64
}

// Reap rewrites cmd, not started yet, so that the wrapper runs it and
// kills whatever it left running once it exits. The caller calls ended
// once cmd ended, or failed to start: it counts the processes the
// wrapper killed, and says whether the wrapper reported that it ended
// them all. When it did not (it was killed, or never started), what is
// left of cmd's tree is orphaned: the caller kills what comes to it
// (see AdoptOrphans). It works with Confine and Watch, in any order.
func (r *Reaper) Reap(cmd *exec.Cmd) (ended func() (clean bool), err error) {
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("sandbox: report pipe: %w", err)
	}
	fd := 3 + len(cmd.ExtraFiles)
	cmd.ExtraFiles = append(cmd.ExtraFiles, pw)
	throughWrapper(cmd, envReap+"="+strconv.Itoa(fd))
	return func() bool {
		pw.Close()
		defer pr.Close()
		n, ok := reported(pr)
		r.Killed(n)
		return ok
	}, nil
}

// Killed counts n processes killed because their operation ended: the
// runner's own kills of orphans that came to the daemon.
func (r *Reaper) Killed(n int) {
	if n > 0 {
		r.killed.Add(uint64(n))
	}
}

// Total is how many processes were killed so far.
func (r *Reaper) Total() uint64 { return r.killed.Load() }

// AdoptOrphans makes this process (the daemon) a child subreaper: what a
// wrapper leaves when it is killed comes here rather than to init, where
// it would run on, and the runner kills it. The daemon starts no process
// that outlives its parent, so every orphan is such a leftover.
func AdoptOrphans() error {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("sandbox: become a child subreaper: %w", err)
	}
	return nil
}

// reported reads the count the wrapper wrote on its report pipe before
// it exited: a decimal number and a newline; ok says it found one. It
// never waits: a wrapper that was killed wrote nothing, and a process
// that kept a copy of the pipe must not hold the daemon. Nothing of what
// it reads is used but a small number, so a forged report can only
// miscount, or spare the daemon a search for orphans that its orphan
// reaper's next round makes anyway.
func reported(r *os.File) (n int, ok bool) {
	raw, err := r.SyscallConn()
	if err != nil {
		return 0, false
	}
	var buf [32]byte
	_ = raw.Read(func(fd uintptr) bool {
		n, _ = syscall.Read(int(fd), buf[:]) // os.Pipe's ends do not block
		return true
	})
	line, _, found := strings.Cut(string(buf[:max(n, 0)]), "\n")
	count, err := strconv.ParseUint(line, 10, 16)
	if !found || err != nil {
		return 0, false
	}
	return int(count), true
}

// supervise runs args as this process's child, in its process group,
// and returns the code this process ends with. This process reaps every
// orphan that comes to it while the child runs; once the child exited,
// it kills and reaps whatever the child left, reports how many on report
// (when not nil) and ends as the child did. When the watchdog (when not
// nil) says the daemon is gone or frozen, it kills the child and the
// rest at once and then its own process group, itself included.
//
// It runs on the thread locked by wrap, which dropped its capabilities:
// the child is started from it, and Pdeathsig, which kills the child
// when that thread ends, fires only with the process.
func supervise(args []string, wd *watchdog, report *os.File) (int, error) {
	path, err := exec.LookPath(args[0])
	if err != nil {
		return exitWrapper, err
	}
	// Interrupts reach the whole group, the child among them: the
	// wrapper waits for the child to end rather than dying first, and
	// forwards nothing (a second SIGINT makes pulumi stop at once,
	// without releasing its lock). A handled signal, unlike an ignored
	// one, is reset for the child.
	interrupts := make(chan os.Signal, 1)
	signal.Notify(interrupts, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	// The daemon gone, writing to its pipes (stderr, the report) fails
	// rather than killing this process before it killed the operation.
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	gone, err := onParentDeath()
	if err != nil {
		return exitWrapper, err
	}
	// Asked for before the child starts, so that no exit is missed.
	chld := make(chan os.Signal, 1)
	signal.Notify(chld, syscall.SIGCHLD)
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return exitWrapper, fmt.Errorf("become a subreaper: %w", err)
	}
	// Non-dumpable, so that no process of the same user opens the
	// report and heartbeat pipes through /proc/<pid>/fd. The child,
	// once it execs, is dumpable again.
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return exitWrapper, fmt.Errorf("protect the wrapper: %w", err)
	}
	// An interrupt that came while this process got ready reached no
	// child: it ends this process as it would have without the handler,
	// and the command never starts. One that comes later reaches the
	// child with the group.
	select {
	case sig := <-interrupts:
		tell(report, 0, path)
		return dieBy(sig.(syscall.Signal)), fmt.Errorf("%s before %s started", sig, args[0])
	default:
	}
	child, err := syscall.ForkExec(path, args, &syscall.ProcAttr{
		Env:   os.Environ(),
		Files: []uintptr{0, 1, 2},
		Sys:   &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL},
	})
	if err != nil {
		return exitWrapper, fmt.Errorf("start %s: %w", args[0], err)
	}
	var stop <-chan string
	if wd != nil {
		stop = wd.stopped()
	}
	for {
		select {
		case <-chld:
			_, ws, done := reap(child)
			if !done {
				continue
			}
			tell(report, endLeftovers(0), path)
			return exitStatus(ws)
		case why := <-stop:
			kill(child, why, report, path)
		case <-gone:
			kill(child, "stackd ended without ending the operation", report, path)
		}
	}
}

// kill ends the operation because of why: the child and whatever it
// left, then this process's group, this process too. It never returns.
func kill(child int, why string, report *os.File, path string) {
	fmt.Fprintf(os.Stderr, "stackd sandbox: %s; killing the operation's processes\n", why)
	_ = syscall.Kill(child, syscall.SIGKILL) // not reaped yet: the pid is still the child's
	tell(report, endLeftovers(child), path)
	_ = syscall.Kill(0, syscall.SIGKILL) // the group, this process too
	select {}
}

// parentDeath is the signal the kernel sends the wrapper when the daemon
// that started it dies (PR_SET_PDEATHSIG).
const parentDeath = syscall.SIGUSR1

// onParentDeath has the kernel signal this process when the daemon that
// started it dies, and returns the channel where that signal arrives.
//
// The daemon starts the wrapper with SIGKILL as its parent-death signal,
// so that nothing of an operation outlives it (runner's procAttr); but
// killed, the wrapper could not kill what the operation left: processes
// of their own groups and sessions (the engine starts each plugin in a
// group of its own) that come to the wrapper as its subreaper, and would
// go to init once it died, running on beside the operation another
// replica starts. A signal the wrapper handles lets it end them first.
// The kernel keeps the parent-death signal per thread: this runs in the
// package's initializer, on the main thread, whose signal the daemon set.
// Until it is replaced here, the daemon's death kills the wrapper before
// it started anything, so no moment goes uncovered.
func onParentDeath() (<-chan os.Signal, error) {
	gone := make(chan os.Signal, 1)
	signal.Notify(gone, parentDeath)
	if err := unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(parentDeath), 0, 0, 0); err != nil {
		return nil, fmt.Errorf("set the parent-death signal: %w", err)
	}
	return gone, nil
}

// reap waits for the children that ended. It says whether a child is
// left, and returns child's wait status once child is among those that
// ended.
func reap(child int) (left bool, status syscall.WaitStatus, done bool) {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		switch {
		case err == syscall.EINTR:
		case err != nil: // ECHILD
			return false, status, done
		case pid == 0: // the others run
			return true, status, done
		case pid == child:
			status, done = ws, true
		}
	}
}

// endLeftovers kills every process below this one and waits until none
// is left. A child that ends makes its own children this process's, so
// it kills the children it finds, with the process groups they lead,
// until it has no child. It returns how many processes it found running,
// but except: a process is counted once, with the group it leads.
//
// Only processes not reaped yet are signalled, by the one goroutine
// that reaps them, so no pid (or group led by one) can be another
// process's by then.
func endLeftovers(except int) int {
	me := os.Getpid()
	signalled := map[int]bool{} // pids, and process groups as -pgid
	n := 0
	for {
		if left, _, _ := reap(0); !left {
			return n
		}
		killed := false
		for _, c := range children(me) {
			if c.zombie {
				continue // reaped next round
			}
			if c.pid != except && !signalled[c.pid] && !signalled[-c.pgrp] {
				n++
			}
			_ = syscall.Kill(c.pid, syscall.SIGKILL)
			signalled[c.pid], killed = true, true
			if c.pgrp == c.pid {
				_ = syscall.Kill(-c.pid, syscall.SIGKILL)
				signalled[-c.pid] = true
			}
		}
		if !killed {
			// A child that came here while /proc was read: look again.
			time.Sleep(time.Millisecond)
			continue
		}
		// One of those killed ends; its children are reparented here
		// before it can be waited for.
		var ws syscall.WaitStatus
		for {
			if _, err := syscall.Wait4(-1, &ws, 0, nil); err != syscall.EINTR {
				break
			}
		}
	}
}

// proc is a process as /proc/<pid>/stat shows it.
type proc struct {
	pid, pgrp int
	zombie    bool
}

// children lists the children of process me.
func children(me int) []proc {
	entries, _ := os.ReadDir("/proc")
	var out []proc
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue // ended meanwhile
		}
		if state, ppid, pgrp, ok := parseStat(string(data)); ok && ppid == me {
			out = append(out, proc{pid: pid, pgrp: pgrp, zombie: state == "Z"})
		}
	}
	return out
}

// parseStat reads the state, parent and process group of a
// /proc/<pid>/stat line: "pid (comm) state ppid pgrp …", where comm may
// hold spaces and parentheses.
func parseStat(s string) (state string, ppid, pgrp int, ok bool) {
	end := strings.LastIndexByte(s, ')')
	if end < 0 {
		return "", 0, 0, false
	}
	f := strings.Fields(s[end+1:])
	if len(f) < 3 {
		return "", 0, 0, false
	}
	ppid, err1 := strconv.Atoi(f[1])
	pgrp, err2 := strconv.Atoi(f[2])
	return f[0], ppid, pgrp, err1 == nil && err2 == nil
}

// tell reports n killed processes on report, and says so on stderr, in
// the operation's log.
func tell(report *os.File, n int, path string) {
	if n > 0 {
		fmt.Fprintf(os.Stderr, "stackd sandbox: killed %d process(es) still running after %s exited\n", n, filepath.Base(path))
	}
	if report != nil {
		fmt.Fprintf(report, "%d\n", n)
		report.Close()
	}
}

// exitStatus is the code the wrapper ends with for a child that ended
// as ws says: its exit code, or, when a signal killed it, by that
// signal, so that the daemon sees what it would have seen without the
// wrapper.
func exitStatus(ws syscall.WaitStatus) (int, error) {
	if !ws.Signaled() {
		return ws.ExitStatus(), nil
	}
	return dieBy(ws.Signal()), errors.New("child killed by " + ws.Signal().String())
}

// dieBy ends this process by sig, as if no handler had caught it, or,
// should it live on, returns the shell's code for it.
func dieBy(sig syscall.Signal) int {
	signal.Reset(sig)
	_ = syscall.Kill(os.Getpid(), sig)
	time.Sleep(100 * time.Millisecond) // the signal is on its way
	return 128 + int(sig)
}
