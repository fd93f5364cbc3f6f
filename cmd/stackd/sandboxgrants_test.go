package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// TestCheckGrants: no --sandbox-ro or --sandbox-rw path opens the data
// dir, its own entries, the secrets dir or the token file to programs,
// through a parent, a link or a path in another --sandbox-rw path.
func TestCheckGrants(t *testing.T) {
	root := t.TempDir()
	data := filepath.Join(root, "srv", "data")
	secrets := filepath.Join(root, "srv", "secrets")
	etc := filepath.Join(root, "etc", "stackd")
	out := filepath.Join(root, "out")
	for _, d := range []string{data, secrets, etc, out, filepath.Join(data, "example-out"), filepath.Join(secrets, "db")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	for link, target := range map[string]string{"to-data": data, "to-srv": filepath.Join(root, "srv"), "to-out": out} {
		if err := os.Symlink(target, filepath.Join(root, link)); err != nil {
			t.Fatal(err)
		}
	}
	own := ownPaths{dataDir: data, secretsDir: secrets, tokenFile: filepath.Join(etc, "api-token")}
	for _, c := range []struct {
		name   string
		ro, rw []string
		own    ownPaths // own when zero
		refuse string   // what the error says; "" when allowed
	}{
		{name: "none"},
		{name: "a directory of its own", rw: []string{out}, ro: []string{filepath.Join(root, "share")}},
		{name: "a link to it", rw: []string{filepath.Join(root, "to-out")}},
		{name: "a path in the data dir of nothing of the daemon's", rw: []string{filepath.Join(data, "example-out")}},
		{name: "another data dir", ro: []string{filepath.Join(root, "srv")}, own: ownPaths{dataDir: out}},
		{name: "the same path twice", ro: []string{out}, rw: []string{out}},
		{name: "the data dir", rw: []string{data}, refuse: "--sandbox-rw " + data + ": it is the data dir"},
		{name: "the data dir, read only", ro: []string{data + "/"}, refuse: "--sandbox-ro " + data + "/: it is the data dir"},
		{name: "a parent of the data dir", rw: []string{root}, refuse: "the data dir (--data-dir " + data + ") or a parent"},
		{name: "the root", ro: []string{"/"}, refuse: "the data dir"},
		{name: "a link to the data dir", ro: []string{filepath.Join(root, "to-data")}, refuse: "the data dir"},
		{name: "a link to its parent", ro: []string{filepath.Join(root, "to-srv")}, refuse: "the data dir"},
		{name: "dot-dot", rw: []string{filepath.Join(data, "example-out") + "/.."}, refuse: "the data dir"},
		{name: "a relative parent", ro: []string{"."}, own: ownPaths{dataDir: mustAbs(t, "testdata-not-there")}, refuse: "the data dir"},
		{name: "a data dir not made yet", rw: []string{root}, own: ownPaths{dataDir: filepath.Join(root, "new", "data")}, refuse: "the data dir"},
		{name: "the workspaces", ro: []string{filepath.Join(data, "workspaces")}, refuse: "the data dir's own workspaces"},
		{name: "a state", rw: []string{filepath.Join(data, "backends", "x")}, refuse: "the data dir's own backends"},
		{name: "the store", ro: []string{filepath.Join(data, "stackd.db")}, refuse: "the data dir's own stackd.db"},
		{name: "the generated token", ro: []string{filepath.Join(data, "api-token")}, refuse: "the data dir's own api-token"},
		{name: "a checkout", rw: []string{filepath.Join(data, "stacks", "app")}, refuse: "the data dir's own stacks"},
		{name: "the signing keys", ro: []string{filepath.Join(data, "oidc", "signing-keys.json")}, refuse: "the data dir's own oidc"},
		{name: "the operations' tokens", ro: []string{filepath.Join(data, "credentials")}, refuse: "the data dir's own credentials"},
		{name: "an operation's tokens", ro: []string{filepath.Join(data, "credentials", "op-1")}, refuse: "the data dir's own credentials"},
		{name: "the secrets dir", ro: []string{secrets}, refuse: "--secrets-dir " + secrets},
		{name: "a secret", ro: []string{filepath.Join(secrets, "db")}, refuse: "--secrets-dir"},
		{name: "a parent of the secrets dir", ro: []string{filepath.Join(root, "srv")}, own: ownPaths{dataDir: out, secretsDir: secrets}, refuse: "--secrets-dir"},
		{name: "the token file", ro: []string{own.tokenFile}, refuse: "--api-token-file " + own.tokenFile},
		{name: "its directory", rw: []string{etc}, refuse: "--api-token-file"},
		{name: "a parent of its directory", ro: []string{filepath.Join(root, "etc")}, refuse: "--api-token-file"},
		{name: "beside the token file", ro: []string{filepath.Join(etc, "other")}, own: own},
		{name: "in a --sandbox-rw path", ro: []string{filepath.Join(out, "sub")}, rw: []string{out}, refuse: "lies in --sandbox-rw " + out},
		{name: "in another --sandbox-rw path", rw: []string{out, filepath.Join(root, "to-out", "sub")}, refuse: "lies in --sandbox-rw"},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := c.own
			if o == (ownPaths{}) {
				o = own
			}
			err := checkGrants(c.ro, c.rw, o)
			switch {
			case c.refuse == "" && err != nil:
				t.Errorf("refused: %v", err)
			case c.refuse != "" && err == nil:
				t.Errorf("allowed, want a refusal saying %q", c.refuse)
			case c.refuse != "" && !strings.Contains(err.Error(), c.refuse):
				t.Errorf("error %q does not say %q", err, c.refuse)
			case err != nil && !strings.Contains(err.Error(), "would let every program read"):
				t.Errorf("error %q does not say why", err)
			}
		})
	}
}

func mustAbs(t *testing.T, p string) string {
	t.Helper()
	abs, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return abs
}

// TestE2ESandboxGrantOfDataDir: a grant of a data dir lets programs read
// the daemon's API token, so the daemon refuses to start with a grant of
// its own, before it writes anything there.
func TestE2ESandboxGrantOfDataDir(t *testing.T) {
	t.Parallel()
	victimData := filepath.Join(t.TempDir(), "victim", "data")
	victim := startDaemon(t, "stacks: []\n", victimData)
	victim.stop()

	// Another daemon whose programs may read the victim's data dir.
	r := newRepo(t)
	r.commit(map[string]string{"read/Pulumi.yaml": readProgram(filepath.Join(victimData, apiTokenFile))})
	thief := startDaemonWith(t, "stacks:\n"+sandboxStack("read", r, "read"), "", func(f *runFlags) {
		f.sandboxRO = stringsFlag{filepath.Dir(victimData)}
	})
	v := thief.waitStack("read", "deployed", time.Minute, isReady)
	if got := strings.TrimSpace(output(v, "loot")); got != victim.token {
		t.Fatalf("with the grant, the program read %q, want the victim's API token", got)
	}
	thief.stop()
	// What the daemon made in its data dir is among the entries no grant
	// may reach: a new one must be added to dataDirEntries.
	entries, err := os.ReadDir(thief.flags.dataDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !slices.Contains(dataDirEntries, e.Name()) {
			t.Errorf("the data dir holds %s, which dataDirEntries lacks", e.Name())
		}
	}

	// The same grant by the victim itself, and by a daemon whose data dir
	// is not made yet.
	fresh := filepath.Join(t.TempDir(), "data")
	for _, dataDir := range []string{victimData, fresh} {
		f := victim.flags
		f.dataDir, f.sandboxRO = dataDir, stringsFlag{filepath.Dir(dataDir)}
		_, err := start(context.Background(), &f, slog.New(slog.NewTextHandler(io.Discard, nil)))
		var ue *usageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), "--sandbox-ro "+filepath.Dir(dataDir)+": it is the data dir") {
			t.Fatalf("start with --sandbox-ro %s: %v, want a usage error", filepath.Dir(dataDir), err)
		}
		t.Logf("refused: %v", err)
	}
	if _, err := os.Stat(fresh); err == nil {
		t.Errorf("the refused daemon made its data dir")
	}
}

// TestRunRefusesGrantOfDaemonPaths: stackd run exits with a usage error
// that names the flag, the path and why, before it makes its data dir.
func TestRunRefusesGrantOfDaemonPaths(t *testing.T) {
	root := t.TempDir()
	config := filepath.Join(root, "stackd.yaml")
	if err := os.WriteFile(config, []byte("stacks: []\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	data, secrets, token := filepath.Join(root, "data"), filepath.Join(root, "secrets"), filepath.Join(root, "etc", "token")
	for _, c := range []struct{ args []string }{
		{[]string{"--sandbox-rw", root}},
		{[]string{"--sandbox-ro", data}},
		{[]string{"--sandbox-rw", filepath.Join(data, "backends")}},
		{[]string{"--secrets-dir", secrets, "--sandbox-ro", filepath.Join(secrets, "db")}},
		{[]string{"--api-token-file", token, "--sandbox-ro", filepath.Dir(token)}},
	} {
		args := append([]string{"run", "--config", config, "--data-dir", data, "--listen", "127.0.0.1:0"}, c.args...)
		code, _, stderr := stackd(t, args...)
		flag, path := c.args[len(c.args)-2], c.args[len(c.args)-1]
		if code != exitUsage || !strings.Contains(stderr, flag+" "+path+": it is") || !strings.Contains(stderr, "would let every program read") {
			t.Errorf("%v: exit %d, stderr %q", c.args, code, stderr)
		}
	}
	if _, err := os.Stat(data); err == nil {
		t.Errorf("a refused start made the data dir")
	}
	wantNoSubreaper(t)
}

// wantNoSubreaper fails the test when this process became a child
// subreaper: a refused stackd run, run within the tests' process, must
// leave it as it was, or the orphan reaper of every daemon the tests
// start afterwards kills what other tests leave running on purpose (a
// PostgreSQL server pg_ctl started, a daemon a guide started with &).
func wantNoSubreaper(t *testing.T) {
	t.Helper()
	var on int32
	// The conversion stays in the call of the assembly Syscall, so that
	// on stays in place until the call returns.
	if _, _, errno := unix.Syscall6(unix.SYS_PRCTL, unix.PR_GET_CHILD_SUBREAPER, uintptr(unsafe.Pointer(&on)), 0, 0, 0, 0); errno != 0 {
		t.Fatalf("PR_GET_CHILD_SUBREAPER: %v", errno)
	}
	if on != 0 {
		t.Fatal("a refused stackd run made the process a child subreaper")
	}
}
