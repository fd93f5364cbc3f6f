package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stackd/stackd/daemon/model"
)

// hostStack is a compact-list manifest of stack app of the programs
// repository at dir, writing its File at out/app.txt with greeting, and
// extra lines of its spec.
func hostStack(dir, out, greeting, extra string) string {
	return fmt.Sprintf(`stacks:
  - name: app
    stack: app
    projectRepo: file://%s
    repoDir: app
    branch: main
    resyncFrequencySeconds: 1
    config:
      path: %s
      greeting: %s
%s`, dir, filepath.Join(out, "app.txt"), greeting, extra)
}

// TestE2EGitConfigBackendInDataDir is the attack of a committer to a
// config repository: a stack whose backend is the data dir, which the
// sandbox would open read-write to the stack's programs (the API token,
// the digest key, stackd.db and the shared plugin cache in it). Named in
// spec.backend, the commit is refused with file:line:column, the field
// and the flag that allows a backend; named through PULUMI_BACKEND_URL
// from a Secret, which validation cannot read, the stack is refused
// before anything runs, Stalled with the field in its status. Nothing is
// written into the data dir in either case, and the stack keeps what it
// deployed.
func TestE2EGitConfigBackendInDataDir(t *testing.T) {
	t.Parallel()
	toolchainBin(t)
	programs, manifests := newRepo(t), newRepo(t)
	v1 := programs.commit(map[string]string{"app/Pulumi.yaml": program("v1")})
	out, dataDir, secrets := t.TempDir(), t.TempDir(), t.TempDir()
	if err := os.MkdirAll(filepath.Join(secrets, "backend"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(secrets, "backend", "url"), []byte("file://"+dataDir+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	manifests.commit(map[string]string{"stacks/app.yaml": hostStack(programs.dir, out, "hello", "")})
	src := "git+file://" + manifests.dir + "//stacks?ref=main"
	in := startDaemonWith(t, "", dataDir, func(f *runFlags) {
		f.config, f.secretsDir, f.repoRoots = stringsFlag{src}, secrets, stringsFlag{filepath.Dir(programs.dir)}
		f.sandboxRW = stringsFlag{out} // where its File is written, and nothing of the data dir
	})
	in.waitStack("app", "first deploy", 2*time.Minute, func(v model.StackView) bool {
		return isReady(v) && v.Status.LastUpdate != nil && v.Status.LastUpdate.LastSuccessfulCommit == v1
	})
	deployed := len(in.updates("app"))
	untouched := func(when string) {
		t.Helper()
		if _, err := os.Stat(filepath.Join(dataDir, ".pulumi")); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%s: the data dir holds a Pulumi backend (%v)", when, err)
		}
		if got := readFile(t, filepath.Join(out, "app.txt")); got != "hello v1" {
			t.Fatalf("%s: the stack's File holds %q", when, got)
		}
		if n := len(in.updates("app")); n != deployed {
			t.Fatalf("%s: %d updates, want %d", when, n, deployed)
		}
	}
	config := func() model.ConfigStatus {
		var st model.ConfigStatus
		in.get("/api/v1/config", &st)
		return st
	}
	waitRefused := func(commit, want string) model.ConfigStatus {
		t.Helper()
		deadline := time.Now().Add(time.Minute)
		for {
			st := config()
			if len(st.Sources) == 1 && st.Sources[0].LatestCommit == commit && st.Sources[0].Error != "" {
				if !strings.Contains(st.Sources[0].Error, want) {
					t.Fatalf("the source's error does not say %q:\n%s", want, st.Sources[0].Error)
				}
				return st
			}
			if time.Now().After(deadline) {
				t.Fatalf("commit %.8s not refused; config status: %+v", commit, st)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}

	// spec.backend: file://<data-dir>.
	bad := manifests.commit(map[string]string{"stacks/app.yaml": hostStack(programs.dir, out, "pwned",
		"    backend: file://"+dataDir+"\n")})
	st := waitRefused(bad, "file://"+manifests.dir+"//stacks/app.yaml:11:14: stacks[0].backend: "+
		"a file:// backend may not lie in the data dir (--data-dir)")
	if st.Sources[0].Commit == bad {
		t.Fatal("the refused commit is in force")
	}
	untouched("spec.backend in the data dir")

	// file:/// and a directory outside any --backend-root.
	bad = manifests.commit(map[string]string{"stacks/app.yaml": hostStack(programs.dir, out, "pwned",
		"    backend: file:///\n")})
	waitRefused(bad, "stacks[0].backend: a file:// backend may not be a parent of the data dir (--data-dir)")
	bad = manifests.commit(map[string]string{"stacks/app.yaml": hostStack(programs.dir, out, "pwned",
		"    backend: file://"+t.TempDir()+"\n")})
	waitRefused(bad, "stacks[0].backend: a config from Git may name a file:// backend only under a directory the operator allows with --backend-root")
	untouched("other file backends")

	// PULUMI_BACKEND_URL from a Secret that holds file://<data-dir>.
	applied := manifests.commit(map[string]string{"stacks/app.yaml": hostStack(programs.dir, out, "pwned",
		"    envRefs:\n      PULUMI_BACKEND_URL: {type: Secret, secret: {name: backend, key: url}}\n")})
	v := in.waitStack("app", "refused before it runs", time.Minute, stalledFor(model.ReasonSpecInvalid))
	if c := v.Status.Condition(model.ConditionStalled); !strings.Contains(c.Message, "envRefs.PULUMI_BACKEND_URL: a file:// backend may not lie in the data dir (--data-dir)") ||
		strings.Contains(c.Message, dataDir) {
		t.Fatalf("the Stalled condition says %q", c.Message)
	}
	if st := config(); st.Sources[0].Commit != applied {
		t.Fatalf("the commit whose Secret names the backend is not in force: %+v", st.Sources[0])
	}
	untouched("PULUMI_BACKEND_URL from a Secret")
}

// TestHostPathFlags: the operator's own paths are checked at start, and a
// local config is held to the rule on backends too: a --default-backend
// or a local config naming the data dir, and a --backend-root in it,
// stop the start with a message that names the flag or the field.
func TestHostPathFlags(t *testing.T) {
	dataDir := t.TempDir()
	cfg := filepath.Join(t.TempDir(), "stackd.yaml")
	stack := "stacks:\n  - name: app\n    stack: dev\n    projectRepo: https://git.example/app.git\n    branch: main\n"
	tests := []struct {
		name    string
		backend string // spec.backend of the local config
		tweak   func(f *runFlags)
		want    string
	}{
		{name: "default backend in the data dir", tweak: func(f *runFlags) { f.backend = "file://" + dataDir },
			want: "--default-backend: a file:// backend may not lie in the data dir (--data-dir)"},
		{name: "default backend above the data dir", tweak: func(f *runFlags) { f.backend = "file:///" },
			want: "--default-backend: a file:// backend may not be a parent of the data dir (--data-dir)"},
		{name: "default backend relative", tweak: func(f *runFlags) { f.backend = "file://state" },
			want: "--default-backend: a file:// backend needs an absolute path"},
		{name: "default backend in --secrets-dir", tweak: func(f *runFlags) {
			f.secretsDir = t.TempDir()
			f.backend = "file://" + f.secretsDir + "/x"
		}, want: "--default-backend: a file:// backend may not lie in --secrets-dir"},
		{name: "backend root in the data dir", tweak: func(f *runFlags) { f.backendRoots = stringsFlag{dataDir + "/states"} },
			want: "--backend-root " + dataDir + "/states: lies in the data dir (--data-dir)"},
		{name: "repo root in the data dir", tweak: func(f *runFlags) { f.repoRoots = stringsFlag{dataDir} },
			want: "--repo-root " + dataDir + ": lies in the data dir (--data-dir)"},
		{name: "a local config's backend in the data dir", backend: "file://" + dataDir + "/pulumi-home/plugins",
			want: "stackd.yaml:6:14: stacks[0].backend: a file:// backend may not lie in the data dir (--data-dir)"},
		{name: "a local config's backend above its own file", backend: "file://" + filepath.Dir(cfg),
			want: "stacks[0].backend: a file:// backend may not be a parent of a config source (--config)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			text := stack
			if tt.backend != "" {
				text += "    backend: " + tt.backend + "\n"
			}
			if err := os.WriteFile(cfg, []byte(text), 0o600); err != nil {
				t.Fatal(err)
			}
			f := runFlags{sourceFlags: sourceFlags{config: stringsFlag{cfg}}, dataDir: dataDir, listen: "127.0.0.1:0"}
			if tt.tweak != nil {
				tt.tweak(&f)
			}
			var logs bytes.Buffer
			a, err := start(context.Background(), &f, slog.New(slog.NewTextHandler(&logs, nil)))
			if err == nil {
				_ = a.stop(context.Background())
				t.Fatal("started")
			}
			if got := err.Error() + "\n" + logs.String(); !strings.Contains(got, tt.want) {
				t.Fatalf("the start's error does not say %q:\n%s", tt.want, got)
			}
		})
	}
	// The data dir's own backend, written out, is the default.
	if err := os.WriteFile(cfg, []byte(stack), 0o600); err != nil {
		t.Fatal(err)
	}
	f := runFlags{sourceFlags: sourceFlags{config: stringsFlag{cfg}}, dataDir: dataDir, backend: "file://" + filepath.Join(dataDir, "backend")}
	if _, err := f.hostPaths(nil, dataDir); err != nil {
		t.Fatalf("the data dir's own backend: %v", err)
	}
}
