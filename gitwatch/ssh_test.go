package gitwatch

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	gitssh "github.com/go-git/go-git/v5/plumbing/transport/ssh"
	"golang.org/x/crypto/ssh"

	"github.com/stackd/stackd/daemon/model"
)

func TestSSH(t *testing.T) {
	fx := sharedFixture(t)
	client := newKey(t)
	srv := newSSHServer(t, fx.root, client)
	url := srv.url(fx.path)
	ctx := context.Background()
	plain := &model.GitAuth{SSHPrivateKey: keyPEM(t, client, "")}
	const passphrase = "pp-SENTINEL-9c1d"
	encrypted := &model.GitAuth{SSHPrivateKey: keyPEM(t, client, passphrase), SSHPassphrase: passphrase}

	t.Run("key auth", func(t *testing.T) {
		f := New(Options{KnownHosts: srv.knownHosts})
		got, err := f.Resolve(ctx, model.GitSource{URL: url, Ref: "v2", Auth: plain})
		if err != nil || got != fx.c2 {
			t.Fatalf("Resolve: %s, %v", got, err)
		}
		dir := filepath.Join(t.TempDir(), "w")
		checkout(t, f, model.GitSource{URL: url, Ref: "main", Shallow: true, Auth: plain}, fx.c3, dir)
		assertAt(t, dir, fx.c3, "three")
	})
	t.Run("scp-like url", func(t *testing.T) {
		// git@host:path cannot name a port: check the auth it gets.
		a, err := New(Options{KnownHosts: srv.knownHosts}).authFor(
			model.GitSource{URL: "deploy@127.0.0.1:" + fx.path, Auth: plain})
		pk, ok := a.(*gitssh.PublicKeys)
		if err != nil || !ok || pk.User != "deploy" || pk.HostKeyCallback == nil {
			t.Fatalf("got %T %v", a, err)
		}
	})
	t.Run("the source's own known_hosts", func(t *testing.T) {
		// As a Flux secret's known_hosts: the daemon's file is not needed.
		known, err := os.ReadFile(srv.knownHosts)
		if err != nil {
			t.Fatal(err)
		}
		f := New(Options{KnownHosts: filepath.Join(t.TempDir(), "none")})
		withHosts := &model.GitAuth{SSHPrivateKey: plain.SSHPrivateKey, KnownHosts: known}
		if got, err := f.Resolve(ctx, model.GitSource{URL: url, Ref: "main", Auth: withHosts}); err != nil || got != fx.c3 {
			t.Fatalf("Resolve: %s, %v", got, err)
		}
		other := &model.GitAuth{SSHPrivateKey: plain.SSHPrivateKey, KnownHosts: []byte("127.0.0.9 " + strings.SplitN(string(known), " ", 2)[1])}
		if _, err := f.Resolve(ctx, model.GitSource{URL: url, Ref: "main", Auth: other}); err == nil {
			t.Fatal("a host missing from the source's known_hosts was trusted")
		}
	})
	t.Run("encrypted key", func(t *testing.T) {
		f := New(Options{KnownHosts: srv.knownHosts})
		got, err := f.Resolve(ctx, model.GitSource{URL: url, Ref: "main", Auth: encrypted})
		if err != nil || got != fx.c3 {
			t.Fatalf("Resolve: %s, %v", got, err)
		}
		bad := &model.GitAuth{SSHPrivateKey: encrypted.SSHPrivateKey, SSHPassphrase: "wrong-SENTINEL-pp"}
		_, err = f.Resolve(ctx, model.GitSource{URL: url, Ref: "main", Auth: bad})
		noLeak(t, err, passphrase, "wrong-SENTINEL-pp", "OPENSSH PRIVATE KEY")
		t.Log(err)
	})
	t.Run("unknown client key", func(t *testing.T) {
		f := New(Options{KnownHosts: srv.knownHosts})
		other := &model.GitAuth{SSHPrivateKey: keyPEM(t, newKey(t), "")}
		_, err := f.Resolve(ctx, model.GitSource{URL: url, Ref: "main", Auth: other})
		noLeak(t, err, "OPENSSH PRIVATE KEY")
		t.Log(err)
	})
	t.Run("host key mismatch", func(t *testing.T) {
		signer, err := ssh.NewSignerFromKey(newKey(t))
		if err != nil {
			t.Fatal(err)
		}
		f := New(Options{KnownHosts: writeKnownHosts(t, srv.addr, signer.PublicKey())})
		_, err = f.Resolve(ctx, model.GitSource{URL: url, Ref: "main", Auth: plain})
		if err == nil || !strings.Contains(err.Error(), "does not match known_hosts") {
			t.Fatalf("want a host key mismatch, got %v", err)
		}
		t.Log(err)
	})
	t.Run("host not in known_hosts", func(t *testing.T) {
		f := New(Options{KnownHosts: writeKnownHosts(t, "192.0.2.7:22", srv.hostKey.PublicKey())})
		_, err := f.Resolve(ctx, model.GitSource{URL: url, Ref: "main", Auth: plain})
		if err == nil || !strings.Contains(err.Error(), "not in known_hosts") {
			t.Fatalf("want an unknown host, got %v", err)
		}
	})
	t.Run("missing known_hosts", func(t *testing.T) {
		missing := filepath.Join(t.TempDir(), "nope", "known_hosts")
		f := New(Options{KnownHosts: missing})
		_, err := f.Resolve(ctx, model.GitSource{URL: url, Ref: "main", Auth: plain})
		if err == nil || !strings.Contains(err.Error(), missing) || !strings.Contains(err.Error(), "ssh-keyscan") {
			t.Fatalf("want a clear missing known_hosts error, got %v", err)
		}
		// Default location: $HOME/.ssh/known_hosts (HOME is empty in tests).
		_, err = New(Options{}).Resolve(ctx, model.GitSource{URL: url, Ref: "main", Auth: plain})
		if err == nil || !strings.Contains(err.Error(), filepath.Join(os.Getenv("HOME"), ".ssh", "known_hosts")) {
			t.Fatalf("want the default path in the error, got %v", err)
		}
	})
	t.Run("SSH_KNOWN_HOSTS", func(t *testing.T) {
		t.Setenv("SSH_KNOWN_HOSTS", srv.knownHosts)
		if _, err := New(Options{}).Resolve(ctx, model.GitSource{URL: url, Ref: "main", Auth: plain}); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("insecure ignore host key", func(t *testing.T) {
		f := New(Options{KnownHosts: "/nonexistent", InsecureIgnoreHostKey: true})
		if _, err := f.Resolve(ctx, model.GitSource{URL: url, Ref: "main", Auth: plain}); err != nil {
			t.Fatal(err)
		}
	})
}
