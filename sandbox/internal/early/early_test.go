package early

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/landlock-lsm/go-landlock/landlock"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
)

// This package's test binary has no other wrapper: a plugin started
// through a link to it is confined by this package's initializer alone,
// or not at all.

// plugin is a plugin's wrapper: a link to this test binary, and the link
// beside it to the real plugin, /bin/sh.
func plugin(t *testing.T) string {
	t.Helper()
	if abiVersion() < 2 {
		t.Skip("the kernel has no Landlock ABI 2")
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "pulumi-resource-test")
	if err := os.Symlink(self, path); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/bin/sh", filepath.Join(dir, ".pulumi-resource-test.real")); err != nil {
		t.Fatal(err)
	}
	return path
}

// runPlugin runs script through the wrapper at path with the policy p
// and the environment env, and returns its combined output and whether
// it succeeded.
func runPlugin(t *testing.T, path string, p jsonPolicy, env []string, script string, args ...string) (string, bool) {
	t.Helper()
	data, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(path, append([]string{"-c", script}, args...)...)
	cmd.Env = append(env, EnvProgram+"="+string(data))
	out, err := cmd.CombinedOutput()
	return string(out), err == nil
}

func TestPluginConfined(t *testing.T) {
	path := plugin(t)
	root := t.TempDir()
	mk := func(name, file, content string) string {
		d := filepath.Join(root, name)
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, file), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return d
	}
	ro, rw, single := mk("ro", "readme", "readable"), mk("rw", "notes", "writable"), mk("single", "file", "one file")
	other := mk("other", "token", "canary-3b9e")
	p := jsonPolicy{ReadOnly: []string{ro, single + "/file", root + "/missing"}, ReadWrite: []string{rw}}
	cases := []struct {
		name, script string
		ok           bool
		want         string
	}{
		{"read a read-only path", "cat " + ro + "/readme", true, "readable"},
		{"write a read-only path", "echo x > " + ro + "/new", false, "Permission denied"},
		{"write and move in a read-write path", "echo x > " + rw + "/new && mkdir " + rw + "/d && mv " + rw + "/new " + rw + "/d/ && cat " + rw + "/d/new", true, "x"},
		{"read a file granted alone", "cat " + single + "/file", true, "one file"},
		{"read a file outside the policy", "cat " + other + "/token", false, "Permission denied"},
		{"write outside the policy", "echo x > " + other + "/new", false, "Permission denied"},
		{"read a system file", "cat /etc/passwd >/dev/null && echo read", true, "read"},
		{"signal the test", "kill -0 " + strconv.Itoa(os.Getpid()), false, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, ok := runPlugin(t, path, p, nil, c.script)
			if ok != c.ok || !strings.Contains(out, c.want) || strings.Contains(out, "canary") {
				t.Errorf("%s: ok=%v, want %v; output:\n%s", c.script, ok, c.ok, out)
			}
		})
	}
	// Unconfined, the same reads succeed: the cases above can fail.
	if out, err := exec.Command("/bin/sh", "-c", "cat "+other+"/token").CombinedOutput(); err != nil || !strings.Contains(string(out), "canary") {
		t.Fatalf("unconfined: %v: %s", err, out)
	}
}

func TestPluginArgsAndEnv(t *testing.T) {
	path := plugin(t)
	// A name alone removes the engine's variable (its GOGC).
	p := jsonPolicy{Env: []string{"HOME=/program-home", "TMPDIR=/program-tmp", "GOGC"}}
	env := []string{"HOME=/engine-home", "PULUMI_CONFIG_PASSPHRASE=secret", "PULUMI_CONFIG_PASSPHRASE_FILE=/pass", "KEEP=kept", "GOGC=400"}
	out, ok := runPlugin(t, path, p, env,
		`printf '%s|%s|%s|%s|%s|%s|%s' "$0" "$1" "$HOME" "$TMPDIR" "$KEEP" "${PULUMI_CONFIG_PASSPHRASE:-}${PULUMI_CONFIG_PASSPHRASE_FILE:-}" "${GOGC-unset}"; env | grep -c '^`+EnvProgram+`='; env | grep -c '^GOGC' || :`,
		"/bin/sh", "one two")
	if want := "/bin/sh|one two|/program-home|/program-tmp|kept||unset1\n0\n"; !ok || out != want {
		t.Errorf("ok=%v, output %q, want %q", ok, out, want)
	}
}

func TestPluginFailsClosed(t *testing.T) {
	path := plugin(t)
	for name, cmd := range map[string]*exec.Cmd{
		"relative name": {Path: path, Args: []string{"pulumi-resource-test", "-c", "echo ran"}},
		"no real link":  {Path: "/proc/self/exe", Args: []string{filepath.Join(t.TempDir(), "pulumi-resource-none"), "-c", "echo ran"}},
	} {
		t.Run(name, func(t *testing.T) {
			cmd.Env = []string{EnvProgram + "={}"}
			out, err := cmd.CombinedOutput()
			if code := cmd.ProcessState.ExitCode(); code != ExitWrapper || !strings.HasPrefix(string(out), "stackd sandbox: plugin ") {
				t.Errorf("exit %d (%v), output %q", code, err, out)
			}
		})
	}
}

func TestRightsAreGoLandlocks(t *testing.T) {
	for _, c := range []struct {
		name      string
		got, want uint64
	}{
		{"file system", handledFS, uint64(landlock.V7.HandledAccessFS)},
		{"network", handledNet, uint64(landlock.V7.HandledAccessNet)},
		{"scopes", handledScoped, uint64(landlock.V7.Scoped)},
		{"read dir", accessReadDir, ll.AccessFSReadDir},
		{"refer", accessRefer, ll.AccessFSRefer},
		{"ioctl dev", accessIoctlDev, ll.AccessFSIoctlDev},
		{"truncate", accessTruncate, ll.AccessFSTruncate},
		{"connect", netConnectTCP, ll.AccessNetConnectTCP},
		{"RODirs", roDirs, ll.AccessFSExecute | ll.AccessFSReadFile | ll.AccessFSReadDir},
		{"ROFiles", roFiles, ll.AccessFSExecute | ll.AccessFSReadFile},
		{"RWFiles", rwFiles, ll.AccessFSExecute | ll.AccessFSReadFile | ll.AccessFSWriteFile | ll.AccessFSTruncate},
		{"RWDirs", rwDirs, 1<<13 - 1 | ll.AccessFSTruncate},
	} {
		if c.got != c.want {
			t.Errorf("%s: %b, go-landlock %b", c.name, c.got, c.want)
		}
	}
	for abi, v := range []landlock.Config{landlock.V1, landlock.V2, landlock.V3, landlock.V4, landlock.V5, landlock.V6, landlock.V7} {
		abi++
		if supportedFS(abi) != uint64(v.HandledAccessFS) || supportedNet(abi) != uint64(v.HandledAccessNet) || supportedScoped(abi) != uint64(v.Scoped) {
			t.Errorf("ABI %d: %b %b %b, go-landlock %v", abi, supportedFS(abi), supportedNet(abi), supportedScoped(abi), v)
		}
	}
	if got, want := abiVersion(), goLandlockABI(); got != want {
		t.Errorf("ABI %d, go-landlock's %d", got, want)
	}
}

// goLandlockABI is the ABI go-landlock detects on this kernel (its
// internal.DetectedABIVersion).
func goLandlockABI() int {
	v, err := ll.LandlockGetABIVersion()
	if err != nil {
		return 0
	}
	if v >= 6 {
		if errata, err := ll.LandlockGetErrata(); err != nil || errata&2 == 0 {
			v = 5
		}
	}
	return v
}
