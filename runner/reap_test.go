package runner

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/stackd/stackd/sandbox"
)

// reaperChildEnv makes TestReapOrphans run its scenario: in a child
// process, which makes itself a subreaper without touching the test
// binary that runs the other tests.
const reaperChildEnv = "STACKD_TEST_REAPER_CHILD"

// TestReapOrphans: a process to which orphans are reparented (here a
// child subreaper, as stackd run and PID 1 are) kills and reaps an orphan
// whatever its name, session or group, and counts it; it takes neither a
// live CLI nor a child of its own process group (go-git's
// git-upload-pack), running or ended, whose Wait still gets their exit
// status.
func TestReapOrphans(t *testing.T) {
	if os.Getenv(reaperChildEnv) == "1" {
		reapScenario(t)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestReapOrphans$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), reaperChildEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: TestReapOrphans") {
		t.Fatalf("the scenario in a subreaper: %v\n%s", err, out)
	}
}

func reapScenario(t *testing.T) {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		t.Fatalf("become a subreaper: %v", err)
	}
	if !orphansComeHere() {
		t.Fatal("a subreaper does not count as receiving orphans")
	}
	var r sandbox.Reaper
	c := &Command{opts: CommandOptions{Reaper: &r}}

	// A live CLI, and a child of this process's own group that its
	// starter waits for (as go-git waits for git-upload-pack), both
	// running until their stdin closes.
	cli := exec.Command("sh", "-c", "read x; exit 3")
	cli.SysProcAttr = procAttr()
	cliIn, err := cli.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := liveCLIs.start(cli); err != nil {
		t.Fatal(err)
	}
	own := exec.Command("sh", "-c", "read x; exit 4")
	ownIn, err := own.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := own.Start(); err != nil {
		t.Fatal(err)
	}

	orphan := startOrphan(t)
	c.endOrphans()
	if _, ok := statOf(orphan); ok {
		t.Errorf("the orphan %d is still there", orphan)
	}
	if got := r.Total(); got != 1 {
		t.Errorf("%d killed counted, want 1", got)
	}
	for _, pid := range []int{cli.Process.Pid, own.Process.Pid} {
		if st, ok := statOf(pid); !ok || st.state == "Z" {
			t.Errorf("process %d was killed: %+v", pid, st)
		}
	}

	// Ended, they are left to their starters too.
	cliIn.Close()
	ownIn.Close()
	for _, pid := range []int{cli.Process.Pid, own.Process.Pid} {
		waitFor(t, "process "+strconv.Itoa(pid)+" ended", func() bool { st, ok := statOf(pid); return ok && st.state == "Z" })
	}
	c.endOrphans()
	for want, cmd := range map[int]*exec.Cmd{3: cli, 4: own} {
		var exit *exec.ExitError
		if err := cmd.Wait(); !errors.As(err, &exit) || exit.ExitCode() != want {
			t.Errorf("%s: Wait = %v, want exit status %d (the reaper took it?)", cmd, err, want)
		}
	}
	liveCLIs.done(cli.Process.Pid)

	// The reaper's rounds take an orphan that comes later.
	reapPeriod = 20 * time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go c.reapOrphans(ctx)
	orphan = startOrphan(t)
	waitFor(t, "the orphan killed and counted", func() bool { _, ok := statOf(orphan); return !ok && r.Total() == 2 })
}

// startOrphan has a shell in a session of its own, as a CLI is, start a
// sleep in another session and exit; the sleep comes here as an orphan.
func startOrphan(t *testing.T) int {
	t.Helper()
	sh := exec.Command("sh", "-c", "setsid sleep 300 </dev/null >/dev/null 2>&1 & echo $!")
	sh.SysProcAttr = procAttr()
	out, err := sh.Output()
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatalf("orphan pid %q: %v", out, err)
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	if st, ok := statOf(pid); !ok || st.ppid != os.Getpid() {
		t.Fatalf("the orphan %d was not reparented here: %+v", pid, st)
	}
	return pid
}

// statOf reads /proc/<pid>/stat; false once the process is gone.
func statOf(pid int) (procStat, bool) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, false
	}
	return parseStat(string(data))
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: timed out", what)
		}
	}
}

func TestParseStat(t *testing.T) {
	tests := []struct {
		line string
		want procStat
		ok   bool
	}{
		{"42 (pulumi-resource-aws) Z 1 40 40 0 -1 4194316 0", procStat{"Z", 1, 40}, true},
		{"43 (sleep) S 7 7 7 0 -1", procStat{"S", 7, 7}, true},
		{"44 (a (b) c) Z 1 44 44 0", procStat{"Z", 1, 44}, true},
		{"45 (x) Z", procStat{}, false},
		{"46 (x) Z one 2", procStat{}, false},
		{"47 no parentheses", procStat{}, false},
	}
	for _, tt := range tests {
		got, ok := parseStat(tt.line)
		if ok != tt.ok || got != tt.want {
			t.Errorf("parseStat(%q) = %+v, %v; want %+v, %v", tt.line, got, ok, tt.want, tt.ok)
		}
	}
}
