package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stackd/stackd/daemon/model"
	"github.com/stackd/stackd/store"
)

// stackd runs the command line in-process and returns its exit code and
// output.
func stackd(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

func TestUsage(t *testing.T) {
	for _, args := range [][]string{nil, {"frobnicate"}, {"validate"}, {"validate", "--nope", "x"}, {"store"}, {"backup"}} {
		if code, _, stderr := stackd(t, args...); code != exitUsage || stderr == "" {
			t.Errorf("stackd %v: exit %d, stderr %q; want %d", args, code, stderr, exitUsage)
		}
	}
	if code, stdout, _ := stackd(t, "help"); code != exitOK || !strings.Contains(stdout, "stackd validate PATH...") {
		t.Errorf("help: exit %d\n%s", code, stdout)
	}
	if code, stdout, _ := stackd(t, "validate", "-h"); code != exitOK || !strings.Contains(stdout, "-quiet") {
		t.Errorf("validate -h: exit %d\n%s", code, stdout)
	}
}

func TestVersion(t *testing.T) {
	code, stdout, _ := stackd(t, "version")
	if code != exitOK || !strings.HasPrefix(stdout, "stackd dev (go") {
		t.Fatalf("exit %d: %q", code, stdout)
	}
}

func TestValidate(t *testing.T) {
	code, stdout, _ := stackd(t, "validate", "../../testdata/config/good/pko-basic.yaml", "../../configs/stackd.example.yaml")
	if code != exitOK || !strings.Contains(stdout, "ok: ") || !strings.Contains(stdout, "note: skipped") {
		t.Fatalf("good config: exit %d\n%s", code, stdout)
	}
	code, stdout, _ = stackd(t, "validate", "--quiet", "../../testdata/config/good/pko-basic.yaml")
	if code != exitOK || strings.Contains(stdout, "note:") {
		t.Fatalf("--quiet: exit %d\n%s", code, stdout)
	}
	bad := "../../testdata/config/bad/unknown-field.yaml"
	code, stdout, _ = stackd(t, "validate", bad)
	if code != exitFail || !strings.Contains(stdout, bad+":") || !strings.Contains(stdout, "unknown field") {
		t.Fatalf("bad config: exit %d\n%s", code, stdout)
	}
}

// TestValidateHidesSecrets: a literal secret in a broken config never
// reaches the output.
func TestValidateHidesSecrets(t *testing.T) {
	for _, f := range []string{"secret-literal-wrong-type.yaml", "credentials-in-url.yaml"} {
		_, stdout, stderr := stackd(t, "validate", filepath.Join("../../testdata/config/bad", f))
		for _, secret := range []string{"SENTINEL-SECRET-VALUE-1234", "s3cret"} {
			if strings.Contains(stdout+stderr, secret) {
				t.Errorf("%s: output shows a secret:\n%s%s", f, stdout, stderr)
			}
		}
	}
}

func TestStoreCheckAndBackup(t *testing.T) {
	dir := t.TempDir()
	if code, _, stderr := stackd(t, "store", "check", "--data-dir", dir); code != exitFail || stderr == "" {
		t.Fatalf("check of an empty dir: exit %d %q", code, stderr)
	}
	s, err := store.Open(filepath.Join(dir, store.FileName), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.PutStack(model.StackRecord{Name: "app", Generation: 1}); err != nil {
		t.Fatal(err)
	}
	s.Close()

	t.Setenv("STACKD_DATA_DIR", dir) // flags come from the environment too
	code, stdout, stderr := stackd(t, "store", "check")
	if code != exitOK || !strings.Contains(stdout, "1 stack(s)") {
		t.Fatalf("check: exit %d\n%s%s", code, stdout, stderr)
	}
	copyPath := filepath.Join(t.TempDir(), "copy.db")
	if code, _, stderr := stackd(t, "backup", copyPath); code != exitOK {
		t.Fatalf("backup: exit %d: %s", code, stderr)
	}
	backup, err := store.Open(copyPath, store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer backup.Close()
	if rec, err := backup.Stack("app"); err != nil || rec.Generation != 1 {
		t.Fatalf("backup holds %+v, %v", rec, err)
	}
}

func TestStoreCheckDamaged(t *testing.T) {
	dir := t.TempDir()
	garbage := bytes.Repeat([]byte("not a bolt file "), 1024)
	if err := os.WriteFile(filepath.Join(dir, store.FileName), garbage, 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := stackd(t, "store", "check", "--data-dir", dir)
	if code != exitFail || !strings.Contains(stderr, filepath.Join(dir, store.FileName)) {
		t.Fatalf("exit %d: %q", code, stderr)
	}
}

func TestParseInterspersed(t *testing.T) {
	tests := []struct {
		args     []string
		json     bool
		wantArgs string
	}{
		{[]string{"app", "--json"}, true, "app"},
		{[]string{"--json", "app"}, true, "app"},
		{[]string{"app"}, false, "app"},
		{[]string{"--", "--json"}, false, "--json"},
		{[]string{"a", "--json", "b"}, true, "a b"},
	}
	for _, tt := range tests {
		fs := newFlagSet("t")
		asJSON := fs.Bool("json", false, "")
		if err := parseInterspersed(fs, tt.args); err != nil {
			t.Fatalf("%v: %v", tt.args, err)
		}
		if *asJSON != tt.json || strings.Join(fs.Args(), " ") != tt.wantArgs {
			t.Errorf("%v: json=%v args=%q", tt.args, *asJSON, fs.Args())
		}
	}
}

// TestFailOpenFlags: token flags that contradict each other are usage
// errors, not an open API.
func TestFailOpenFlags(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--api-no-token", "--api-read-requires-token"}, "--api-read-requires-token needs a token"},
		{[]string{"--api-no-token", "--api-token-file", "token"}, "--api-no-token and --api-token-file exclude each other"},
		{[]string{"--api-read-requires-token", "--cluster-etcd", "http://127.0.0.1:2379"}, "--api-read-requires-token needs --api-token-file"},
	} {
		code, _, stderr := stackd(t, append([]string{"run", "--config", "x.yaml"}, tt.args...)...)
		if code != exitUsage || !strings.Contains(stderr, tt.want) {
			t.Errorf("%v: exit %d, stderr %q", tt.args, code, stderr)
		}
	}
}

// TestWebhookURLFiles: --notify-url-file reads a webhook URL from a file,
// so that it is not in argv; a bad one is refused like a flag's.
func TestWebhookURLFiles(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "hook")
	bad := filepath.Join(dir, "bad")
	if err := os.WriteFile(good, []byte("https://hooks.example/T0/B0/CANARY\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte("ftp://x"), 0o600); err != nil {
		t.Fatal(err)
	}
	urls, err := webhookURLs([]string{"https://a.example/hook"}, []string{good}, "--notify-url")
	if err != nil || len(urls) != 2 || urls[1] != "https://hooks.example/T0/B0/CANARY" {
		t.Fatalf("urls = %v, %v", urls, err)
	}
	if _, err := webhookURLs(nil, []string{bad}, "--notify-url"); err == nil {
		t.Fatal("a bad URL from a file was accepted")
	}
	if _, err := webhookURLs(nil, []string{filepath.Join(dir, "missing")}, "--notify-url"); err == nil ||
		!strings.Contains(err.Error(), "--notify-url-file") {
		t.Fatalf("a missing file: %v", err)
	}
}

// TestValidateAuthFile: stackd validate --auth-file checks a roles file
// offline, alone or beside config paths, each problem at its
// file:line:column with the field.
func TestValidateAuthFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good.yaml", `roles:
  operator: {allow: [read, sync, approve], stacks: ["*"]}
bindings:
  - user: alice@example.com
    roles: [operator]
`)
	code, stdout, stderr := stackd(t, "validate", "--auth-file", good)
	if code != exitOK || !strings.Contains(stdout, "ok: roles file "+good+": 0 token(s), 1 role(s), 1 binding(s)") {
		t.Fatalf("good roles file: exit %d\n%s%s", code, stdout, stderr)
	}
	code, stdout, _ = stackd(t, "validate", "--auth-file", good, "../../configs/stackd.example.yaml")
	if code != exitOK || !strings.Contains(stdout, "ok: roles file") || !strings.Contains(stdout, "ok: 2 stack(s)") {
		t.Fatalf("good roles file and config: exit %d\n%s", code, stdout)
	}

	broken := write("broken.yaml", `roles:
  operator: {allow: [read, sync]}
bindings:
  - user: alice@example.com
    group: admins
    roles: [operator]
  - group: platform
    roles: [operater]
`)
	code, stdout, _ = stackd(t, "validate", "--auth-file", broken, "../../configs/stackd.example.yaml")
	if code != exitFail {
		t.Fatalf("broken roles file: exit %d\n%s", code, stdout)
	}
	for _, want := range []string{
		broken + ":4:5: bindings[0]: ",
		broken + `:8:13: bindings[1].roles: unknown role "operater" (did you mean "operator"?)`,
		"2 roles file error(s)",
		"ok: 2 stack(s)",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}

	// yaml.v3 gives a syntax error no column: the line where the parser
	// stops, and for a tab in the indentation its column too.
	syntax := write("syntax.yaml", "roles:\n  operator: {allow: [read, sync]\nbindings: []\n")
	code, stdout, _ = stackd(t, "validate", "--auth-file", syntax)
	if code != exitFail || !strings.Contains(stdout, syntax+":2: yaml: syntax error: ") {
		t.Fatalf("roles file with a YAML error: exit %d\n%s", code, stdout)
	}
	tab := write("tab.yaml", "roles:\n  operator:\n\t  allow: [read]\n")
	code, stdout, _ = stackd(t, "validate", "--auth-file", tab)
	if code != exitFail || !strings.Contains(stdout, tab+":3:1: yaml: syntax error: tab character in indentation") {
		t.Fatalf("roles file indented with a tab: exit %d\n%s", code, stdout)
	}

	code, stdout, _ = stackd(t, "validate", "--auth-file", filepath.Join(dir, "missing.yaml"))
	if code != exitFail || !strings.Contains(stdout, "missing.yaml: no such file") {
		t.Fatalf("missing roles file: exit %d\n%s", code, stdout)
	}
	if code, _, _ := stackd(t, "validate"); code != exitUsage {
		t.Fatalf("validate without paths: exit %d", code)
	}
}
