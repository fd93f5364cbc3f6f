package main

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stackd/stackd/daemon/model"
)

// buildStackd returns the daemon binary for tests that need a process of
// its own, built once for the package's tests (in TestMain's directory).
func buildStackd(t testing.TB) string {
	t.Helper()
	built.once.Do(func() {
		exe := filepath.Join(built.dir, "stackd")
		if out, err := exec.Command("go", "build", "-o", exe, ".").CombinedOutput(); err != nil {
			built.err = fmt.Errorf("go build: %v\n%s", err, out)
			return
		}
		built.exe = exe
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.exe
}

// built is the daemon binary buildStackd made, in dir.
var built struct {
	once     sync.Once
	dir, exe string
	err      error
}

// TestMain gives the binaries built for the tests a directory, removed
// when they end.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "stackd-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	built.dir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
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
// and starts it again on the same data dir. The up is held in the
// provider's create (its gate) when the kill comes.
func TestE2ESIGKILLMidUp(t *testing.T) {
	t.Parallel()
	bin := toolchainBin(t)
	exe := buildStackd(t)
	ps := newHeldStack(t)
	out, dataDir, config, logFile, addr, in := ps.out, ps.dataDir, ps.config, ps.log, ps.addr, ps.in

	ps.gates.close("create", "note.txt")
	cmd := startProcess(t, exe, bin, config, dataDir, addr, logFile)
	ps.gates.waitHeld("create", "note.txt", 2*time.Minute)
	if v := in.stack("app"); v.Status.CurrentUpdate == nil || v.Status.CurrentUpdate.Name != "app-1" {
		t.Fatalf("the provider's create is held, but the stack's current update is %+v, want app-1", v.Status.CurrentUpdate)
	}
	victims := descendants(cmd.Process.Pid)
	_ = cmd.Process.Kill()
	for _, pid := range victims {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	_ = cmd.Wait()
	// The next start's update creates the file at once.
	ps.gates.open("create", "note.txt")
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
// is left unlocked. The up is held in the provider's create (its gate)
// when SIGTERM comes: past the stop's start when the update may finish,
// for good when it must be interrupted.
func TestE2ESIGTERMGrace(t *testing.T) {
	t.Parallel()
	bin := toolchainBin(t)
	exe := buildStackd(t)
	for _, tc := range []struct{ name, grace, want string }{
		{"finishes", "1m", model.UpdateSucceeded},
		{"interrupted", "500ms", model.UpdateAborted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ps := newHeldStack(t)
			dataDir, config, logFile, addr, in := ps.dataDir, ps.config, ps.log, ps.addr, ps.in
			ps.gates.close("create", "note.txt")
			cmd := startProcess(t, exe, bin, config, dataDir, addr, logFile, "--shutdown-grace", tc.grace)
			ps.gates.waitHeld("create", "note.txt", 2*time.Minute)
			_ = cmd.Process.Signal(syscall.SIGTERM)
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			if tc.want == model.UpdateSucceeded {
				// The stop has begun (it waits for the update), and the
				// update is still held: now it may end.
				waitFor(t, "the process stopping", time.Minute, func() bool {
					var health struct{ Status string }
					_, _, err := in.tryGet("/healthz", &health)
					return err == nil && health.Status == "stopping"
				})
				select {
				case err := <-exited:
					t.Fatalf("the process exited while its update was held: %v", err)
				default:
				}
				ps.gates.open("create", "note.txt")
			}
			if err := <-exited; err != nil {
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

// heldStack is the setting of a test of the stackd process: a repository
// with one stack "app" whose File note.txt waits at the gates of
// newGates(t), its config file, a data dir, a log file and a free
// loopback address.
type heldStack struct {
	out, dataDir, config, addr string
	log                        *os.File
	in                         *instance
	gates                      *gates
}

func newHeldStack(t *testing.T) *heldStack {
	t.Helper()
	r := newRepo(t)
	r.commit(map[string]string{"Pulumi.yaml": program("v1")})
	dir := t.TempDir()
	s := &heldStack{out: filepath.Join(outDir(t), "note.txt"), dataDir: filepath.Join(dir, "data"),
		config: filepath.Join(dir, "stackd.yaml"), addr: freeAddr(t), gates: newGates(t)}
	spec := "stacks:\n" + stackYAML("app", r, pathConfig(s.out)+"    envRefs:\n"+s.gates.envRef())
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
