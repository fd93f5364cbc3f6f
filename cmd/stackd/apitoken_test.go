package main

import (
	"context"
	"encoding/hex"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stackd/stackd/auth"
	"github.com/stackd/stackd/daemon/model"
	"github.com/stackd/stackd/web"
)

// TestEnsureAPIToken: the first call writes 32 random bytes, hex, mode
// 0600, leaving no temporary file; later calls, and calls racing the
// first, return the same token; an empty file is refused.
func TestEnsureAPIToken(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, apiTokenFile)
	var wg sync.WaitGroup
	tokens, created := make([]string, 8), make([]bool, 8)
	for i := range tokens {
		wg.Go(func() {
			var err error
			if tokens[i], created[i], err = auth.EnsureAdminToken(path); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	token, n := tokens[0], 0
	for i := range tokens {
		if tokens[i] != token {
			t.Fatalf("racing calls returned different tokens: %q", tokens)
		}
		if created[i] {
			n++
		}
	}
	if raw, err := hex.DecodeString(token); err != nil || len(raw) != 32 || n != 1 {
		t.Fatalf("token %q (%v), created by %d calls", token, err, n)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, %v", fi.Mode(), err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Fatalf("the data dir holds %d files, want the token only", len(entries))
	}
	if again, created, err := auth.EnsureAdminToken(path); again != token || created || err != nil {
		t.Fatalf("second call: %q %v %v", again, created, err)
	}
	if other, _, _ := auth.EnsureAdminToken(filepath.Join(t.TempDir(), apiTokenFile)); other == token || other == "" {
		t.Fatalf("another data dir got the token %q", other)
	}
	if err := os.WriteFile(path, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := auth.EnsureAdminToken(path); err == nil || !strings.Contains(err.Error(), "is empty") {
		t.Fatalf("an empty token file: %v", err)
	}
}

// TestLocalToken: a client sends the data dir's token to a loopback
// server only, and its 401 hint says where the token is and why it was
// not sent.
func TestLocalToken(t *testing.T) {
	dataDir := t.TempDir()
	token, _, err := auth.EnsureAdminToken(filepath.Join(dataDir, apiTokenFile))
	if err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(t.TempDir(), "nowhere")
	dirInstead := t.TempDir()
	if err := os.Mkdir(filepath.Join(dirInstead, apiTokenFile), 0o700); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name, server, dataDir string
		token                 bool
		hint                  string
	}{
		{"loopback", "http://127.0.0.1:8080", dataDir, true, "was refused"},
		{"localhost", "http://localhost:8080", dataDir, true, filepath.Join(dataDir, apiTokenFile)},
		{"IPv6 loopback", "http://[::1]:8080", dataDir, true, "was refused"},
		{"another host", "http://10.1.2.3:8080", dataDir, false, "loopback only"},
		{"a host name", "https://stackd.example", dataDir, false, "loopback only"},
		{"no token", "http://127.0.0.1:8080", missing, false, "there is no API token at " + filepath.Join(missing, apiTokenFile)},
		{"not a file", "http://127.0.0.1:8080", dirInstead, false, "cannot read the API token"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, hint := localToken(tt.server, tt.dataDir)
			if (got == token) != tt.token || (!tt.token && got != "") || !strings.Contains(hint, tt.hint) {
				t.Errorf("token sent: %v, hint %q; want %v, a hint with %q", got != "", hint, tt.token, tt.hint)
			}
		})
	}
}

// syncAPI is a web.API that records syncs and knows every stack, in
// sync; any other call panics.
type syncAPI struct {
	web.API
	mu     sync.Mutex
	synced []string
}

func (a *syncAPI) Sync(name string) (string, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.synced = append(a.synced, name)
	return "req-1", nil
}

func (a *syncAPI) SyncWindow(string) (*model.ChangeWindowStatus, string) { return nil, "" }

func (a *syncAPI) Stack(name string) (model.StackView, error) {
	return model.StackView{Name: name}, nil
}

// TestClientSendsDataDirToken: stackd sync finds the token in --data-dir
// or STACKD_DATA_DIR; without one it shows the 401 with where it looked.
func TestClientSendsDataDirToken(t *testing.T) {
	dataDir := t.TempDir()
	token, _, err := auth.EnsureAdminToken(filepath.Join(dataDir, apiTokenFile))
	if err != nil {
		t.Fatal(err)
	}
	api := &syncAPI{}
	srv := web.New(web.Options{Addr: "127.0.0.1:0", API: api, Token: token})
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop(context.Background()) })
	url := "http://" + srv.Addr()

	if code, stdout, stderr := stackd(t, "sync", "app", "--server", url, "--data-dir", dataDir); code != exitOK || !strings.Contains(stdout, "sync of app requested") {
		t.Fatalf("sync with --data-dir: exit %d: %s%s", code, stdout, stderr)
	}
	t.Setenv("STACKD_DATA_DIR", dataDir)
	if code, stdout, stderr := stackd(t, "sync", "app", "--server", url); code != exitOK {
		t.Fatalf("sync with STACKD_DATA_DIR: exit %d: %s%s", code, stdout, stderr)
	}
	empty := t.TempDir()
	t.Setenv("STACKD_DATA_DIR", empty)
	code, _, stderr := stackd(t, "sync", "app", "--server", url)
	if code != exitFail || !strings.Contains(stderr, "401") || !strings.Contains(stderr, "there is no API token at "+filepath.Join(empty, apiTokenFile)) {
		t.Fatalf("sync without a token: exit %d: %s", code, stderr)
	}
	wrong := filepath.Join(empty, "wrong")
	if err := os.WriteFile(wrong, []byte("not-the-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, stderr = stackd(t, "sync", "app", "--server", url, "--api-token-file", wrong)
	if code != exitFail || !strings.Contains(stderr, "--api-token-file "+wrong+" was refused") || strings.Contains(stderr, token) {
		t.Fatalf("sync with a wrong token: exit %d: %s", code, stderr)
	}
	if len(api.synced) != 2 {
		t.Fatalf("synced %q, want two syncs", api.synced)
	}
}

// TestE2EAPITokenByDefault: a daemon started without --api-token-file
// generates a token into its data dir (mode 0600) and refuses every
// mutating request without it (401), the backup too; the client commands
// of its user find it, another user is told where it is, and a restart
// keeps it.
func TestE2EAPITokenByDefault(t *testing.T) {
	t.Parallel()
	r := newRepo(t)
	r.commit(map[string]string{"Pulumi.yaml": program("v1")})
	dataDir := t.TempDir()
	config := "stacks:\n" + stackYAML("app", r, pathConfig(filepath.Join(outDir(t), "note.txt")))
	in := startDaemon(t, config, dataDir)
	path := filepath.Join(dataDir, apiTokenFile)
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("%s: %v %v", path, fi.Mode(), err)
	}
	if !strings.Contains(in.logs.String(), "generated the API token") || strings.Contains(in.logs.String(), in.token) {
		t.Fatal("the start does not say where the token is, or logs it")
	}
	for _, p := range []string{"/api/v1/stacks/app/sync", "/api/v1/reload", "/api/v1/pause?wait=0s", "/api/v1/resume"} {
		if code := in.post(p, nil, nil); code != http.StatusUnauthorized {
			t.Errorf("POST %s without the token: %d, want 401", p, code)
		}
	}
	if code, _ := in.get("/api/v1/backup", nil); code != http.StatusUnauthorized {
		t.Errorf("GET /api/v1/backup without the token: %d, want 401", code)
	}
	if code := in.post("/api/v1/stacks/app/sync", nil, map[string]string{"Authorization": "Bearer " + in.token}); code != http.StatusAccepted {
		t.Fatalf("sync with the token: %d", code)
	}
	if code, stdout, stderr := stackd(t, in.clientArgs("sync", "app")...); code != exitOK {
		t.Fatalf("stackd sync: exit %d: %s%s", code, stdout, stderr)
	}
	code, stderr := syncAsOtherUser(t, in, path)
	if code != exitFail || !strings.Contains(stderr, "401") || !strings.Contains(stderr, path+", which this user cannot read") {
		t.Fatalf("stackd sync of another user: exit %d: %s", code, stderr)
	}

	token := in.token
	in.stop()
	in = startDaemon(t, config, dataDir)
	if in.token != token || strings.Contains(in.logs.String(), "generated the API token") {
		t.Fatal("a restart generated another token")
	}
	in.sync("app")
}

// syncAsOtherUser runs stackd sync app against in as a user who cannot
// read the token file path: as root, the stackd binary runs as nobody;
// otherwise the file is made unreadable while the command runs.
func syncAsOtherUser(t *testing.T, in *instance, path string) (int, string) {
	t.Helper()
	if os.Getuid() != 0 {
		if err := os.Chmod(path, 0); err != nil {
			t.Fatal(err)
		}
		defer os.Chmod(path, 0o600)
		code, _, stderr := stackd(t, in.clientArgs("sync", "app")...)
		return code, stderr
	}
	dir, err := os.MkdirTemp("", "stackd-other-user-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	exe := filepath.Join(dir, "stackd")
	if out, err := exec.Command("go", "build", "-o", exe, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, exe, in.clientArgs("sync", "app")...)
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=/"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	err = cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), stderr.String()
	}
	if err != nil {
		t.Fatalf("run as nobody: %v", err)
	}
	return 0, stderr.String()
}

// TestE2EAPINoToken: with --api-no-token the daemon writes no token and
// lets a sync without one through, and says so at start and in GET
// /api/v1/config.
func TestE2EAPINoToken(t *testing.T) {
	t.Parallel()
	r := newRepo(t)
	r.commit(map[string]string{"Pulumi.yaml": program("v1")})
	in := startDaemonWith(t, "stacks:\n"+stackYAML("app", r, pathConfig(filepath.Join(outDir(t), "note.txt"))), "",
		func(f *runFlags) { f.noToken = true })
	if _, err := os.Stat(filepath.Join(in.flags.dataDir, apiTokenFile)); !os.IsNotExist(err) {
		t.Fatalf("a token file with --api-no-token: %v", err)
	}
	if code := in.post("/api/v1/stacks/app/sync", nil, nil); code != http.StatusAccepted {
		t.Fatalf("sync without a token: %d, want 202", code)
	}
	var cfg struct {
		model.ConfigStatus
		Warnings []string
	}
	if code, body := in.get("/api/v1/config", &cfg); code != http.StatusOK || !strings.Contains(strings.Join(cfg.Warnings, "\n"), "--api-no-token") {
		t.Fatalf("GET /api/v1/config: %d %s", code, body)
	}
	if !strings.Contains(in.logs.String(), "level=WARN msg=\"--api-no-token") {
		t.Fatal("no warning at start")
	}
}
