package sandbox

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

func TestMain(m *testing.M) {
	if script, ok := os.LookupEnv(envTestDaemon); ok {
		os.Exit(testDaemon(script))
	}
	if err := ProtectSelf(); err != nil {
		panic(err)
	}
	os.Exit(m.Run())
}

// newLandlock is a sandbox, or skips where the kernel has no Landlock.
func newLandlock(t *testing.T, opts Options) *Landlock {
	t.Helper()
	l, err := New(opts)
	if err != nil {
		t.Fatalf("sandbox: %v", err)
	}
	return l
}

// etcFile is a file of /etc that confined processes may not read: one
// outside the system's list, found on this machine.
func etcFile(t *testing.T) string {
	t.Helper()
	entries, err := os.ReadDir("/etc")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		p := filepath.Join("/etc", e.Name())
		if e.Type().IsRegular() && !slices.Contains(systemROFiles, p) {
			if f, err := os.Open(p); err == nil {
				f.Close()
				return p
			}
		}
	}
	t.Fatal("no readable file in /etc")
	return ""
}

// run runs a shell script confined by l (or not, with l nil) and returns
// its combined output and whether it succeeded.
func run(t *testing.T, l *Landlock, ro, rw []string, script string) (string, bool) {
	t.Helper()
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(sh, "-c", script)
	if l != nil {
		if err := l.Confine(cmd, ro, rw); err != nil {
			t.Fatal(err)
		}
	}
	out, err := cmd.CombinedOutput()
	return string(out), err == nil
}

func TestConfine(t *testing.T) {
	root := t.TempDir()
	dir := func(name, file, content string) string {
		d := filepath.Join(root, name)
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, file), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return d
	}
	ro := dir("ro", "readme", "readable")
	rw := dir("rw", "notes", "writable")
	extra := dir("extra", "shared", "extra")
	single := dir("single", "file", "one file")
	secret := dir("secret", "token", "canary-7d1f")
	environ := "/proc/" + strconv.Itoa(os.Getpid()) + "/environ"

	l := newLandlock(t, Options{ReadWrite: []string{extra}})
	cases := []struct {
		name, script string
		ok           bool
		want         string // in the output
	}{
		{"read a read-only path", "cat " + ro + "/readme", true, "readable"},
		{"write a read-only path", "echo x > " + ro + "/new", false, "Permission denied"},
		{"write a read-write path", "echo x > " + rw + "/new && mkdir " + rw + "/d && mv " + rw + "/new " + rw + "/d/ && cat " + rw + "/d/new", true, "x"},
		{"write an operator's path", "echo y > " + extra + "/new && cat " + extra + "/new", true, "y"},
		{"read a file granted alone", "cat " + single + "/file", true, "one file"},
		{"list the directory of a file granted alone (names only)", "ls " + single, true, "file"},
		{"read a denied file", "cat " + secret + "/token", false, "Permission denied"},
		{"list a denied directory (names only)", "ls " + secret, true, "token"},
		{"read a file of a listed directory", "ls " + secret + " && cat " + secret + "/token", false, "Permission denied"},
		{"read the daemon's environment", "cat " + environ, false, "Permission denied"},
		{"signal the daemon", "kill -0 " + strconv.Itoa(os.Getpid()), false, ""},
		{"read the system's certificates", "ls /etc/ssl/certs >/dev/null && echo listed", true, "listed"},
		{"read a file of /etc outside the system's list", "cat " + etcFile(t), false, "Permission denied"},
		{"read its own process", "cat /proc/self/status", true, "Pid:"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out, ok := run(t, l, []string{ro, single + "/file", root + "/missing"}, []string{rw}, c.script)
			if ok != c.ok || !strings.Contains(out, c.want) {
				t.Errorf("%s: ok=%v, want %v; output:\n%s", c.script, ok, c.ok, out)
			}
			if strings.Contains(out, "canary") {
				t.Errorf("a canary escaped the sandbox:\n%s", out)
			}
		})
	}

	// The same reads succeed unconfined: the cases above can fail.
	for script, want := range map[string]string{"cat " + secret + "/token": "canary", "cat " + environ: "PATH="} {
		if out, ok := run(t, nil, nil, nil, script); !ok || !strings.Contains(out, want) {
			t.Errorf("unconfined %s: ok=%v\n%.200s", script, ok, out)
		}
	}
}

func TestConfineKeepsArgsAndEnv(t *testing.T) {
	l := newLandlock(t, Options{})
	cmd := exec.Command("/bin/sh", "-c", `printf '%s|%s|%s' "$0" "$1" "$STACKD_X${STACKD_SANDBOX_POLICY:-}"`, "zero", "one two")
	cmd.Env = []string{"STACKD_X=x"}
	if err := l.Confine(cmd, nil, nil); err != nil {
		t.Fatal(err)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if got, want := string(out), "zero|one two|x"; got != want {
		t.Errorf("output %q, want %q (the policy must not reach the command)", got, want)
	}
}

func TestWrapperRefusesToRunUnconfined(t *testing.T) {
	cmd := exec.Command("/proc/self/exe", "/bin/true")
	cmd.Args[0] = wrapperName
	cmd.Env = append(os.Environ(), envPolicy+"={not json")
	out, err := cmd.CombinedOutput()
	var exitErr *exec.ExitError
	if !errorsAs(err, &exitErr) || exitErr.ExitCode() != exitWrapper || !strings.Contains(string(out), "stackd sandbox: read policy") {
		t.Fatalf("err %v, output %s", err, out)
	}
}

func TestConfineNeedsAbsolutePath(t *testing.T) {
	l := newLandlock(t, Options{})
	if err := l.Confine(&exec.Cmd{Path: "pulumi", Args: []string{"pulumi"}}, nil, nil); err == nil {
		t.Fatal("a relative command was accepted")
	}
}

func errorsAs(err error, target **exec.ExitError) bool {
	e, ok := err.(*exec.ExitError)
	if ok {
		*target = e
	}
	return ok
}
