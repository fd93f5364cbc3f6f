package store

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestLockHeldByAnotherProcess re-executes the test binary (see TestMain)
// to hold the store open in another process.
func TestLockHeldByAnotherProcess(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, FileName)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "STORE_TEST_HOLD_LOCK="+path)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	waitForLine(t, stdout, "locked")

	for _, ro := range []bool{false, true} {
		start := time.Now()
		_, err := Open(path, Options{Timeout: 200 * time.Millisecond, ReadOnly: ro})
		if !errors.Is(err, ErrLocked) {
			t.Fatalf("Open(ReadOnly=%v) while locked: %v, want ErrLocked", ro, err)
		}
		if msg := err.Error(); !strings.Contains(msg, "another stackd is using "+dir) || !strings.Contains(msg, path) {
			t.Errorf("lock error %q does not name %s", msg, dir)
		}
		// It waited for its timeout (bbolt gives up one retry interval,
		// 50ms, early), which no load can shorten. That it gave up at all
		// is its return: how soon on a busy machine is not asserted.
		if d := time.Since(start); d < 100*time.Millisecond {
			t.Errorf("Open gave up after %v, before its timeout", d)
		}
	}

	if err := stdin.Close(); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("lock holder: %v", err)
	}
	s := openAt(t, path, Options{Timeout: 200 * time.Millisecond})
	if v, err := s.SchemaVersion(); err != nil || v != schemaVersion {
		t.Errorf("SchemaVersion = %d, %v; want %d", v, err, schemaVersion)
	}
}

// waitForLine waits (a generous time: the race detector is slow) for the
// child to print want.
func waitForLine(t *testing.T, r interface{ Read([]byte) (int, error) }, want string) {
	t.Helper()
	got := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(r).ReadString('\n')
		got <- strings.TrimSpace(line)
	}()
	select {
	case line := <-got:
		if line != want {
			t.Fatalf("lock holder said %q, want %q", line, want)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("lock holder did not start")
	}
}
