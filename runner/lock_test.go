package runner

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// TestProcessRunsIgnoresZombies: a killed CLI that nobody reaped still has
// a /proc entry, but holds no lock.
func TestProcessRunsIgnoresZombies(t *testing.T) {
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("no sleep binary")
	}
	fake := filepath.Join(t.TempDir(), "pulumi")
	if err := os.Symlink(sleep, fake); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(fake, "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	if !processRuns(pid) {
		t.Fatal("a running process named pulumi does not count as running")
	}
	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for processRuns(pid) { // not reaped yet: a zombie
		if time.Now().After(deadline) {
			t.Fatal("a killed, unreaped process still counts as running")
		}
		time.Sleep(10 * time.Millisecond)
	}
	_ = cmd.Wait()
	if processRuns(pid) {
		t.Fatal("a reaped process counts as running")
	}
}
