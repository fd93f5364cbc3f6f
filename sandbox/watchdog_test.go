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

// watched starts a shell script under the watchdog (confined by l when
// not nil), in a process group of its own as the runner starts pulumi.
// beat says whether the test sends heartbeats; the returned pipe end is
// the daemon's.
func watched(t *testing.T, l *Landlock, script string, bound time.Duration, beat bool) (*exec.Cmd, *os.File, *strings.Builder) {
	t.Helper()
	cmd := exec.Command("/bin/sh", "-c", script)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := (Watchdog{}).Watch(cmd, r, bound); err != nil {
		t.Fatal(err)
	}
	if l != nil {
		if err := l.Confine(cmd, nil, []string{t.TempDir()}); err != nil {
			t.Fatal(err)
		}
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r.Close()
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); w.Close() })
	if beat {
		done := make(chan struct{})
		go Watchdog{}.Heartbeat(w, bound, done)
		t.Cleanup(func() { close(done) })
	}
	return cmd, w, &out
}

// alive says whether process pid exists (and is no zombie).
func alive(pid int) bool {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(data)
	return !strings.HasPrefix(strings.Fields(s[strings.LastIndexByte(s, ')')+1:])[0], "Z")
}

// waitPIDFile reads the pid a script wrote into path.
func waitPIDFile(t *testing.T, path string) int {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		data, err := os.ReadFile(path)
		if pid, perr := strconv.Atoi(strings.TrimSpace(string(data))); err == nil && perr == nil {
			return pid
		}
	}
	t.Fatalf("no pid in %s", path)
	return 0
}

// TestWatchRuns: with heartbeats a command outlives the bound three times
// and its exit code comes through, confined or not. The bound is a second,
// not less: a busy machine may well hold a heartbeat back for a few
// hundred milliseconds, which is no frozen daemon.
func TestWatchRuns(t *testing.T) {
	for _, confined := range []bool{false, true} {
		var l *Landlock
		if confined {
			l = newLandlock(t, Options{})
		}
		cmd, _, out := watched(t, l, "sleep 3; echo done; exit 3", time.Second, true)
		err := cmd.Wait()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 3 {
			t.Errorf("confined=%v: %v, want exit code 3; output %q", confined, err, out)
		}
		if !strings.Contains(out.String(), "done") {
			t.Errorf("confined=%v: output %q", confined, out)
		}
	}
}

// TestWatchKillsWithoutHeartbeat: when the heartbeat stops (the daemon
// frozen) the whole group dies, grandchildren too, once the bound passed
// and not before; when the pipe closes (the daemon gone), at once: there
// the bound is a minute, which the test would have to wait for, so that a
// kill for the closed pipe is told from one for the bound by the wrapper's
// word, not by a clock that a loaded machine slows.
func TestWatchKillsWithoutHeartbeat(t *testing.T) {
	for _, closed := range []bool{false, true} {
		pidFile := filepath.Join(t.TempDir(), "pid")
		bound := time.Second
		if closed {
			bound = time.Minute
		}
		start := time.Now()
		cmd, w, out := watched(t, nil, "sleep 300 & echo $! > "+pidFile+".tmp; mv "+pidFile+".tmp "+pidFile+"; wait", bound, false)
		grandchild := waitPIDFile(t, pidFile)
		if closed {
			w.Close()
		}
		err := cmd.Wait()
		took := time.Since(start)
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Errorf("closed=%v: %v, want killed", closed, err)
		}
		// The wrapper's clock starts after start: never a flake.
		if !closed && took < bound {
			t.Errorf("killed after %s, before the bound %s", took, bound)
		}
		// SIGKILLed with the group: dead soon, however busy the machine.
		for deadline := time.Now().Add(30 * time.Second); alive(grandchild) && time.Now().Before(deadline); {
			time.Sleep(10 * time.Millisecond)
		}
		if alive(grandchild) {
			t.Errorf("closed=%v: the grandchild %d outlived the group", closed, grandchild)
		}
		want := "no heartbeat"
		if closed {
			want = "closed the heartbeat pipe"
		}
		if !strings.Contains(out.String(), want) {
			t.Errorf("closed=%v: the wrapper said %q, want %q", closed, out, want)
		}
		t.Logf("closed=%v: the group was killed after %s", closed, took.Round(time.Millisecond))
	}
}

// TestWatchInterrupt: an interrupt of the group (the runner's cancel)
// ends the command, and the wrapper ends by the same signal. The
// interrupt comes once the command runs (it wrote its file), so the
// wrapper already waits for it: before, the wrapper would ignore the
// interrupt and then start the command, which nothing interrupts.
func TestWatchInterrupt(t *testing.T) {
	started := filepath.Join(t.TempDir(), "started")
	cmd, _, _ := watched(t, nil, "echo $$ > "+started+".tmp; mv "+started+".tmp "+started+"; exec sleep 60", time.Minute, true)
	waitPIDFile(t, started)
	if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGINT {
		t.Fatalf("%v, want ended by SIGINT", err)
	}
}

func TestParseWatchdog(t *testing.T) {
	for _, c := range []struct {
		in string
		ok bool
	}{
		{"3:1000", true}, {"5:15000000000", true},
		{"", false}, {"3", false}, {"2:1000", false}, {"x:1000", false}, {"3:0", false}, {"3:-5", false},
	} {
		if _, err := parseWatchdog(c.in); (err == nil) != c.ok {
			t.Errorf("parseWatchdog(%q) = %v, want ok=%v", c.in, err, c.ok)
		}
	}
}
