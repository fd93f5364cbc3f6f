package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stackd/stackd/daemon/model"
)

// guideStep is a fenced block of a guide that a marker comment before it
// gives to the test: <!-- file: PATH --> writes the block to PATH (under
// the home directory), <!-- run: NAME --> runs it with bash, and
// <!-- daemon --> starts it in the background.
type guideStep struct {
	kind, arg, body string
	line            int
}

var guideMarker = regexp.MustCompile(`^<!-- (file|run|daemon)(?:: (\S+))? -->$`)

// guideSteps reads the marked blocks of the guide at path, in order.
func guideSteps(t *testing.T, path string) []guideStep {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var steps []guideStep
	var cur *guideStep
	inBlock := false
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case cur != nil && !inBlock && strings.HasPrefix(line, "```"):
			inBlock = true
		case cur != nil && inBlock && line == "```":
			steps = append(steps, *cur)
			cur, inBlock = nil, false
		case cur != nil && inBlock:
			cur.body += line + "\n"
		case cur != nil:
			t.Fatalf("%s:%d: a marker not followed by a fenced block", path, cur.line)
		default:
			if m := guideMarker.FindStringSubmatch(line); m != nil {
				cur = &guideStep{kind: m[1], arg: m[2], line: n}
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return steps
}

// guideListen is the address of the guide's daemon, beside make run's.
const guideListen = "127.0.0.1:8081"

// TestE2EFirstStackGuide runs docs/first-stack.md as a new user would:
// its files written, its commands run in order with the stackd binary,
// the real pulumi and the test provider on PATH, against the daemon its
// own command starts. Before some commands it waits for what the guide
// says has happened by then, and it checks what they print.
func TestE2EFirstStackGuide(t *testing.T) {
	t.Parallel()
	bin := toolchainBin(t)
	exe := buildStackd(t)
	home := t.TempDir()
	addr := freeAddr(t)
	env := append(os.Environ(),
		"HOME="+home,
		"PATH="+filepath.Dir(exe)+string(os.PathListSeparator)+bin+string(os.PathListSeparator)+os.Getenv("PATH"),
		"GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=true",
		"GIT_AUTHOR_NAME=Guide", "GIT_AUTHOR_EMAIL=guide@example.com",
		"GIT_COMMITTER_NAME=Guide", "GIT_COMMITTER_EMAIL=guide@example.com",
		// The guide's daemon listens on a fixed address (guideListen),
		// which a test may not; its client commands find it through the
		// data dir, with no STACKD_SERVER.
		"STACKD_LISTEN="+addr)
	site := filepath.Join(home, "first", "site")
	page := func() string { return readFile(t, filepath.Join(site, "index.html")) }
	stack := func(what string, cond func(model.StackView) bool) {
		t.Helper()
		waitGuideStack(t, "http://"+addr+"/api/v1/stacks/website", what, 3*time.Minute, cond)
	}
	contentIs := func(s string) func(model.StackView) bool {
		return func(v model.StackView) bool { return isReady(v) && output(v, "content") == s }
	}
	// What the guide says has happened before each command, and what the
	// command prints.
	before := map[string]func(){
		// The program's config reaches it: greeting's default, and the
		// secret apiKey, which has none and is an output as a secret.
		"deployed": func() {
			stack("the first deployment", func(v model.StackView) bool {
				return contentIs("Hello from my first stack")(v) && output(v, "apiKey") == "[secret]"
			})
		},
		"pushed": func() { stack("the push", contentIs("Bonjour from my first stack")) },
		"failed": func() {
			stack("the failed update", func(v model.StackView) bool {
				return v.Status.LastUpdate != nil && v.Status.LastUpdate.State == model.UpdateFailed
			})
		},
		"tamper": func() { stack("the fix", contentIs("Bonjour from my first stack")) },
		"drifted": func() {
			stack("the drift check", func(v model.StackView) bool { return v.Status.Drift != nil && v.Status.Drift.State == "Drifted" })
		},
		"healed": func() {
			stack("the healing sync", func(v model.StackView) bool { return v.Status.Drift != nil && v.Status.Drift.State == "InSync" })
		},
	}
	// The failed update's log must show the line under its error, the one
	// that says which property is wrong.
	prints := map[string][]string{
		"deployed": {"website", "Healthy", "Hello from my first stack"},
		"pushed":   {"Bonjour from my first stack"},
		"failed":   {"website", "failing, retry", "rror", "Missing required property 'content'"},
		"drifted":  {"Drifted"},
		"heal":     {"refresh"},
		"healed":   {"Bonjour from my first stack", "InSync"},
	}
	ran := map[string]bool{}
	for _, s := range guideSteps(t, filepath.Join("..", "..", "docs", "first-stack.md")) {
		switch s.kind {
		case "file":
			p := filepath.Join(home, s.arg)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte(s.body), 0o644); err != nil {
				t.Fatal(err)
			}
		case "daemon":
			if !strings.Contains(s.body, "--listen "+guideListen) {
				t.Fatalf("docs/first-stack.md:%d: the daemon does not listen on %s beside make run's", s.line, guideListen)
			}
			s.body = strings.ReplaceAll(s.body, guideListen, addr)
			startGuideDaemon(t, s, home, env)
		case "run":
			if wait := before[s.arg]; wait != nil {
				wait()
			}
			cmd := exec.Command("bash", "-euo", "pipefail", "-c", s.body)
			cmd.Dir, cmd.Env = home, env
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("docs/first-stack.md:%d (%s): %v\n%s", s.line, s.arg, err, out)
			}
			for _, want := range prints[s.arg] {
				if !strings.Contains(string(out), want) {
					t.Errorf("docs/first-stack.md:%d (%s) prints no %q:\n%s", s.line, s.arg, want, out)
				}
			}
			t.Logf("%s:\n%s", s.arg, out)
			ran[s.arg] = true
		}
	}
	for name := range before {
		if !ran[name] {
			t.Errorf("the guide has no step %q any more", name)
		}
	}
	if got := page(); got != "Bonjour from my first stack" {
		t.Errorf("the page is %q at the end", got)
	}
	checkGuideLogs(t, "http://"+addr)
}

// yamlConfigurationDeprecated is what the Pulumi YAML language host warns
// in every operation's log of a program that declares its config under
// the root-level `configuration:` key rather than the project's `config:`.
const yamlConfigurationDeprecated = "root-level `configuration` field is deprecated"

// checkGuideLogs reads the log of every operation of the guide's stack:
// none may carry the deprecation warning of the root-level
// `configuration:` key, as the guide's program is what users copy.
func checkGuideLogs(t *testing.T, base string) {
	t.Helper()
	var page struct{ Updates []model.Update }
	getGuide(t, base+"/api/v1/stacks/website/updates?limit=100", func(body []byte) {
		if err := json.Unmarshal(body, &page); err != nil {
			t.Fatalf("updates: %v", err)
		}
	})
	if len(page.Updates) < 4 {
		t.Fatalf("the guide's stack has %d operations, want its updates, its failure and its drift checks", len(page.Updates))
	}
	for _, u := range page.Updates {
		getGuide(t, base+"/api/v1/updates/"+url.PathEscape(u.ID)+"/log", func(log []byte) {
			for _, line := range strings.Split(string(log), "\n") {
				if strings.Contains(line, yamlConfigurationDeprecated) {
					t.Errorf("the log of %s (%s) warns that the program's `configuration:` is deprecated: %s", u.ID, u.Type, strings.TrimSpace(line))
					break
				}
			}
		})
	}
}

// getGuide GETs url from the guide's daemon and passes the body of its
// 200 to f.
func getGuide(t *testing.T, url string, f func([]byte)) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %v %s", url, err, resp.Status)
	}
	f(body)
}

// startGuideDaemon runs the guide's daemon command in a process group of
// its own, stopped with SIGTERM when the test ends; its output is logged
// then.
func startGuideDaemon(t *testing.T, s guideStep, home string, env []string) {
	t.Helper()
	log, err := os.Create(filepath.Join(t.TempDir(), "daemon.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", "-euo", "pipefail", "-c", s.body)
	cmd.Dir, cmd.Env = home, env
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(time.Minute):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
		if t.Failed() {
			data, _ := os.ReadFile(log.Name())
			t.Logf("daemon (docs/first-stack.md:%d):\n%s", s.line, data)
		}
	})
}

// waitGuideStack polls a stack's API view until cond holds.
func waitGuideStack(t *testing.T, url, what string, timeout time.Duration, cond func(model.StackView) bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var last string
	for ctx.Err() == nil {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			var v model.StackView
			if resp.StatusCode == http.StatusOK && json.NewDecoder(resp.Body).Decode(&v) == nil {
				if cond(v) {
					resp.Body.Close()
					return
				}
				b, _ := json.Marshal(v.Status)
				last = string(b)
			}
			resp.Body.Close()
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s; last status: %s", what, last)
}
