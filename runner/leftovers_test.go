package runner

import (
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/stackd/stackd/daemon/model"
	"github.com/stackd/stackd/sandbox"
)

// escapeScript is shell code that starts a process out of its
// operation's reach: in a session and process group of its own, with no
// pipe of the operation open, running for five minutes. The process
// writes its pid into the file named by the shell expression file
// before the script goes on (ten seconds at most), so that tests wait
// for that file, never for time.
func escapeScript(file string) string {
	return "setsid sh -c 'echo $$ > \"$0.tmp\" && mv \"$0.tmp\" \"$0\" && exec sleep 300' " + file + " </dev/null >/dev/null 2>&1 &\n" +
		"i=0; while [ ! -e " + file + " ] && [ $i -lt 1000 ]; do sleep 0.01; i=$((i+1)); done\n"
}

// pidsIn reads the pids the escaped processes wrote into dir, and has a
// failed test kill them.
func pidsIn(t *testing.T, dir string) []int {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".tmp") {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
		if err != nil {
			t.Fatalf("%s: %v", e.Name(), err)
		}
		t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
		pids = append(pids, pid)
	}
	return pids
}

// gone says whether no process pid exists, not even a zombie.
func gone(pid int) bool {
	_, err := os.Stat("/proc/" + strconv.Itoa(pid))
	return errors.Is(err, os.ErrNotExist)
}

// TestLeftoversEndWithOperation is the attack through a real operation:
// the program runs a command (stackdtest:index:run, as pulumi-command's
// local:run) that starts a process in a session of its own, out of reach
// of every process-group kill. Once
// the operation returned, every such process is gone, not even a zombie,
// and counted; with the sandbox on or off.
func TestLeftoversEndWithOperation(t *testing.T) {
	bin := toolchainBin(t)
	for _, confined := range []bool{false, true} {
		var sb Confiner
		if confined {
			l, err := sandbox.New(sandbox.Options{})
			if err != nil {
				t.Fatal(err)
			}
			sb = l
		}
		project := t.TempDir()
		pids := filepath.Join(project, "pids")
		if err := os.Mkdir(pids, 0o700); err != nil {
			t.Fatal(err)
		}
		// Pulumi YAML reads $$ as $.
		program := strings.Replace(fileProgram(filepath.Join(project, "note.txt"), "hello"), "outputs:\n", `variables:
  escaped:
    fn::invoke:
      function: stackdtest:index:run
      arguments:
        command: |
`+indent(strings.ReplaceAll(escapeScript(`"`+pids+`/$$"`), "$$", "$$$$")+"echo started", "          ")+`      return: output
outputs:
  escaped: ${escaped}
`, 1)
		mkfile(t, filepath.Join(project, "Pulumi.yaml"), program, 0o600)
		var reaper sandbox.Reaper
		r, err := New(context.Background(), Options{Bin: bin, DataDir: t.TempDir(), Sandbox: sb, Reaper: &reaper,
			Env: []string{"PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION=true"}})
		if err != nil {
			t.Fatal(err)
		}
		var log syncBuffer
		_, err = r.Run(context.Background(), model.Operation{Type: model.UpdateUp, Log: &log,
			Workspace: model.Workspace{Name: "leftovers", Stack: "dev", ProjectDir: project}})
		if err != nil {
			t.Fatalf("confined=%v: up: %v\n%s", confined, err, log.String())
		}
		left := pidsIn(t, pids)
		if len(left) == 0 {
			t.Fatalf("confined=%v: the program's command never ran:\n%s", confined, log.String())
		}
		for _, pid := range left {
			if !gone(pid) {
				t.Errorf("confined=%v: process %d, started by the provider, outlived the operation", confined, pid)
			}
		}
		if got := reaper.Total(); got != uint64(len(left)) {
			t.Errorf("confined=%v: %d killed counted, want %d", confined, got, len(left))
		}
		t.Logf("confined=%v: %d leftover(s) killed", confined, len(left))
	}
}

// subreaperChildEnv makes a test run its scenario in a child process
// that makes itself a child subreaper, as stackd run does, without
// touching the test binary that runs the other tests.
const subreaperChildEnv = "STACKD_TEST_SUBREAPER_CHILD"

// inSubreaper runs the calling test again in a child process, which
// makes itself a child subreaper and runs scenario.
func inSubreaper(t *testing.T, scenario func(t *testing.T)) {
	t.Helper()
	if os.Getenv(subreaperChildEnv) == t.Name() {
		if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
			t.Fatalf("become a subreaper: %v", err)
		}
		scenario(t)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^"+t.Name()+"$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), subreaperChildEnv+"="+t.Name())
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "--- PASS: "+t.Name()) {
		t.Fatalf("the scenario in a subreaper: %v\n%s", err, out)
	}
	t.Logf("the scenario in a subreaper:\n%s", out)
}

// TestLeftoversOfKilledWrapper: an operation past its timeout whose CLI
// ignores the interrupt is killed as a process group, the wrapper among
// it, before the wrapper could kill what escaped the group. That process
// comes to the daemon, a subreaper, which kills it before the command
// returns, and counts it.
func TestLeftoversOfKilledWrapper(t *testing.T) {
	inSubreaper(t, func(t *testing.T) {
		dir := t.TempDir()
		pidFile := filepath.Join(dir, "leftover")
		bin := fakePulumi(t, "trap '' INT\n"+escapeScript(pidFile)+"exec sleep 300\n")
		var reaper sandbox.Reaper
		c, err := NewCommand(context.Background(), CommandOptions{Bin: bin, KillDelay: 100 * time.Millisecond, Reaper: &reaper})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			for {
				if _, err := os.Stat(pidFile); err == nil {
					cancel()
					return
				}
				time.Sleep(10 * time.Millisecond)
			}
		}()
		var stderr strings.Builder
		_, _, code, err := c.Run(ctx, "", nil, nil, []io.Writer{&stderr}, nil, "up")
		if !errors.Is(err, context.Canceled) || code != -1 {
			t.Fatalf("err %v, code %d; want cancelled and killed (-1)\n%s", err, code, stderr.String())
		}
		pid := pidsIn(t, dir)[0]
		if !gone(pid) {
			t.Errorf("process %d outlived its killed operation", pid)
		}
		if got := reaper.Total(); got != 1 {
			t.Errorf("%d killed counted, want 1", got)
		}
	})
}
