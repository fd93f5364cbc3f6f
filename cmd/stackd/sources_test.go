package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stackd/stackd/daemon/model"
)

func TestSourceAuth(t *testing.T) {
	dir := t.TempDir()
	file := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	token, pass, key, phrase := file("token", "tok-1\n"), file("pass", "pw-1"), file("key", "-----BEGIN KEY-----"), file("phrase", "ph-1")
	tests := []struct {
		name    string
		flags   sourceFlags
		want    *model.GitAuth
		wantErr string
	}{
		{name: "none", flags: sourceFlags{}},
		{name: "token", flags: sourceFlags{tokenFile: token}, want: &model.GitAuth{Username: "git", Password: "tok-1"}},
		{name: "basic", flags: sourceFlags{username: "ci", passwordFile: pass}, want: &model.GitAuth{Username: "ci", Password: "pw-1"}},
		{name: "ssh", flags: sourceFlags{sshKeyFile: key, passphraseFile: phrase},
			want: &model.GitAuth{SSHPrivateKey: []byte("-----BEGIN KEY-----"), SSHPassphrase: "ph-1"}},
		{name: "two forms", flags: sourceFlags{tokenFile: token, sshKeyFile: key}, wantErr: "give one of"},
		{name: "user without password", flags: sourceFlags{username: "ci"}, wantErr: "go together"},
		{name: "passphrase without key", flags: sourceFlags{passphraseFile: phrase}, wantErr: "needs --config-git-ssh-key-file"},
		{name: "missing file", flags: sourceFlags{tokenFile: filepath.Join(dir, "nope")}, wantErr: "--config-git-token-file"},
		{name: "empty token", flags: sourceFlags{tokenFile: file("empty", "\n")}, wantErr: "is empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.flags.auth()
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if (got == nil) != (tt.want == nil) || (got != nil && (got.Username != tt.want.Username || got.Password != tt.want.Password ||
				string(got.SSHPrivateKey) != string(tt.want.SSHPrivateKey) || got.SSHPassphrase != tt.want.SSHPassphrase)) {
				t.Fatalf("auth = %#v, want %#v", got, tt.want) // GitAuth prints redacted
			}
		})
	}
}

func TestSourceFlags(t *testing.T) {
	f := sourceFlags{config: stringsFlag{"stacks.yaml", "git+https://git.example/org/env.git//prod?ref=main"}}
	srcs, err := f.sources()
	if err != nil || len(srcs) != 2 || srcs[0].Path != "stacks.yaml" || srcs[1].Git == nil || srcs[1].Git.Path != "prod" {
		t.Fatalf("sources = %+v, %v", srcs, err)
	}
	f.config = stringsFlag{"git+https://user:hunter2@git.example/org/env.git"}
	if _, err := f.sources(); err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("a URL with a password: err = %v", err)
	}
}
