package runner

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/auto"
)

// fakePulumi writes a shell script named pulumi into a new bin directory.
// It stands in for the CLI in tests of the sandbox's mechanics; tests of
// behaviour use the real CLI.
func fakePulumi(t *testing.T, script string) string {
	t.Helper()
	bin := t.TempDir()
	body := "#!/bin/sh\nif [ \"$2\" = version ]; then echo v3.250.0; exit 0; fi\n" + script
	if err := os.WriteFile(filepath.Join(bin, "pulumi"), []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	return bin
}

func TestCommandEnvironmentIsAllowlisted(t *testing.T) {
	t.Setenv("AWS_SECRET_ACCESS_KEY", "daemon-secret")
	t.Setenv("NOTIFY_SOCKET", "/run/systemd/notify")
	t.Setenv("LANG", "C.UTF-8")
	bin := fakePulumi(t, "env\n")
	c, err := NewCommand(context.Background(), CommandOptions{Bin: bin, Env: []string{"PULUMI_HOME=/ph"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Version().String(); got != "3.250.0" {
		t.Fatalf("version %s", got)
	}
	out, _, code, err := c.Run(context.Background(), t.TempDir(), nil, nil, nil, []string{"STACK_VAR=1", "PULUMI_HOME=/override"}, "up")
	if err != nil || code != 0 {
		t.Fatalf("run: %d %v", code, err)
	}
	env := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		k, v, _ := strings.Cut(line, "=")
		env[k] = v
	}
	for k, want := range map[string]string{"LANG": "C.UTF-8", "STACK_VAR": "1", "PULUMI_HOME": "/override", "PULUMI_AUTOMATION_API": "true"} {
		if env[k] != want {
			t.Errorf("%s = %q, want %q", k, env[k], want)
		}
	}
	for _, k := range []string{"AWS_SECRET_ACCESS_KEY", "NOTIFY_SOCKET"} {
		if _, ok := env[k]; ok {
			t.Errorf("%s leaked into the child", k)
		}
	}
	if !strings.HasPrefix(env["PATH"], bin+":") {
		t.Errorf("PATH %q does not start with %s", env["PATH"], bin)
	}
}

func TestCommandStdinAndOutputLimit(t *testing.T) {
	bin := fakePulumi(t, "cat\necho oops >&2\nexit 3\n")
	c, err := NewCommand(context.Background(), CommandOptions{Bin: bin, OutputLimit: 10})
	if err != nil {
		t.Fatal(err)
	}
	var seen strings.Builder
	out, stderr, code, err := c.Run(context.Background(), "", strings.NewReader("0123456789abcdef"),
		[]io.Writer{&seen}, nil, nil, "config", "set", "--secret", "key")
	if code != 3 || err == nil {
		t.Fatalf("code %d err %v", code, err)
	}
	if out != "0123456789" || stderr != "oops\n" || seen.String() != "0123456789abcdef" {
		t.Fatalf("stdout %q stderr %q writer %q", out, stderr, seen.String())
	}
}

// TestCommandCancelKillsGroup: a CLI that ignores SIGINT and leaves a
// child behind is killed with its whole group after KillDelay.
func TestCommandCancelKillsGroup(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "child.pid")
	// The pid file is whole once it exists: the group is killed only
	// KillDelay after it appears, a moment a busy machine may overrun.
	bin := fakePulumi(t, "trap '' INT\nsleep 300 &\necho $! > "+pidFile+".tmp\nmv "+pidFile+".tmp "+pidFile+"\necho started\nwait\n")
	c, err := NewCommand(context.Background(), CommandOptions{Bin: bin, KillDelay: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan struct{})
	go func() {
		for {
			if _, err := os.Stat(pidFile); err == nil {
				close(started)
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	result := make(chan error, 1)
	go func() {
		_, _, _, err := c.Run(ctx, "", nil, nil, nil, nil, "up")
		result <- err
	}()
	<-started
	cancel()
	if err := <-result; !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	data, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		t.Fatal(err)
	}
	// The child, SIGKILLed with its group, may linger a moment as a
	// zombie of init, or until a busy machine runs it; it must not run.
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if err := syscall.Kill(pid, 0); err != nil || processState(pid) == "Z" {
			return
		}
	}
	t.Fatalf("child %d still running after the group was killed", pid)
}

// processState reads the state letter of pid from /proc.
func processState(pid int) string {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ""
	}
	fields := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+1:]))
	if len(fields) == 0 {
		return ""
	}
	return fields[0]
}

// TestCommandWithAutomationAPI drives the real CLI through the Automation
// API with this Command.
func TestCommandWithAutomationAPI(t *testing.T) {
	bin := toolchainBin(t)
	env := pulumiEnv(t, bin)
	ctx := context.Background()
	c, err := NewCommand(ctx, CommandOptions{Bin: bin})
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Version().String(); got != "3.250.0" {
		t.Fatalf("version %s", got)
	}
	project := t.TempDir()
	program := "name: cmdtest\nruntime: yaml\noutputs:\n  answer: 42\n"
	if err := os.WriteFile(filepath.Join(project, "Pulumi.yaml"), []byte(program), 0o600); err != nil {
		t.Fatal(err)
	}
	envVars := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		if k != "PATH" {
			envVars[k] = v
		}
	}
	ws, err := auto.NewLocalWorkspace(ctx, auto.WorkDir(project), auto.Pulumi(c), auto.EnvVars(envVars))
	if err != nil {
		t.Fatal(err)
	}
	stack, err := auto.UpsertStack(ctx, "dev", ws)
	if err != nil {
		t.Fatal(err)
	}
	res, err := stack.Up(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Outputs["answer"].Value; got != float64(42) {
		t.Fatalf("output answer = %#v", got)
	}
}
