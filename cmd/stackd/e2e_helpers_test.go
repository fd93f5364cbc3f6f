package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stackd/stackd/auth"
	"github.com/stackd/stackd/daemon/model"
	"github.com/stackd/stackd/daemon/spec"
	"github.com/stackd/stackd/runner"
)

// The end-to-end tests run the daemon with the real pieces: git
// repositories made with the git CLI, go-git, the pulumi CLI and YAML
// language host, the project's test provider, a bbolt file and the HTTP
// server on loopback.

// toolchainBin is the project's bin directory with the pinned Pulumi
// toolchain. Only -short skips tests that need it.
func toolchainBin(t testing.TB) string {
	t.Helper()
	if testing.Short() {
		t.Skip("needs the Pulumi toolchain (make toolchain)")
	}
	bin, err := filepath.Abs(filepath.Join("..", "..", "bin"))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"pulumi", "pulumi-language-yaml", "pulumi-resource-stackdtest"} {
		if _, err := os.Stat(filepath.Join(bin, name)); err != nil {
			t.Fatalf("%s missing: run make toolchain (%v)", name, err)
		}
	}
	return bin
}

// repo is a Git repository made with the git CLI.
type repo struct {
	t   testing.TB
	dir string
}

func newRepo(t testing.TB) *repo {
	t.Helper()
	r := &repo{t: t, dir: filepath.Join(t.TempDir(), "repo")}
	r.git("init", "-q", "-b", "main", r.dir)
	return r
}

func (r *repo) git(args ...string) string {
	r.t.Helper()
	cmd := exec.Command("git", args...)
	if args[0] != "init" {
		cmd.Dir = r.dir
	}
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=true",
		"GIT_AUTHOR_NAME=test", "GIT_AUTHOR_EMAIL=test@example.com",
		"GIT_COMMITTER_NAME=test", "GIT_COMMITTER_EMAIL=test@example.com")
	out, err := cmd.CombinedOutput()
	if err != nil {
		r.t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// commit writes files (path → content) and commits them; it returns the
// commit's SHA.
func (r *repo) commit(files map[string]string) string {
	r.t.Helper()
	for name, content := range files {
		p := filepath.Join(r.dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			r.t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			r.t.Fatal(err)
		}
	}
	r.git("add", "-A")
	r.git("commit", "-q", "-m", "change")
	return r.git("rev-parse", "HEAD")
}

// program is a Pulumi YAML program with one test-provider File at the
// config value "path" whose content is "<greeting> <version>", and
// outputs: content, and secret (the "token" config, a secret).
func program(version string) string {
	return `name: e2e
runtime: yaml
configuration:
  path:
    type: String
  greeting:
    type: String
    default: hello
  token:
    type: String
    default: none
resources:
  note:
    type: stackdtest:index:File
    properties:
      path: ${path}
      content: ${greeting} ` + version + `
outputs:
  content: ${note.content}
  secret: ${token}
`
}

// outDirs are the tests' out dirs (see outDir).
var outDirs = struct {
	sync.Mutex
	m map[testing.TB]string
}{m: map[testing.TB]string{}}

// outDir is the directory of t where its programs write their files (the
// test provider's File resources): the one path its daemons grant the
// sandbox (--sandbox-rw), made on the first call. It is a directory of
// its own: neither in nor above a data dir or secrets dir of the test,
// which no test may grant.
func outDir(t testing.TB) string {
	t.Helper()
	outDirs.Lock()
	defer outDirs.Unlock()
	if d, ok := outDirs.m[t]; ok {
		return d
	}
	d := t.TempDir()
	outDirs.m[t] = d
	t.Cleanup(func() {
		outDirs.Lock()
		defer outDirs.Unlock()
		delete(outDirs.m, t)
	})
	return d
}

// instance is a daemon started in-process on a loopback port.
type instance struct {
	t       testing.TB
	app     *app
	url     string
	flags   runFlags
	logs    *syncBuffer
	cfgPath string
	// token is the API token the daemon requires: its --api-token-file's
	// or the one it generated into its data dir; "" with --api-no-token.
	token string
}

// syncBuffer collects the daemon's log lines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// startDaemon writes config into a file and runs the daemon on it with
// fast test timings; dataDir "" makes a new one.
func startDaemon(t testing.TB, config, dataDir string) *instance {
	t.Helper()
	return startDaemonWith(t, config, dataDir, nil)
}

// startDaemonWith is startDaemon with flags changed by tweak.
func startDaemonWith(t testing.TB, config, dataDir string, tweak func(*runFlags)) *instance {
	t.Helper()
	bin := toolchainBin(t)
	if dataDir == "" {
		dataDir = t.TempDir()
	}
	cfgPath := filepath.Join(t.TempDir(), "stackd.yaml")
	if err := os.WriteFile(cfgPath, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	in := &instance{t: t, logs: &syncBuffer{}, cfgPath: cfgPath}
	in.flags = runFlags{sourceFlags: sourceFlags{config: stringsFlag{cfgPath}, pollInterval: time.Second}, dataDir: dataDir, listen: "127.0.0.1:0", pulumiBin: bin,
		secretsDir:    filepath.Join(dataDir, "..", "secrets"),
		maxConcurrent: 2, maxFailures: 3, minResync: time.Second, retryBackoff: 300 * time.Millisecond,
		opTimeout: 2 * time.Minute, gitTimeout: 10 * time.Second, shutdownGrace: 30 * time.Second,
		pulumiGOGC: runner.DefaultEngineGOGC, // the flag's default
		// Programs write their test-provider files in the test's out
		// dir, the one path granted: never the data dir, the secrets
		// dir or a parent of them, which the daemon refuses.
		sandboxFlags: sandboxFlags{sandboxRW: stringsFlag{outDir(t)}}}
	if tweak != nil {
		tweak(&in.flags)
	}
	var w io.Writer = io.MultiWriter(in.logs, testWriter{t})
	if _, bench := t.(*testing.B); bench {
		w = in.logs // a benchmark's output is its numbers
	}
	log := slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
	a, err := start(context.Background(), &in.flags, log)
	if err != nil {
		t.Fatalf("start: %v\n%s", err, in.logs)
	}
	in.app, in.url = a, "http://"+a.srv.Addr()
	t.Cleanup(func() { in.stop() })
	in.token = apiTokenOf(t, &in.flags)
	return in
}

// apiTokenOf is the token a daemon started with f requires, read as the
// client commands read it.
func apiTokenOf(t testing.TB, f *runFlags) string {
	t.Helper()
	path := filepath.Join(f.dataDir, apiTokenFile)
	switch {
	case f.noToken:
		return ""
	case f.tokenFile != "":
		path = f.tokenFile
	}
	token, err := auth.ReadAdminToken(path)
	if err != nil {
		t.Fatalf("the API token: %v", err)
	}
	return token
}

// clientArgs are args of a client command for this daemon: its URL, and
// its data dir, where the command finds the API token.
func (in *instance) clientArgs(args ...string) []string {
	return append(args, "--server", in.url, "--data-dir", in.flags.dataDir)
}

func (in *instance) stop() {
	if in.app == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := in.app.stop(ctx); err != nil {
		in.t.Errorf("stop: %v", err)
	}
	in.app = nil
}

// reload loads config and applies it, as a reload does.
func (in *instance) reload(config string) {
	in.t.Helper()
	if err := os.WriteFile(in.cfgPath, []byte(config), 0o600); err != nil {
		in.t.Fatal(err)
	}
	cfg, diags, err := spec.Load(in.cfgPath)
	if err != nil {
		in.t.Fatalf("load: %v %v", err, diags)
	}
	if err := in.app.d.Apply(cfg); err != nil {
		in.t.Fatal(err)
	}
}

// testWriter sends log lines to t.Log, so a failing test shows them.
type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// get fetches path and decodes its JSON into v; it returns the status and
// the raw body.
func (in *instance) get(path string, v any) (int, []byte) {
	in.t.Helper()
	code, body, err := in.tryGet(path, v)
	if err != nil {
		in.t.Fatal(err)
	}
	return code, body
}

// tryGet is get that returns a connection error instead of failing.
func (in *instance) tryGet(path string, v any) (int, []byte, error) {
	resp, err := http.Get(in.url + path)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if v != nil && resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(body, v); err != nil {
			return 0, nil, fmt.Errorf("GET %s: %w\n%s", path, err, body)
		}
	}
	return resp.StatusCode, body, nil
}

func (in *instance) stack(name string) model.StackView {
	in.t.Helper()
	var v model.StackView
	if code, body := in.get("/api/v1/stacks/"+name, &v); code != http.StatusOK {
		in.t.Fatalf("GET stack %s: %d %s", name, code, body)
	}
	return v
}

func (in *instance) sync(name string) string {
	in.t.Helper()
	req, err := http.NewRequest(http.MethodPost, in.url+"/api/v1/stacks/"+name+"/sync", nil)
	if err != nil {
		in.t.Fatal(err)
	}
	if in.token != "" {
		req.Header.Set("Authorization", "Bearer "+in.token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		in.t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct{ Request string }
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusAccepted {
		in.t.Fatalf("sync %s: %d %v", name, resp.StatusCode, err)
	}
	return out.Request
}

// waitStack polls the API until cond holds for the stack, for up to
// timeout.
func (in *instance) waitStack(name, what string, timeout time.Duration, cond func(v model.StackView) bool) model.StackView {
	in.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		var v model.StackView
		code, body, err := in.tryGet("/api/v1/stacks/"+name, &v)
		if err == nil && code == http.StatusOK && cond(v) {
			return v
		}
		if time.Now().After(deadline) {
			in.t.Fatalf("stack %s: timed out waiting for %s; last: %d %s %v", name, what, code, body, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func isReady(v model.StackView) bool {
	c := v.Status.Condition(model.ConditionReady)
	return c != nil && c.Status == "True"
}

func stalledFor(reason string) func(v model.StackView) bool {
	return func(v model.StackView) bool {
		c := v.Status.Condition(model.ConditionStalled)
		return c != nil && c.Status == "True" && c.Reason == reason
	}
}

// readFile returns a file's content, "" when it does not exist.
func readFile(t testing.TB, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func output(v model.StackView, name string) string {
	raw, ok := v.Status.Outputs[name]
	if !ok {
		return "<none>"
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return string(raw)
	}
	return s
}

// stackYAML is one compact-list stack tracking r's main branch. Its
// Pulumi stack has the stack's name: stacks of one project on one backend
// must not share a Pulumi stack.
func stackYAML(name string, r *repo, extra string) string {
	return fmt.Sprintf("  - name: %s\n    stack: %s\n    projectRepo: %s\n    branch: main\n    resyncFrequencySeconds: 1\n%s",
		name, name, "file://"+r.dir, extra)
}

// gates are the test provider's gates (STACKDTEST_HOLD): a directory in
// t's out dir (which the sandbox opens to programs) where a test holds a
// File's create, update or delete open for as long as it needs, rather
// than hoping to catch it while it runs. The gate of an operation is
// named "<op>-<base name of the File's path>", as "delete-app-pr-5.txt".
type gates struct {
	t   testing.TB
	dir string
}

// newGates makes t's gates directory. Every gate left closed is opened
// when the test ends, so that no operation waits past it.
func newGates(t testing.TB) *gates {
	t.Helper()
	g := &gates{t: t, dir: filepath.Join(outDir(t), "gates")}
	if err := os.MkdirAll(g.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		closed, _ := filepath.Glob(filepath.Join(g.dir, "*"))
		for _, f := range closed {
			if !strings.HasSuffix(f, ".held") {
				_ = os.Remove(f)
			}
		}
	})
	return g
}

// envRef is the envRefs entry that gives a stack's program these gates,
// indented for a stack of the list form.
func (g *gates) envRef() string {
	return "      STACKDTEST_HOLD: {type: Literal, literal: {value: " + g.dir + "}}\n"
}

// close closes the gate of op on file: the next such operation waits
// there until open.
func (g *gates) close(op, file string) {
	g.t.Helper()
	if err := os.WriteFile(filepath.Join(g.dir, op+"-"+file), nil, 0o644); err != nil {
		g.t.Fatal(err)
	}
}

// open opens the gate of op on file: an operation waiting there goes on.
func (g *gates) open(op, file string) {
	g.t.Helper()
	if err := os.Remove(filepath.Join(g.dir, op+"-"+file)); err != nil && !os.IsNotExist(err) {
		g.t.Fatal(err)
	}
}

// waitHeld waits until an operation op on file waits at its closed gate,
// and returns the pid of the provider holding it, which stays held until
// the gate opens. A pid in not (the pids of holders already seen: say, a
// provider killed while it waited) does not count.
func (g *gates) waitHeld(op, file string, timeout time.Duration, not ...int) int {
	g.t.Helper()
	held := filepath.Join(g.dir, op+"-"+file+".held")
	deadline := time.Now().Add(timeout)
	for {
		if data, err := os.ReadFile(held); err == nil {
			if pid, err := strconv.Atoi(string(data)); err == nil && !slices.Contains(not, pid) {
				return pid
			}
		}
		if time.Now().After(deadline) {
			g.t.Fatalf("timed out waiting for the %s of %s to wait at its gate", op, file)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
