package main

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestSystemdUnitVerifies runs systemd-analyze verify on the shipped
// unit, pointed at a real stackd binary. Any complaint fails the test:
// verify exits 0 on some of them.
func TestSystemdUnitVerifies(t *testing.T) {
	analyze := tool(t, "systemd-analyze")
	unit, err := os.ReadFile(filepath.Join("..", "..", "configs", "stackd.service"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Type=notify", "KillMode=mixed", "TimeoutStopSec=11min", "StateDirectory=stackd", "User=stackd"} {
		if !strings.Contains(string(unit), "\n"+want+"\n") {
			t.Errorf("the unit lacks %s", want)
		}
	}
	if strings.Contains(string(unit), "\nMemoryDenyWriteExecute=yes") {
		t.Error("MemoryDenyWriteExecute breaks Node.js language hosts")
	}
	exe := buildStackd(t)
	path := filepath.Join(t.TempDir(), "stackd.service")
	if err := os.WriteFile(path, []byte(strings.ReplaceAll(string(unit), "/usr/local/bin/stackd", exe)), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(analyze, "verify", path).CombinedOutput()
	if err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
}

// TestSystemdNotify runs stackd with a NOTIFY_SOCKET and checks what it
// tells systemd: READY=1 once started, RELOADING=1 with the monotonic
// clock then READY=1 on SIGHUP, STOPPING=1 on SIGTERM, and exit code 0.
func TestSystemdNotify(t *testing.T) {
	bin := toolchainBin(t)
	exe := buildStackd(t)
	dir := t.TempDir()
	sock := filepath.Join(dir, "notify.sock")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	messages := make(chan string, 16)
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := conn.Read(buf)
			if err != nil {
				close(messages)
				return
			}
			messages <- string(buf[:n])
		}
	}()
	next := func(want string) string {
		t.Helper()
		select {
		case m := <-messages:
			if !strings.HasPrefix(m, want) {
				t.Fatalf("notify message %q, want %s…", m, want)
			}
			return m
		case <-time.After(30 * time.Second):
			t.Fatalf("no notify message, want %s", want)
		}
		return ""
	}
	config := filepath.Join(dir, "stackd.yaml")
	if err := os.WriteFile(config, []byte("stacks: []\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "run", "--config", config, "--data-dir", filepath.Join(dir, "data"),
		"--listen", "127.0.0.1:0", "--pulumi-bin", bin)
	cmd.Env = append(os.Environ(), "NOTIFY_SOCKET="+sock)
	var logs syncBuffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill() }()
	next("READY=1")
	if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	if m := next("RELOADING=1"); !strings.Contains(m, "\nMONOTONIC_USEC=") {
		t.Fatalf("reload message %q lacks MONOTONIC_USEC", m)
	}
	next("READY=1")
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	next("STOPPING=1")
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exit after SIGTERM: %v\n%s", err, logs.String())
	}
}
