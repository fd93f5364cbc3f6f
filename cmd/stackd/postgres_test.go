package main

import (
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// startPostgres runs a PostgreSQL server of Debian's postgresql package
// on a loopback port for the test, and returns a backend URL for the
// pulumi CLI (postgres://, supported since v3.189). PostgreSQL refuses to
// run as root: as root the server runs as the package's user postgres.
func startPostgres(t testing.TB) string {
	t.Helper()
	bins, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if len(bins) == 0 {
		t.Fatal("PostgreSQL is not installed (Debian: apt-get install postgresql)")
	}
	slices.Sort(bins)
	binDir := filepath.Dir(bins[len(bins)-1])
	dir, err := os.MkdirTemp("", "stackd-pg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	asUser := func(name string, args ...string) *exec.Cmd { return exec.Command(filepath.Join(binDir, name), args...) }
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Fatalf("running as root needs the user postgres of Debian's package: %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
		asUser = func(name string, args ...string) *exec.Cmd {
			return exec.Command("runuser", append([]string{"-u", "postgres", "--", filepath.Join(binDir, name)}, args...)...)
		}
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "data")
	if out, err := asUser("initdb", "-D", data, "--auth=trust", "-U", "stackd", "-E", "UTF8", "--no-sync").CombinedOutput(); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	_, port, _ := strings.Cut(freeAddr(t), ":")
	opts := fmt.Sprintf("-c listen_addresses=127.0.0.1 -p %s -k %s -c fsync=off", port, dir)
	if out, err := asUser("pg_ctl", "-D", data, "-o", opts, "-l", filepath.Join(dir, "log"), "-w", "start").CombinedOutput(); err != nil {
		log, _ := os.ReadFile(filepath.Join(dir, "log"))
		t.Fatalf("pg_ctl start: %v\n%s\n%s", err, out, log)
	}
	t.Cleanup(func() {
		_ = asUser("pg_ctl", "-D", data, "-m", "immediate", "stop").Run()
	})
	url := "postgres://stackd@127.0.0.1:" + port + "/postgres?sslmode=disable"
	t.Cleanup(func() {
		if t.Failed() {
			log, _ := os.ReadFile(filepath.Join(dir, "log"))
			t.Logf("PostgreSQL's log:\n%s", log)
		}
	})
	initBackend(t, url)
	return url
}

// initBackend opens the Pulumi backend at url once, as an operator does
// when setting a shared backend up: Pulumi creates its table then.
// Replicas that each open a new PostgreSQL backend first at the same
// moment race in CREATE TABLE IF NOT EXISTS, and one of them fails its
// first update (stackd retries it), which the tests' counts of updates
// would take for a fault of stackd's.
func initBackend(t testing.TB, url string) {
	t.Helper()
	bin := toolchainBin(t)
	cmd := exec.Command(filepath.Join(bin, "pulumi"), "stack", "ls", "--all", "--non-interactive")
	cmd.Env = []string{"PATH=" + bin + ":/usr/bin:/bin", "HOME=" + t.TempDir(), "PULUMI_HOME=" + t.TempDir(),
		"PULUMI_SKIP_UPDATE_CHECK=true", "PULUMI_BACKEND_URL=" + url}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("pulumi stack ls on %s: %v\n%s", url, err, out)
	}
}
