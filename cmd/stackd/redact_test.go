package main

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestWebhookURLSecrets(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []string
	}{
		{"https://hooks.slack.com/services/T0000/B0000/XXXXXXXXXXXXXXXXXXXXXXXX",
			[]string{"https://hooks.slack.com/services/T0000/B0000/XXXXXXXXXXXXXXXXXXXXXXXX", "XXXXXXXXXXXXXXXXXXXXXXXX"}},
		{"https://user:pa55word@hooks.example/h?token=0123456789abcdef&x=1",
			[]string{"https://user:pa55word@hooks.example/h?token=0123456789abcdef&x=1", "user", "pa55word", "0123456789abcdef"}},
		{"https://hooks.example/stackd", []string{"https://hooks.example/stackd"}},
	} {
		if got := webhookURLSecrets(c.in); !slices.Equal(got, c.want) {
			t.Errorf("webhookURLSecrets(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// TestDaemonSecrets: every secret file the flags name is read for the
// redactor; a missing one is skipped.
func TestDaemonSecrets(t *testing.T) {
	dir := t.TempDir()
	file := func(name, value string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(value+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	var f runFlags
	f.tokenFile = file("api", "api-tok")
	f.webhookFile = file("hook", "hook-secret")
	f.notifySecret = file("notify", "notify-secret")
	f.sourceFlags.tokenFile = file("git", "git-tok")
	f.clusterFlags.keyFile = file("etcd.key", "etcd-key")
	f.notifyURLFiles = stringsFlag{file("url", "https://h.example/0123456789abcdef01")}
	f.notifySlack = stringsFlag{"https://hooks.slack.com/services/T/B/abcdefghijklmnopqrst"}
	f.forgeFlags.tokenFiles = stringsFlag{"https://github.com=" + file("forge", "forge-tok"), "https://x=" + filepath.Join(dir, "missing")}
	got := f.daemonSecrets()
	for _, want := range []string{"api-tok", "hook-secret", "notify-secret", "git-tok", "etcd-key", "0123456789abcdef01",
		"abcdefghijklmnopqrst", "forge-tok"} {
		if !slices.Contains(got, want) {
			t.Errorf("daemon secrets %q lack %q", got, want)
		}
	}
}
