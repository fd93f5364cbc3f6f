package runner

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// reaperChildEnv makes TestReapOrphans run its scenario: in a child
// process, which makes itself a subreaper without touching the test
// binary that runs the other tests.
const reaperChildEnv = "STACKD_TEST_REAPER_CHILD"

// TestReapOrphans: a process to which orphans are reparented (here a
// child subreaper, as PID 1 is) reaps an ended orphan whatever its name,
// and takes neither a live CLI nor a child of its own process group
// (go-git's git-upload-pack), whose Wait still gets their exit status.
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
	reapPeriod = 20 * time.Millisecond
	c := &Command{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go c.reapOrphans(ctx)

	// An orphan not named pulumi-*: a shell in a group of its own, as a
	// CLI is, starts a sleep and exits; the sleep comes here.
	sh := exec.Command("sh", "-c", "sleep 1 & echo $!")
	sh.SysProcAttr = procAttr()
	out, err := sh.Output()
	if err != nil {
		t.Fatal(err)
	}
	orphan, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatalf("orphan pid %q: %v", out, err)
	}
	if st, ok := statOf(orphan); !ok || st.ppid != os.Getpid() {
		t.Fatalf("the orphan %d was not reparented here: %+v", orphan, st)
	}

	// A live CLI, and a child of this process's own group that its
	// starter waits for (as go-git waits for git-upload-pack); both end.
	cli := exec.Command("sh", "-c", "exit 3")
	cli.SysProcAttr = procAttr()
	if err := c.live.start(cli); err != nil {
		t.Fatal(err)
	}
	own := exec.Command("sh", "-c", "exit 4")
	if err := own.Start(); err != nil {
		t.Fatal(err)
	}
	for _, pid := range []int{cli.Process.Pid, own.Process.Pid} {
		waitFor(t, "process "+strconv.Itoa(pid)+" ended", func() bool { st, ok := statOf(pid); return ok && st.state == "Z" })
	}
	time.Sleep(10 * reapPeriod) // the reaper passes over them
	for want, cmd := range map[int]*exec.Cmd{3: cli, 4: own} {
		var exit *exec.ExitError
		if err := cmd.Wait(); !errors.As(err, &exit) || exit.ExitCode() != want {
			t.Errorf("%s: Wait = %v, want exit status %d (the reaper took it?)", cmd, err, want)
		}
	}
	c.live.done(cli.Process.Pid)

	waitFor(t, "the orphan reaped", func() bool { _, ok := statOf(orphan); return !ok })
	if left := endedOrphans(os.Getpid(), -1); len(left) > 0 {
		t.Errorf("zombies left: %v", left)
	}
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
