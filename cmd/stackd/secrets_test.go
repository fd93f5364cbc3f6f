package main

import (
	"bytes"
	"crypto/subtle"
	"io"
	"io/fs"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stackd/stackd/daemon/model"
)

// The secret values of TestE2ESecretsStaySecret: distinctive, so that a
// leak anywhere is found by a plain search.
const (
	secretConfig = "cfg-SENTINEL-7c1d"
	secretEnv    = "env-SENTINEL-93ab"
	gitToken     = "git-SENTINEL-4e0f"
)

// gitBackend is git http-backend serving the repositories under root.
func gitBackend(t testing.TB, root string) http.Handler {
	t.Helper()
	git, err := exec.LookPath("git")
	if err != nil {
		t.Fatal(err)
	}
	return &cgi.Handler{Path: git, Args: []string{"http-backend"},
		Env: []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1", "GIT_CONFIG_NOSYSTEM=true", "GIT_CONFIG_GLOBAL=/dev/null"}}
}

// gitHTTP serves the repositories below root over smart HTTP with the
// real git http-backend, requiring basic auth with password token.
func gitHTTP(t *testing.T, root, token string) string {
	t.Helper()
	backend := gitBackend(t, root)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, pass, ok := r.BasicAuth()
		if !ok || subtle.ConstantTimeCompare([]byte(pass), []byte(token)) != 1 {
			w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		backend.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// cmdlineWatcher samples the argv of every process on the machine until
// stopped.
type cmdlineWatcher struct {
	mu    sync.Mutex
	seen  map[string]bool
	stopc chan struct{}
	done  chan struct{}
}

func watchCmdlines() *cmdlineWatcher {
	w := &cmdlineWatcher{seen: map[string]bool{}, stopc: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for {
			paths, _ := filepath.Glob("/proc/[0-9]*/cmdline")
			for _, p := range paths {
				if data, err := os.ReadFile(p); err == nil && len(data) > 0 {
					w.mu.Lock()
					w.seen[string(bytes.ReplaceAll(data, []byte{0}, []byte{' '}))] = true
					w.mu.Unlock()
				}
			}
			select {
			case <-w.stopc:
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	}()
	return w
}

func (w *cmdlineWatcher) stop() []string {
	close(w.stopc)
	<-w.done
	var out []string
	for c := range w.seen {
		out = append(out, c)
	}
	return out
}

func TestE2ESecretsStaySecret(t *testing.T) {
	t.Parallel()
	r := newRepo(t)
	r.commit(map[string]string{"Pulumi.yaml": program("v1")})
	r.git("config", "http.receivepack", "true")
	url := gitHTTP(t, filepath.Dir(r.dir), gitToken) + "/repo"
	out := filepath.Join(outDir(t), "note.txt")
	gates := newGates(t)
	watcher := watchCmdlines()

	dataDir := filepath.Join(t.TempDir(), "data")
	secrets := filepath.Join(dataDir, "..", "secrets")
	for name, value := range map[string]string{"app/token": secretConfig, "app/env": secretEnv, "git/token": gitToken} {
		p := filepath.Join(secrets, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(value), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	config := "stacks:\n" + strings.Replace(stackYAML("app", r, pathConfig(out)+`    secretsRef:
      token: {type: Secret, secret: {name: app, key: token}}
    envRefs:
      APP_SECRET: {type: Secret, secret: {name: app, key: env}}
`+gates.envRef()+`    gitAuth:
      accessToken: {type: Secret, secret: {name: git, key: token}}
`), "file://"+r.dir, url, 1)
	in := startDaemon(t, config, dataDir)
	v := in.waitStack("app", "deployed", time.Minute, isReady)
	if output(v, "secret") != "[secret]" {
		t.Fatalf("secret output = %q", output(v, "secret"))
	}
	// A second run with the secret env reaching a program that prints it,
	// held in the provider's update of the file (its gate) until the
	// test follows its log.
	gates.close("update", "note.txt")
	r.commit(map[string]string{"Pulumi.yaml": program("v2") + `  leaked:
    fn::invoke:
      function: stackdtest:index:getEnv
      arguments:
        name: APP_SECRET
      return: value
`})
	// Follow the log of that update while it runs: it streams from the
	// held point to the update's end.
	gates.waitHeld("update", "note.txt", 2*time.Minute)
	running := in.stack("app")
	if running.Status.CurrentUpdate == nil || running.Status.CurrentUpdate.Name != "app-2" {
		t.Fatalf("the provider's update is held, but the stack's current update is %+v, want app-2", running.Status.CurrentUpdate)
	}
	follow, err := http.Get(in.url + "/api/v1/updates/" + running.Status.CurrentUpdate.Name + "/log?follow=1")
	if err != nil {
		t.Fatal(err)
	}
	gates.open("update", "note.txt")
	streamed, err := io.ReadAll(follow.Body)
	follow.Body.Close()
	if err != nil || follow.StatusCode != http.StatusOK {
		t.Fatalf("following the log: %s %v", follow.Status, err)
	}
	in.waitStack("app", "second commit", time.Minute, func(v model.StackView) bool {
		return isReady(v) && output(v, "content") == "hello v2"
	})
	if !strings.Contains(string(streamed), "leaked") || !strings.Contains(string(streamed), "[secret]") {
		t.Fatalf("the streamed log does not show the scrubbed output:\n%s", streamed)
	}
	in.sync("app")
	in.waitStack("app", "synced", time.Minute, func(v model.StackView) bool {
		return isReady(v) && v.Status.LastUpdate != nil && v.Status.LastUpdate.Name == "app-3"
	})

	bodies := []string{string(streamed)}
	paths := []string{"/api/v1/stacks", "/api/v1/stacks/app", "/api/v1/stacks/app/updates", "/healthz", "/readyz", "/metrics", "/", "/stacks/app"}
	for _, u := range in.updates("app") {
		paths = append(paths, "/api/v1/updates/"+u.ID+"/log", "/api/v1/updates/"+u.ID+"/log?follow=1")
	}
	for _, path := range paths {
		_, body := in.get(path, nil)
		bodies = append(bodies, string(body))
	}
	logs := in.logs.String()
	in.stop()
	cmdlines := watcher.stop()

	for _, secret := range []string{secretConfig, secretEnv, gitToken} {
		for _, b := range bodies {
			if strings.Contains(b, secret) {
				t.Errorf("an HTTP response holds %s", secret)
			}
		}
		if strings.Contains(logs, secret) {
			t.Errorf("the daemon's log holds %s", secret)
		}
		for _, c := range cmdlines {
			if strings.Contains(c, secret) {
				t.Errorf("a process's argv holds %s: %s", secret, c)
			}
		}
		_ = filepath.WalkDir(dataDir, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			// The program itself copies the secret env into a plain output,
			// which Pulumi's state keeps as the program said.
			if d.IsDir() && secret == secretEnv && (d.Name() == "backend" || d.Name() == "backends") {
				return filepath.SkipDir
			}
			// Links lead out of the data dir: to the toolchain, and to the
			// plugin wrapper, which is this test's binary.
			if d.IsDir() || d.Type()&fs.ModeSymlink != 0 {
				return nil
			}
			if data, err := os.ReadFile(p); err == nil && bytes.Contains(data, []byte(secret)) {
				t.Errorf("%s holds %s", p, secret)
			}
			return nil
		})
	}
	pulumis := 0
	for _, c := range cmdlines {
		if strings.Contains(c, "pulumi") {
			pulumis++
		}
	}
	if pulumis == 0 {
		t.Fatal("the argv watcher saw no pulumi process: it proves nothing")
	}
	t.Logf("checked %d process command lines, %d of them pulumi's", len(cmdlines), pulumis)
}

// TestE2EOutputsScrubbed: outputs are scrubbed like logs. A program that
// copies a Literal envRef, a secret-named Env value or its stack's own
// passphrase into plain outputs finds them masked in the API, the UI,
// stackd.db and the daemon's log. No program reads a passphrase in the
// sandbox: this one runs with --sandbox=off, where it can.
func TestE2EOutputsScrubbed(t *testing.T) {
	const literal, fromEnv = "lit-CANARY-51c2", "env-CANARY-0b7e"
	t.Setenv("STACKD_TEST_CANARY", fromEnv)
	r := newRepo(t)
	r.commit(map[string]string{"Pulumi.yaml": `name: outputs
runtime: yaml
configuration:
  passphraseFile:
    type: String
variables:
  lit:
    fn::invoke:
      function: stackdtest:index:getEnv
      arguments: {name: LIT}
      return: value
  env:
    fn::invoke:
      function: stackdtest:index:getEnv
      arguments: {name: API_TOKEN}
      return: value
outputs:
  literal: ${lit}
  nested:
    list: ["x ${env} y"]
  passphrase:
    fn::readFile: ${passphraseFile}
`})
	dataDir := filepath.Join(t.TempDir(), "data")
	config := func(passphraseFile string) string {
		return "stacks:\n" + stackYAML("app", r, `    config:
      passphraseFile: `+passphraseFile+`
    envRefs:
      LIT: {type: Literal, literal: {value: `+literal+`}}
      API_TOKEN: {type: Env, env: {name: STACKD_TEST_CANARY}}
`)
	}
	// The stack's passphrase is made on its first update; the second
	// copies it.
	in := startDaemonWith(t, config("/dev/null"), dataDir, func(f *runFlags) { f.sandbox, f.sandboxRW = "off", nil })
	first := in.waitStack("app", "deployed", time.Minute, isReady).Status.LastUpdate.Name
	own, _ := filepath.Glob(filepath.Join(dataDir, "passphrases", "*"))
	if len(own) != 1 {
		t.Fatalf("the stack's own passphrase: %v, want one", own)
	}
	in.reload(config(own[0]))
	v := in.waitStack("app", "deployed again", time.Minute, func(v model.StackView) bool {
		return isReady(v) && v.Status.LastUpdate.Name != first
	})
	passphrase, err := os.ReadFile(own[0])
	if err != nil || len(bytes.TrimSpace(passphrase)) < 8 {
		t.Fatalf("passphrase: %q %v", passphrase, err)
	}
	if len(v.Status.Outputs) != 3 {
		t.Fatalf("outputs = %s", v.Status.Outputs)
	}
	var bodies []string
	for _, path := range []string{"/api/v1/stacks", "/api/v1/stacks/app", "/stacks/app"} {
		_, body := in.get(path, nil)
		bodies = append(bodies, string(body))
	}
	logs := in.logs.String()
	in.stop()
	db, err := os.ReadFile(filepath.Join(dataDir, "stackd.db"))
	if err != nil {
		t.Fatal(err)
	}
	bodies = append(bodies, string(db), logs)
	for _, secret := range []string{literal, fromEnv, string(bytes.TrimSpace(passphrase))} {
		for i, b := range bodies {
			if strings.Contains(b, secret) {
				t.Errorf("body %d (API, UI, stackd.db or the daemon's log) holds a canary output", i)
			}
		}
	}
}

// TestE2ESymlinkedProjectRefused: a repository whose Pulumi.yaml links
// outside its checkout is refused with a plain message, and nothing of
// the linked file shows.
func TestE2ESymlinkedProjectRefused(t *testing.T) {
	t.Parallel()
	r := newRepo(t)
	r.commit(map[string]string{"README": "x"})
	if err := os.Symlink("/etc/passwd", filepath.Join(r.dir, "Pulumi.yaml")); err != nil {
		t.Fatal(err)
	}
	r.git("add", "-A")
	r.git("commit", "-q", "-m", "link")
	in := startDaemon(t, "stacks:\n"+stackYAML("app", r, ""), "")
	v := in.waitStack("app", "refused", time.Minute, func(v model.StackView) bool {
		return v.Status.LastUpdate != nil && v.Status.LastUpdate.State == model.UpdateFailed
	})
	if msg := v.Status.LastUpdate.Message; !strings.Contains(msg, "Pulumi.yaml is a symbolic link that leads outside") || strings.Contains(msg, "root:") {
		t.Fatalf("message %q", msg)
	}
}
