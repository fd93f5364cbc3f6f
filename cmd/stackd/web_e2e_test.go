package main

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stackd/stackd/daemon/model"
)

// post sends a POST with headers and returns the status.
func (in *instance) post(path string, body []byte, headers map[string]string) int {
	in.t.Helper()
	req, err := http.NewRequest(http.MethodPost, in.url+path, bytes.NewReader(body))
	if err != nil {
		in.t.Fatal(err)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		in.t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestE2ETokenAndWebhook: with a token configured, a sync without it is
// refused and changes nothing; with it the sync runs. A push webhook with a
// bad signature is refused; a signed one starts the update at once, long
// before the polling period.
func TestE2ETokenAndWebhook(t *testing.T) {
	t.Parallel()
	r := newRepo(t)
	r.commit(map[string]string{"Pulumi.yaml": program("v1")})
	out := filepath.Join(outDir(t), "note.txt")
	secrets := t.TempDir()
	tokenFile, hookFile := filepath.Join(secrets, "token"), filepath.Join(secrets, "hook")
	const token, hookSecret = "api-token-e2e", "hook-secret-e2e"
	for p, v := range map[string]string{tokenFile: token + "\n", hookFile: hookSecret} {
		if err := os.WriteFile(p, []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	config := "stacks:\n" + strings.Replace(stackYAML("app", r, pathConfig(out)), "resyncFrequencySeconds: 1", "resyncFrequencySeconds: 600", 1)
	in := startDaemonWith(t, config, "", func(f *runFlags) {
		f.tokenFile, f.webhookFile, f.minResync = tokenFile, hookFile, time.Minute
	})
	in.waitStack("app", "first deploy", time.Minute, isReady)

	for _, auth := range []string{"", "Bearer wrong"} {
		if code := in.post("/api/v1/stacks/app/sync", nil, map[string]string{"Authorization": auth}); code != http.StatusUnauthorized {
			t.Fatalf("sync with Authorization %q: %d, want 401", auth, code)
		}
	}
	time.Sleep(200 * time.Millisecond)
	if n := len(in.updates("app")); n != 1 {
		t.Fatalf("a refused sync ran an update (%d updates)", n)
	}
	if code := in.post("/api/v1/stacks/app/sync", nil, map[string]string{"Authorization": "Bearer " + token}); code != http.StatusAccepted {
		t.Fatalf("sync with the token: %d, want 202", code)
	}
	in.waitStack("app", "the sync", time.Minute, func(v model.StackView) bool {
		return isReady(v) && v.Status.LastUpdate.Name == "app-2"
	})

	commit := r.commit(map[string]string{"Pulumi.yaml": program("v2")})
	payload := []byte(fmt.Sprintf(`{"ref":"refs/heads/main","after":%q,"repository":{"clone_url":%q,"html_url":"https://example.invalid/x"}}`,
		commit, "file://"+r.dir))
	github := func(secret string) map[string]string {
		mac := hmac.New(sha256.New, []byte(secret))
		mac.Write(payload)
		return map[string]string{"X-GitHub-Event": "push", "Content-Type": "application/json",
			"X-Hub-Signature-256": "sha256=" + hex.EncodeToString(mac.Sum(nil))}
	}
	if code := in.post("/api/v1/webhooks/git", payload, github("not-the-secret")); code != http.StatusUnauthorized {
		t.Fatalf("webhook with a bad signature: %d, want 401", code)
	}
	start := time.Now()
	if code := in.post("/api/v1/webhooks/git", payload, github(hookSecret)); code != http.StatusAccepted {
		t.Fatalf("signed webhook: %d, want 202", code)
	}
	in.waitStackFast("app", func(v model.StackView) bool {
		return v.Status.CurrentUpdate != nil && v.Status.CurrentUpdate.Commit == commit
	})
	latency := time.Since(start)
	t.Logf("push-to-start latency: %v (polling period 10m)", latency.Round(time.Millisecond))
	in.waitStack("app", "the pushed commit", time.Minute, func(v model.StackView) bool {
		return isReady(v) && v.Status.LastUpdate.LastSuccessfulCommit == commit
	})
	if got := readFile(t, out); got != "hello v2" {
		t.Fatalf("file = %q after the push", got)
	}
}

// TestE2EUIExample runs the bundled example config (the Program stack and
// the local example repository that make run creates) and looks at the
// web UI in headless Chromium, keeping screenshots.
func TestE2EUIExample(t *testing.T) {
	chromium := tool(t, "chromium")
	root := t.TempDir()
	for _, dir := range []string{"configs", ".data"} {
		if err := os.MkdirAll(filepath.Join(root, dir), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	example, err := os.ReadFile(filepath.Join("..", "..", "configs", "stackd.example.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	// As make run does.
	state := filepath.Join(root, ".data", "state")
	script := exec.Command("sh", filepath.Join("tools", "example.sh"), filepath.Join(root, ".data", "example-repo"))
	script.Dir = filepath.Join("..", "..")
	script.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=true",
		"PATH="+toolchainBin(t)+string(os.PathListSeparator)+os.Getenv("PATH"))
	if out, err := script.CombinedOutput(); err != nil {
		t.Fatalf("example.sh: %v\n%s", err, out)
	}
	out := filepath.Join(root, ".data", "example-out")
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("STACKD_EXAMPLE_OUT", out)
	// The example's relative repository path starts at the config's
	// directory: the config goes where configs/ is in the repository.
	cfgPath := filepath.Join(root, "configs", "stackd.example.yaml")
	if err := os.WriteFile(cfgPath, example, 0o600); err != nil {
		t.Fatal(err)
	}
	in := startDaemonWith(t, string(example), state, func(f *runFlags) {
		f.config = stringsFlag{cfgPath}
		f.sandboxRW = stringsFlag{out}
	})
	for _, name := range []string{"hello", "example"} {
		v := in.waitStack(name, "deployed", time.Minute, isReady)
		// The example speaks only of itself: no deprecation warning, no
		// notice about where a plugin came from.
		if _, log := in.get("/api/v1/updates/"+v.Status.LastUpdate.Name+"/log", nil); bytes.Contains(bytes.ToLower(log), []byte("warning")) {
			t.Errorf("the log of %s's update warns:\n%s", name, log)
		}
	}
	if got := readFile(t, filepath.Join(root, ".data", "example-out", "note.txt")); got != "Hello from stackd" {
		t.Fatalf("example file = %q", got)
	}

	dom := chromiumRun(t, chromium, "--dump-dom", in.url+"/")
	for _, want := range []string{"example", "hello", "Healthy"} {
		if !strings.Contains(dom, want) {
			t.Fatalf("the stack list lacks %q:\n%s", want, dom)
		}
	}
	dom = chromiumRun(t, chromium, "--dump-dom", in.url+"/stacks/example")
	for _, want := range []string{"Hello from stackd", "Healthy", "note.txt"} {
		if !strings.Contains(dom, want) {
			t.Fatalf("the example's page lacks %q", want)
		}
	}
	dir := os.Getenv("STACKD_TEST_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join("..", "..", ".artifacts")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for page, file := range map[string]string{"/": "e2e-example-list.png", "/stacks/example": "e2e-example-stack.png"} {
		path, _ := filepath.Abs(filepath.Join(dir, file))
		chromiumRun(t, chromium, "--screenshot="+path, "--window-size=1280,900", in.url+page)
		png, err := os.ReadFile(path)
		if err != nil || !bytes.HasPrefix(png, []byte("\x89PNG")) {
			t.Fatalf("screenshot %s: %v", path, err)
		}
		t.Logf("screenshot of %s: %s", page, path)
	}
}

// chromiumRun runs headless Chromium once and returns its output.
func chromiumRun(t *testing.T, chromium string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	base := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
		"--disable-component-update", "--no-first-run", "--hide-scrollbars", "--user-data-dir=" + t.TempDir()}
	cmd := exec.CommandContext(ctx, chromium, append(base, args...)...)
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium: %v\n%s", err, stderr.String())
	}
	return stdout.String()
}
