package main

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stackd/stackd/model"
)

// buildStackd builds the daemon binary for tests that need a process of
// its own.
func buildStackd(t testing.TB) string {
	t.Helper()
	exe := filepath.Join(t.TempDir(), "stackd")
	out, err := exec.Command("go", "build", "-o", exe, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return exe
}

// freeAddr returns a loopback address with a port that was free a moment
// ago.
func freeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// startProcess runs the stackd binary; its output goes to log. Its
// programs may write in the test's out dir, as those of the daemons
// started in-process (startDaemonWith).
func startProcess(t testing.TB, exe, bin, config, dataDir, addr string, log *os.File, extra ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(exe, append([]string{"run", "--config", config, "--data-dir", dataDir, "--listen", addr,
		"--pulumi-bin", bin, "--min-resync-interval", "1s", "--retry-backoff", "300ms",
		"--sandbox-rw", outDir(t)}, extra...)...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=true")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd
}

// lockFiles lists the Pulumi lock files of the data dir's default
// backend: in each stack's own file backend.
func lockFiles(dataDir string) ([]string, error) {
	return filepath.Glob(filepath.Join(dataDir, "backends", "*", ".pulumi", "locks", "*", "*", "*", "*.json"))
}

// descendants lists the pids of every process below pid.
func descendants(pid int) []int {
	children := map[int][]int{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// The command name may hold spaces; fields after ")" are fixed.
		fields := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+1:]))
		if len(fields) > 1 {
			ppid, _ := strconv.Atoi(fields[1])
			children[ppid] = append(children[ppid], p)
		}
	}
	var out []int
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			out = append(out, c)
			queue = append(queue, c)
		}
	}
	return out
}

// TestE2ESIGKILLMidUp kills the daemon and every process it started in
// the middle of an up, as a power cut or an OOM kill of its cgroup would,
// and starts it again on the same data dir.
func TestE2ESIGKILLMidUp(t *testing.T) {
	bin := toolchainBin(t)
	exe := buildStackd(t)
	ps := newSlowStack(t, "4s")
	out, dataDir, config, logFile, addr, in := ps.out, ps.dataDir, ps.config, ps.log, ps.addr, ps.in

	cmd := startProcess(t, exe, bin, config, dataDir, addr, logFile)
	in.waitStack("app", "the update to start", time.Minute, func(v model.StackView) bool {
		return v.Status.CurrentUpdate != nil
	})
	time.Sleep(2 * time.Second) // inside the provider's create
	victims := descendants(cmd.Process.Pid)
	_ = cmd.Process.Kill()
	for _, pid := range victims {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	_ = cmd.Wait()
	locks, _ := lockFiles(dataDir)
	t.Logf("killed stackd and %d child processes; %d lock file(s) left", len(victims), len(locks))

	cmd = startProcess(t, exe, bin, config, dataDir, addr, logFile)
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
		logs, _ := os.ReadFile(logFile.Name())
		if t.Failed() {
			t.Logf("stackd's log:\n%s", logs)
		}
	}()
	v := in.waitStack("app", "Ready after the restart", 2*time.Minute, isReady)
	if got := readFile(t, out); got != "hello v1" {
		t.Fatalf("file = %q after recovery", got)
	}
	if v.Status.LastUpdate.Name != "app-2" {
		t.Fatalf("last update %q, want app-2 (the one after the aborted app-1)", v.Status.LastUpdate.Name)
	}
	if locks, _ := lockFiles(dataDir); len(locks) != 0 {
		t.Fatalf("locks left after recovery: %v", locks)
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("stackd did not stop cleanly: %v", err)
	}
	check := exec.Command(exe, "store", "check", "--data-dir", dataDir)
	if outp, err := check.CombinedOutput(); err != nil || !strings.Contains(string(outp), "1 stack") {
		t.Fatalf("store check: %v\n%s", err, outp)
	}
	logs, _ := os.ReadFile(logFile.Name())
	if !strings.Contains(string(logs), "marked aborted") {
		t.Fatalf("the restart did not report the aborted update:\n%s", logs)
	}
}

// TestE2ESIGTERMGrace: SIGTERM during a long up lets it finish within
// --shutdown-grace and exits 0 with the update recorded; with a short
// grace the update is interrupted, recorded as aborted, and the backend
// is left unlocked.
func TestE2ESIGTERMGrace(t *testing.T) {
	bin := toolchainBin(t)
	exe := buildStackd(t)
	for _, tc := range []struct{ name, grace, want string }{
		{"finishes", "1m", model.UpdateSucceeded},
		{"interrupted", "500ms", model.UpdateAborted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ps := newSlowStack(t, "3s")
			dataDir, config, logFile, addr, in := ps.dataDir, ps.config, ps.log, ps.addr, ps.in
			cmd := startProcess(t, exe, bin, config, dataDir, addr, logFile, "--shutdown-grace", tc.grace)
			in.waitStack("app", "the update to start", time.Minute, func(v model.StackView) bool {
				return v.Status.CurrentUpdate != nil
			})
			time.Sleep(500 * time.Millisecond)
			_ = cmd.Process.Signal(syscall.SIGTERM)
			if err := cmd.Wait(); err != nil {
				logs, _ := os.ReadFile(logFile.Name())
				t.Fatalf("exit after SIGTERM: %v\n%s", err, logs)
			}
			s, err := openReadOnly(dataDir)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			ups, err := s.Updates("app", 0, 10)
			if err != nil || len(ups) != 1 || ups[0].State != tc.want {
				t.Fatalf("updates = %+v (%v), want one %s", ups, err, tc.want)
			}
			if locks, _ := lockFiles(dataDir); len(locks) != 0 {
				t.Fatalf("locks left: %v", locks)
			}
		})
	}
}

// slowStack is the setting of a test of the stackd process: a repository
// with one stack "app" whose provider sleeps delay per resource change,
// its config file, a data dir, a log file and a free loopback address.
type slowStack struct {
	out, dataDir, config, addr string
	log                        *os.File
	in                         *instance
}

func newSlowStack(t *testing.T, delay string) *slowStack {
	t.Helper()
	r := newRepo(t)
	r.commit(map[string]string{"Pulumi.yaml": program("v1")})
	dir := t.TempDir()
	s := &slowStack{out: filepath.Join(outDir(t), "note.txt"), dataDir: filepath.Join(dir, "data"),
		config: filepath.Join(dir, "stackd.yaml"), addr: freeAddr(t)}
	spec := "stacks:\n" + stackYAML("app", r, pathConfig(s.out)+
		"    envRefs:\n      STACKDTEST_DELAY: {type: Literal, literal: {value: "+delay+"}}\n")
	if err := os.WriteFile(s.config, []byte(spec), 0o600); err != nil {
		t.Fatal(err)
	}
	var err error
	if s.log, err = os.Create(filepath.Join(dir, "stackd.log")); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.log.Close() })
	s.in = &instance{t: t, url: "http://" + s.addr}
	return s
}
