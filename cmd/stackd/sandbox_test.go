package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stackd/stackd/daemon/model"
)

// readProgram is a Pulumi YAML program whose output is the content of
// path, as a committer to a tracked repository could write it.
func readProgram(path string) string {
	return fmt.Sprintf("name: thief\nruntime: yaml\noutputs:\n  loot:\n    fn::readFile: %q\n", path)
}

// writeProgram is a program with a test-provider File at path.
func writeProgram(path string) string {
	return fmt.Sprintf(`name: writer
runtime: yaml
resources:
  note:
    type: stackdtest:index:File
    properties:
      path: %q
      content: written
outputs:
  content: ${note.content}
  id: ${note.id}
`, path)
}

// writeSecretFile writes value into path (mode 0600), creating its
// directory.
func writeSecretFile(t *testing.T, path, value string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(value), 0o600); err != nil {
		t.Fatal(err)
	}
}

// sandboxStack is a compact-list stack of r at repoDir dir.
func sandboxStack(name string, r *repo, dir string) string {
	return stackYAML(name, r, "    repoDir: "+dir+"\n")
}

// failed says the stack's last update failed.
func failed(v model.StackView) bool {
	return v.Status.LastUpdate != nil && v.Status.LastUpdate.State == "failed"
}

// TestE2ESandbox plays a committer to a tracked repository: programs that
// read the daemon's token and webhook secret, a Secret file no stack
// references, another stack's passphrase and state, stackd.db, the config
// file and the daemon's /proc environ each fail with a permission error,
// and a project whose main: leads out of its checkout is refused. No
// canary reaches the API, the UI, stackd.db or the daemon's log. A program
// writes in its checkout and in a --sandbox-rw path, and nowhere else.
func TestE2ESandbox(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	dataDir := filepath.Join(root, "data")
	secrets := filepath.Join(root, "secrets")
	etc := filepath.Join(root, "etc")
	allowed := filepath.Join(root, "allowed")
	denied := filepath.Join(root, "denied")
	for _, d := range []string{allowed, denied} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	canaries := map[string]string{
		"token":   "canary-api-token-5b1e",
		"hook":    "canary-webhook-9c2f",
		"other":   "canary-unreferenced-secret-44d0",
		"victim":  "canary-victim-config-7a13",
		"outside": "canary-outside-program-e6a8",
	}
	tokenFile := filepath.Join(etc, "api-token")
	hookFile := filepath.Join(etc, "webhook-secret")
	writeSecretFile(t, tokenFile, canaries["token"])
	writeSecretFile(t, hookFile, canaries["hook"])
	writeSecretFile(t, filepath.Join(secrets, "other", "key"), canaries["other"])
	writeSecretFile(t, filepath.Join(secrets, "victim", "token"), canaries["victim"])
	// A program outside every checkout, which main: points at.
	outside := filepath.Join(root, "outside")
	writeSecretFile(t, filepath.Join(outside, "Pulumi.yaml"),
		"name: thief\nruntime: yaml\noutputs:\n  loot: "+canaries["outside"]+"\n")

	r := newRepo(t)
	r.commit(map[string]string{
		"victim/Pulumi.yaml": program("v1"),
		"main/Pulumi.yaml":   "name: thief\nruntime: yaml\nmain: " + outside + "\n",
		"write/Pulumi.yaml":  writeProgram(filepath.Join(allowed, "note.txt")),
		"local/Pulumi.yaml":  writeProgram("note.txt"),
		"deny/Pulumi.yaml":   writeProgram(filepath.Join(denied, "note.txt")),
	})
	victim := sandboxStack("victim", r, "victim") + "    config:\n      path: " + filepath.Join(allowed, "victim.txt") + `
    secretsRef:
      token: {type: Secret, secret: {name: victim, key: token}}
`
	config := "stacks:\n" + victim
	in := startDaemonWith(t, config, dataDir, func(f *runFlags) {
		f.secretsDir, f.tokenFile, f.webhookFile = secrets, tokenFile, hookFile
		f.sandboxRW = stringsFlag{allowed}
		f.maxConcurrent = 4
	})
	in.waitStack("victim", "deployed", time.Minute, isReady)

	// The victim's passphrase and state exist now; point thieves at them.
	passphrases, _ := filepath.Glob(filepath.Join(dataDir, "passphrases", "*"))
	states, _ := filepath.Glob(filepath.Join(dataDir, "backends", "*", ".pulumi", "stacks", "e2e", "victim.json"))
	if len(passphrases) != 1 || len(states) != 1 {
		t.Fatalf("the victim's passphrase %v and state %v, want one each", passphrases, states)
	}
	reads := map[string]string{
		"read-token":   tokenFile,
		"read-hook":    hookFile,
		"read-secret":  filepath.Join(secrets, "other", "key"),
		"read-pass":    passphrases[0],
		"read-state":   states[0],
		"read-db":      filepath.Join(dataDir, "stackd.db"),
		"read-config":  in.cfgPath,
		"read-environ": "/proc/" + strconv.Itoa(os.Getpid()) + "/environ",
	}
	files := map[string]string{}
	for name, path := range reads {
		files[name+"/Pulumi.yaml"] = readProgram(path)
		config += sandboxStack(name, r, name)
	}
	r.commit(files)
	config += sandboxStack("main-outside", r, "main") + sandboxStack("write", r, "write") +
		sandboxStack("local", r, "local") + sandboxStack("deny", r, "deny")
	in.reload(config)

	for name, path := range reads {
		v := in.waitStack(name, "its update failed", time.Minute, failed)
		if msg := v.Status.LastUpdate.Message; !strings.Contains(msg, "permission denied") {
			t.Errorf("%s (reads %s): message %q, want a permission error", name, path, msg)
		}
	}
	v := in.waitStack("main-outside", "refused", time.Minute, func(v model.StackView) bool {
		return failed(v) && strings.Contains(v.Status.LastUpdate.Message, "leads outside the checkout")
	})
	t.Logf("main outside the checkout: %s", v.Status.LastUpdate.Message)
	in.waitStack("write", "deployed", time.Minute, isReady)
	in.waitStack("local", "deployed", time.Minute, isReady)
	if got := readFile(t, filepath.Join(allowed, "note.txt")); got != "written" {
		t.Errorf("the --sandbox-rw file holds %q", got)
	}
	// The resource's ID says where the file was written: the checkout
	// may have been replaced by a fresh one since.
	want := filepath.Join(dataDir, "stacks", "local", "src", "local", "note.txt")
	if got := output(in.waitStack("local", "deployed", time.Minute, isReady), "id"); got != want {
		t.Errorf("the file in the checkout is %q, want %q", got, want)
	}
	v = in.waitStack("deny", "its update failed", time.Minute, failed)
	if !strings.Contains(v.Status.LastUpdate.Message, "permission denied") {
		t.Errorf("a write outside the sandbox: %q, want a permission error", v.Status.LastUpdate.Message)
	}
	if _, err := os.Stat(filepath.Join(denied, "note.txt")); err == nil {
		t.Errorf("a program wrote outside its sandbox")
	}

	var bodies []string
	paths := []string{"/api/v1/stacks", "/metrics", "/", "/api/v1/config"}
	for name := range reads {
		paths = append(paths, "/api/v1/stacks/"+name, "/stacks/"+name)
		for _, u := range in.updates(name) {
			paths = append(paths, "/api/v1/updates/"+u.ID+"/log")
		}
	}
	for _, path := range paths {
		_, body := in.get(path, nil)
		bodies = append(bodies, string(body))
	}
	in.stop()
	db, err := os.ReadFile(filepath.Join(dataDir, "stackd.db"))
	if err != nil {
		t.Fatal(err)
	}
	for what, canary := range canaries {
		for i, b := range bodies {
			if strings.Contains(b, canary) {
				t.Errorf("GET %s holds the %s canary", paths[i], what)
			}
		}
		if bytes.Contains(db, []byte(canary)) {
			t.Errorf("stackd.db holds the %s canary", what)
		}
		if strings.Contains(in.logs.String(), canary) {
			t.Errorf("the daemon's log holds the %s canary", what)
		}
	}
}

// TestE2ESandboxOff: the same theft succeeds with --sandbox=off, so the
// test above can fail; the daemon says programs run unconfined.
func TestE2ESandboxOff(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	canary := "canary-unreferenced-secret-0b7c"
	writeSecretFile(t, filepath.Join(root, "secrets", "other", "key"), canary)
	r := newRepo(t)
	r.commit(map[string]string{"read/Pulumi.yaml": readProgram(filepath.Join(root, "secrets", "other", "key"))})
	in := startDaemonWith(t, "stacks:\n"+sandboxStack("read", r, "read"), filepath.Join(root, "data"), func(f *runFlags) {
		f.secretsDir, f.sandbox, f.sandboxRW = filepath.Join(root, "secrets"), "off", nil
	})
	v := in.waitStack("read", "deployed", time.Minute, isReady)
	if got := output(v, "loot"); got != canary {
		t.Errorf("unconfined, the program read %q, want the canary", got)
	}
	_, body := in.get("/api/v1/config", nil)
	if !strings.Contains(string(body), "--sandbox=off") {
		t.Errorf("GET /api/v1/config has no warning about the sandbox: %s", body)
	}
	_, metrics := in.get("/metrics", nil)
	if !strings.Contains(string(metrics), "stackd_sandbox_enforced 0") {
		t.Errorf("/metrics does not say the sandbox is off")
	}
}
