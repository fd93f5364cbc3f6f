package sandbox

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// escape is shell code that starts a process the way a program escapes
// its operation: a double fork (the subshell exits at once, so its child
// is orphaned) into a session and process group of its own, with no pipe
// of the operation's open, running for five minutes. The process writes
// its pid into pidFile before the script goes on (for ten seconds at
// most), so that tests wait for that file, never for time.
func escape(pidFile string) string {
	return "( setsid sh -c 'echo $$ > \"$0.tmp\" && mv \"$0.tmp\" \"$0\" && exec sleep 300' '" + pidFile + "' </dev/null >/dev/null 2>&1 & )\n" +
		"i=0; while [ ! -e '" + pidFile + "' ] && [ $i -lt 1000 ]; do sleep 0.01; i=$((i+1)); done\n"
}

// reaped starts a shell script through the wrapper with r's reaping
// (confined by l when not nil, to write dir), in a session of its own as
// the runner starts pulumi. The caller waits for the command, then calls
// ended.
func reaped(t *testing.T, l *Landlock, dir string, r *Reaper, script string) (cmd *exec.Cmd, ended func() bool, out *strings.Builder) {
	t.Helper()
	cmd = exec.Command("/bin/sh", "-c", script)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	out = &strings.Builder{}
	cmd.Stdout, cmd.Stderr = out, out
	ended, err := r.Reap(cmd)
	if err != nil {
		t.Fatal(err)
	}
	if l != nil {
		if err := l.Confine(cmd, nil, []string{dir}); err != nil {
			t.Fatal(err)
		}
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
	return cmd, ended, out
}

// gone says whether no process pid exists, not even a zombie: by the
// time the wrapper exited it has waited for what it killed.
func gone(pid int) bool {
	_, err := os.Stat("/proc/" + strconv.Itoa(pid))
	return errors.Is(err, os.ErrNotExist)
}

// killLeftover ends a process a failed test left running.
func killLeftover(t *testing.T, pid int) {
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
}

// TestReapKillsLeftovers is the attack: a command starts a process that
// leaves its session and process group through a double fork, and
// exits. The process must be gone, and counted, once the wrapper exited,
// with the command's exit code; confined or not.
func TestReapKillsLeftovers(t *testing.T) {
	for _, confined := range []bool{false, true} {
		var l *Landlock
		if confined {
			l = newLandlock(t, Options{})
		}
		dir := t.TempDir()
		pidFile := filepath.Join(dir, "leftover.pid")
		var r Reaper
		cmd, ended, out := reaped(t, l, dir, &r, escape(pidFile)+"echo done; exit 3\n")
		err := cmd.Wait()
		clean := ended()
		leftover := waitPIDFile(t, pidFile)
		killLeftover(t, leftover)
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 3 {
			t.Errorf("confined=%v: %v, want exit code 3; output %q", confined, err, out)
		}
		if !gone(leftover) {
			t.Errorf("confined=%v: the leftover %d outlived the command", confined, leftover)
		}
		if got := r.Total(); got != 1 || !clean {
			t.Errorf("confined=%v: %d killed counted, want 1; clean=%v", confined, got, clean)
		}
		if !strings.Contains(out.String(), "done") || !strings.Contains(out.String(), "stackd sandbox: killed 1 process(es) still running after sh exited") {
			t.Errorf("confined=%v: output %q", confined, out)
		}
	}
}

// TestReapKillsTrees: what is left may be a tree, in the command's
// group or in groups of its own: all of it ends, and a process group
// counts once.
func TestReapKillsTrees(t *testing.T) {
	dir := t.TempDir()
	// A background child of the command's own group, with a child; and
	// a setsid'd group of three.
	script := "sh -c 'sleep 300 & echo $! > " + dir + "/a.tmp; mv " + dir + "/a.tmp " + dir + "/a; wait' &\n" +
		"setsid sh -c 'sleep 300 & sleep 300 & echo $! > " + dir + "/b.tmp; mv " + dir + "/b.tmp " + dir + "/b; wait' </dev/null >/dev/null 2>&1 &\n" +
		"while [ ! -e " + dir + "/a ] || [ ! -e " + dir + "/b ]; do sleep 0.01; done\n"
	var r Reaper
	cmd, ended, out := reaped(t, nil, dir, &r, script)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if !ended() {
		t.Error("the wrapper did not report")
	}
	for _, f := range []string{"a", "b"} {
		pid := waitPIDFile(t, filepath.Join(dir, f))
		killLeftover(t, pid)
		if !gone(pid) {
			t.Errorf("the leftover %d (%s) outlived the command", pid, f)
		}
	}
	// The group's shell counts with its group; the other shell and its
	// sleep were found running one after the other.
	if got := r.Total(); got != 3 {
		t.Errorf("%d killed counted, want 3; output %q", got, out)
	}
}

// TestReapInterrupted: an operation past its timeout is interrupted, as
// the runner does, through the command's process group, which the
// escaped process is not in. The command ends by the interrupt, and the
// wrapper kills the escaped process before it ends the same way.
func TestReapInterrupted(t *testing.T) {
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "leftover.pid")
	var r Reaper
	cmd, ended, _ := reaped(t, nil, dir, &r, escape(pidFile)+"exec sleep 60\n")
	leftover := waitPIDFile(t, pidFile)
	killLeftover(t, leftover)
	if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	clean := ended()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGINT || !clean {
		t.Errorf("%v, clean=%v; want ended by SIGINT, clean", err, clean)
	}
	if !gone(leftover) {
		t.Errorf("the leftover %d outlived the interrupted command", leftover)
	}
	if got := r.Total(); got != 1 {
		t.Errorf("%d killed counted, want 1", got)
	}
}

// TestReapNothingLeft: a command that leaves nothing is counted as
// such, and the wrapper says nothing.
func TestReapNothingLeft(t *testing.T) {
	var r Reaper
	cmd, ended, out := reaped(t, nil, "", &r, "sleep 0 & wait; echo ok")
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	if clean := ended(); r.Total() != 0 || !clean || out.String() != "ok\n" {
		t.Errorf("counted %d, clean=%v, output %q", r.Total(), clean, out)
	}
}

// TestReapKilledWrapper: a wrapper killed before the command ended
// reports nothing, and the caller learns that orphans may be left.
func TestReapKilledWrapper(t *testing.T) {
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "leftover.pid")
	var r Reaper
	cmd, ended, _ := reaped(t, nil, dir, &r, escape(pidFile)+"exec sleep 60\n")
	leftover := waitPIDFile(t, pidFile)
	killLeftover(t, leftover)
	if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if clean := ended(); clean || r.Total() != 0 {
		t.Errorf("clean=%v, counted %d; want neither", clean, r.Total())
	}
	if gone(leftover) {
		t.Errorf("the leftover %d ended without anyone to kill it", leftover)
	}
}

// envTestDaemon makes the test binary a stand-in for the daemon (see
// testDaemon); its value is the script to run.
const envTestDaemon = "SANDBOX_TEST_DAEMON"

// testDaemon runs script as the runner runs the pulumi CLI: through the
// wrapper with reaping, in a session of its own, with SIGKILL as its
// parent-death signal; and waits for it.
func testDaemon(script string) int {
	cmd := exec.Command("/bin/sh", "-c", script)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Pdeathsig: syscall.SIGKILL}
	// Pipes to this process, as the runner's buffers are: they break
	// when it dies, and the wrapper still writes why it kills.
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	var r Reaper
	if _, err := r.Reap(cmd); err != nil {
		return 2
	}
	if os.Getenv("SANDBOX_TEST_CONFINE") != "" {
		l, err := New(Options{})
		if err != nil {
			return 3
		}
		if err := l.Confine(cmd, nil, []string{os.Getenv("SANDBOX_TEST_CONFINE")}); err != nil {
			return 4
		}
	}
	hr, hw, err := os.Pipe()
	if err != nil {
		return 5
	}
	var wd Watchdog
	if err := wd.Watch(cmd, hr, 10*time.Second); err != nil {
		return 6
	}
	if err := cmd.Start(); err != nil {
		return 1
	}
	hr.Close()
	go wd.Heartbeat(hw, 10*time.Second, make(chan struct{}))
	if err := cmd.Wait(); err != nil {
		return 1
	}
	return 0
}

// TestReapDaemonKilled is the attack on a daemon killed mid-operation
// (SIGKILL, the OOM killer): the operation's processes, the escaped ones
// too, must end with it, rather than go on beside the operation that
// another replica, or the restarted daemon, starts.
func TestReapDaemonKilled(t *testing.T) {
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "leftover.pid")
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	daemon := exec.Command(self)
	daemon.Env = append(os.Environ(), envTestDaemon+"="+escape(pidFile)+"exec sleep 300\n", "SANDBOX_TEST_CONFINE="+dir)
	if err := daemon.Start(); err != nil {
		t.Fatal(err)
	}
	leftover := waitPIDFile(t, pidFile)
	killLeftover(t, leftover)
	if err := daemon.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = daemon.Wait()
	deadline := time.Now().Add(time.Minute)
	for !gone(leftover) {
		if time.Now().After(deadline) {
			t.Fatalf("the leftover %d outlived the daemon by a minute", leftover)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestReported: the daemon reads a small count on a line and nothing
// else, and never waits for a report.
func TestReported(t *testing.T) {
	for in, want := range map[string]int{
		"": -1, "2\n": 2, "0\n": 0, "17\nextra": 17, "x\n": -1, "-1\n": -1, "99999999999\n": -1, "3": -1,
	} {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.WriteString(in); err != nil {
			t.Fatal(err)
		}
		// w stays open: a process that kept the pipe must not block.
		if n, ok := reported(r); n != max(want, 0) || ok != (want >= 0) {
			t.Errorf("reported(%q) = %d, %v; want %d (-1: none)", in, n, ok, want)
		}
		r.Close()
		w.Close()
	}
}
