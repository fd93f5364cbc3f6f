package runner

import (
	"context"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stackd/stackd/daemon/model"
)

// fakeRunner is a Runner on a fake CLI script (see fakePulumi).
func fakeRunner(t *testing.T, script string) *Runner {
	t.Helper()
	r, err := New(context.Background(), Options{Bin: fakePulumi(t, script), DataDir: t.TempDir(), Env: []string{"DAEMON_WIDE=1"}})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// project writes a Pulumi.yaml named proj into a new directory.
func project(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "Pulumi.yaml"), []byte("name: proj\nruntime: yaml\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestWorkspaceEnv: a process gets the daemon-wide settings, the stack's
// variables, its backend and the passphrase file unless the stack sets a
// passphrase itself.
func TestWorkspaceEnv(t *testing.T) {
	r := fakeRunner(t, "env\n")
	ws := model.Workspace{Name: "s", Stack: "dev", ProjectDir: project(t),
		Env: map[string]string{"TOKEN": "abc", "PULUMI_DEBUG_COMMANDS": "false"}}
	env := childEnv(t, r, ws)
	data := r.opts.DataDir
	// Each stack has its own PULUMI_HOME, TMPDIR and, on the data dir's
	// backend, its own file backend: the sandbox grants it those alone.
	for k, want := range map[string]string{
		"PULUMI_HOME":              filepath.Join(data, "workspaces", "s", "pulumi-home"),
		"TMPDIR":                   filepath.Join(data, "workspaces", "s", "tmp"),
		"HOME":                     filepath.Join(data, "workspaces", "s", "home"),
		"PULUMI_SKIP_UPDATE_CHECK": "true",
		"PULUMI_DEBUG_COMMANDS":    "true",
		"PULUMI_BACKEND_URL":       "file://" + filepath.Join(data, "backends", "s"),
		"TOKEN":                    "abc",
		"DAEMON_WIDE":              "1",
	} {
		if env[k] != want {
			t.Errorf("%s = %q, want %q", k, env[k], want)
		}
	}
	// A stack new to the data dir's backend gets a passphrase of its own.
	if p := env["PULUMI_CONFIG_PASSPHRASE_FILE"]; filepath.Dir(p) != filepath.Join(data, "passphrases") {
		t.Errorf("PULUMI_CONFIG_PASSPHRASE_FILE = %q, want one of %s", p, filepath.Join(data, "passphrases"))
	}
	ws.Env = map[string]string{"PULUMI_CONFIG_PASSPHRASE": "mine", "PULUMI_BACKEND_URL": "s3://bucket"}
	env = childEnv(t, r, ws)
	if _, ok := env["PULUMI_CONFIG_PASSPHRASE_FILE"]; ok || env["PULUMI_CONFIG_PASSPHRASE"] != "mine" {
		t.Errorf("the stack's passphrase does not replace the runner's: %v", env)
	}
	if env["PULUMI_BACKEND_URL"] != "s3://bucket" {
		t.Errorf("backend %q, want the stack's variable", env["PULUMI_BACKEND_URL"])
	}
	ws.Backend = "file:///spec"
	if env = childEnv(t, r, ws); env["PULUMI_BACKEND_URL"] != "file:///spec" {
		t.Errorf("backend %q, want spec.backend", env["PULUMI_BACKEND_URL"])
	}
}

// childEnv runs the fake CLI for ws and parses the environment it prints.
func childEnv(t *testing.T, r *Runner, ws model.Workspace) map[string]string {
	t.Helper()
	w, err := r.workspace(ws)
	if err != nil {
		t.Fatal(err)
	}
	out, err := r.pulumi(context.Background(), w, call{what: "env"}, "stack", "ls")
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		k, v, _ := strings.Cut(line, "=")
		env[k] = v
	}
	return env
}

func TestWorkspaceValidation(t *testing.T) {
	r := fakeRunner(t, "")
	dir := project(t)
	for _, ws := range []model.Workspace{
		{Name: "../x", Stack: "dev", ProjectDir: dir},
		{Name: "..", Stack: "dev", ProjectDir: dir},
		{Name: "s", Stack: "a/b/c/d", ProjectDir: dir},
		{Name: "s", Stack: "-dev", ProjectDir: dir},
		{Name: "s", Stack: "org//dev", ProjectDir: dir},
		{Name: "s", Stack: "dev", ProjectDir: t.TempDir()},
		{Name: "s", Stack: "dev", ProjectDir: dir, Env: map[string]string{"A=B": "x"}},
		{Name: "s", Stack: "dev", ProjectDir: dir, Env: map[string]string{"A": "x\x00"}},
		{Name: "s", Stack: "dev", ProjectDir: dir, Env: map[string]string{"": "x"}},
	} {
		if _, err := r.workspace(ws); err == nil {
			t.Errorf("workspace %+v was accepted", ws)
		}
	}
	if _, err := New(context.Background(), Options{DataDir: t.TempDir(), Env: []string{"NOEQUALS"}}); err == nil {
		t.Error("New accepted an invalid Env entry")
	}
}

func TestRedaction(t *testing.T) {
	r := fakeRunner(t, "")
	ws := model.Workspace{Name: "s", Stack: "dev", ProjectDir: project(t),
		Backend: "https://user:backend-password@example.com",
		Env:     map[string]string{"TOKEN": "env-token-value", "SHORT": "yes"},
		Config:  []model.ConfigValue{{Key: "k", Value: `pa"ss`, Secret: true}, {Key: "p", Value: "plain-value"}}}
	w, err := r.workspace(ws)
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Join([]string{"env-token-value", `pa\"ss`, "backend-password", r.passphrase,
		base64.StdEncoding.EncodeToString([]byte("env-token-value")), "yes", "plain-value"}, " ")
	want := "[redacted] [redacted] [redacted] [redacted] [redacted] yes plain-value"
	if got := w.redact.Replace(text); got != want {
		t.Fatalf("redacted %q, want %q", got, want)
	}

	// The log is redacted line by line, so a secret split across writes
	// is caught.
	var out strings.Builder
	lw := newLogWriter(&out, w.redact)
	for _, chunk := range []string{"a env-tok", "en-value b\nc", "\n", "tail env-token-value"} {
		if _, err := lw.stdout.Write([]byte(chunk)); err != nil {
			t.Fatal(err)
		}
	}
	lw.stderr.Write([]byte("err line\n"))
	lw.flush()
	if want := "a [redacted] b\nc\nerr line\ntail [redacted]"; out.String() != want {
		t.Fatalf("log %q, want %q", out.String(), want)
	}
}

func TestFileBackendDir(t *testing.T) {
	home, _ := os.UserHomeDir()
	for in, want := range map[string]string{
		"file:///var/lib/x":              "/var/lib/x",
		"file:///var/lib/x?no_tmp_dir=1": "/var/lib/x",
		"file://~/state":                 filepath.Join(home, "state"),
		"s3://bucket":                    "",
		"https://api.pulumi.com":         "",
	} {
		got, ok := fileBackendDir(in)
		if got != want || ok != (want != "") {
			t.Errorf("fileBackendDir(%q) = %q, %v; want %q", in, got, ok, want)
		}
	}
	if got := redactURL("postgres://u:p@host/db?sslmode=disable&password=x"); got != "postgres://host/db" {
		t.Errorf("redactURL = %q", got)
	}
}

// TestSymlinkedProjectFilesStayInside: a project file that is a symbolic
// link leading outside the project is refused before any pulumi process
// reads it; a link inside the project is fine.
func TestSymlinkedProjectFilesStayInside(t *testing.T) {
	outside := filepath.Join(t.TempDir(), "outside.yaml")
	if err := os.WriteFile(outside, []byte("name: elsewhere\nruntime: yaml\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, link, target string
		ok                 bool
	}{
		{"project outside", "Pulumi.yaml", outside, false},
		{"stack file outside", "Pulumi.dev.yaml", "/etc/passwd", false},
		{"relative escape", "Pulumi.dev.yaml", "../../outside.yaml", false},
		{"inside", "Pulumi.dev.yaml", "config/dev.yaml", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.MkdirAll(filepath.Join(dir, "config"), 0o755); err != nil {
				t.Fatal(err)
			}
			if tc.link != "Pulumi.yaml" {
				if err := os.WriteFile(filepath.Join(dir, "Pulumi.yaml"), []byte("name: p\nruntime: yaml\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.WriteFile(filepath.Join(dir, "config", "dev.yaml"), []byte("config: {}\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(tc.target, filepath.Join(dir, tc.link)); err != nil {
				t.Fatal(err)
			}
			err := checkLinks(dir, "Pulumi.yaml", "Pulumi.dev.yaml")
			if tc.ok != (err == nil) {
				t.Fatalf("checkLinks = %v", err)
			}
			if err != nil && (!strings.Contains(err.Error(), tc.link) || strings.Contains(err.Error(), "root:")) {
				t.Errorf("error %q does not name the file plainly", err)
			}
		})
	}
}

// TestOwnPassphrases: two stacks new to the data dir's backend get
// passphrases of their own; with --passphrase-file, or another backend,
// the one given is used.
func TestOwnPassphrases(t *testing.T) {
	r := fakeRunner(t, "env\n")
	a := childEnv(t, r, model.Workspace{Name: "a", Stack: "a", ProjectDir: project(t)})["PULUMI_CONFIG_PASSPHRASE_FILE"]
	b := childEnv(t, r, model.Workspace{Name: "b", Stack: "b", ProjectDir: project(t)})["PULUMI_CONFIG_PASSPHRASE_FILE"]
	pa, _ := os.ReadFile(a)
	pb, _ := os.ReadFile(b)
	if a == b || len(pa) == 0 || string(pa) == string(pb) {
		t.Fatalf("two stacks share a passphrase: %s %s", a, b)
	}
	if fi, err := os.Stat(a); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("passphrase file %s: %v %v", a, fi.Mode(), err)
	}
	other := childEnv(t, r, model.Workspace{Name: "c", Stack: "c", ProjectDir: project(t), Backend: "file:///elsewhere"})
	if other["PULUMI_CONFIG_PASSPHRASE_FILE"] != r.opts.PassphraseFile {
		t.Errorf("another backend: %q, want the shared %q", other["PULUMI_CONFIG_PASSPHRASE_FILE"], r.opts.PassphraseFile)
	}
}

// TestCheckMain: a project's main entry point must stay in its checkout.
func TestCheckMain(t *testing.T) {
	cases := []struct {
		work, project, main string
		ok                  bool
	}{
		{"/w", "/w", "", true},
		{"/w", "/w", "src", true},
		{"/w", "/w/infra", "../shared", true},
		{"/w", "/w", "./src/../lib", true},
		{"/w", "/w", "/etc", false},
		{"/w", "/w", "/w/src", true},
		{"/w", "/w", "..", false},
		{"/w", "/w/infra", "../../other", false},
		{"/w", "/w", "../w2", false},
		{"/w", "/w", "..foo", true},
	}
	for _, c := range cases {
		err := checkMain(c.work, c.project, c.main)
		if (err == nil) != c.ok {
			t.Errorf("checkMain(%q, %q, %q) = %v, want ok=%v", c.work, c.project, c.main, err, c.ok)
		}
	}
}
