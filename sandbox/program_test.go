package sandbox

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// pluginTree makes, under a directory of its own, what a plugin's
// policy names and what it does not, and returns the directory.
func pluginTree(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	for _, d := range []string{"ro", "rw", "rw2", "other"} {
		for _, sub := range []string{"sub", "empty"} {
			if err := os.MkdirAll(filepath.Join(root, d, sub), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		for _, f := range []string{"f", "f2", "f4", "f5", "sub/g"} {
			if err := os.WriteFile(filepath.Join(root, d, f), []byte("content of "+d+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(root, d, "x"), []byte("#!/bin/sh\necho ran\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"rofile", "rwfile"} {
		if err := os.WriteFile(filepath.Join(root, f), []byte("content of "+f+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// pluginProbe is a shell script that tries, under root, what a program
// may try, and prints one line for each attempt: whether it was allowed.
func pluginProbe(t *testing.T, root string) string {
	var b strings.Builder
	try := func(name, cmd string) {
		fmt.Fprintf(&b, "if %s >/dev/null 2>&1; then echo '%s allowed'; else echo '%s denied'; fi\n", cmd, name, name)
	}
	for _, d := range []string{"ro", "rw", "other"} {
		p := filepath.Join(root, d)
		for _, op := range [][2]string{
			{"read", "cat " + p + "/f"},
			{"list", "ls " + p},
			{"exec", p + "/x"},
			{"append", "sh -c 'echo x >> " + p + "/f'"},
			{"truncate", "sh -c ': > " + p + "/f2'"},
			{"create", "sh -c 'echo x > " + p + "/new'"},
			{"mkdir", "mkdir " + p + "/d"},
			{"mkfifo", "mkfifo " + p + "/fifo"},
			{"symlink", "ln -s /nowhere " + p + "/link"},
			{"remove", "rm " + p + "/sub/g"},
			{"rmdir", "rmdir " + p + "/empty"},
			{"rename", "mv " + p + "/f4 " + p + "/f6"},
			{"rename to another read-write directory", "mv " + p + "/f5 " + root + "/rw2/from-" + d},
			{"link across directories", "ln " + p + "/f " + p + "/sub/hard"},
		} {
			try(d+" "+op[0], op[1])
		}
	}
	for _, f := range []string{"rofile", "rwfile"} {
		p := filepath.Join(root, f)
		try(f+" read", "cat "+p)
		try(f+" append", "sh -c 'echo x >> "+p+"'")
		try(f+" truncate", "sh -c ': > "+p+"'")
	}
	pid := strconv.Itoa(os.Getpid())
	for _, c := range [][2]string{
		{"missing path", "ls " + root + "/missing"},
		{"system read", "cat /etc/passwd"},
		{"system list", "ls /usr/bin"},
		{"root list", "ls /"},
		{"etc list", "ls /etc"},
		{"etc read", "cat " + etcFile(t)},
		{"dev null", "sh -c 'echo x > /dev/null'"},
		{"own process", "cat /proc/self/status"},
		{"test environ", "cat /proc/" + pid + "/environ"},
		{"test signal", "kill -0 " + pid},
	} {
		try(c[0], c[1])
	}
	return b.String()
}

// TestPluginWrapperIsGoLandlocks: a plugin's wrapper confines the plugin
// in the early package's initializer, and exactly as the go-landlock
// rules of restrict would: the same probes run under both give the same
// answers.
func TestPluginWrapperIsGoLandlocks(t *testing.T) {
	l := newLandlock(t, Options{})
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	wrapper := filepath.Join(bin, "pulumi-resource-probe")
	if err := os.Symlink(self, wrapper); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/bin/sh", filepath.Join(bin, realLinkName("pulumi-resource-probe"))); err != nil {
		t.Fatal(err)
	}
	probe := func(reference bool) (string, string) {
		root := pluginTree(t)
		cmd := exec.Command(wrapper, "-c", pluginProbe(t, root))
		cmd.Env = []string{"PATH=/usr/bin:/bin", "GODEBUG=inittrace=1"}
		if err := l.Nest(cmd, []string{root + "/ro", root + "/rofile", root + "/missing"},
			[]string{root + "/rw", root + "/rw2", root + "/rwfile"}, []string{"HOME=" + root}); err != nil {
			t.Fatal(err)
		}
		if reference {
			// The same policy, but not as encoding/json writes it: the
			// early package leaves it to this package's initializer.
			last := len(cmd.Env) - 1
			var p programPolicy
			if err := json.Unmarshal([]byte(strings.TrimPrefix(cmd.Env[last], envProgram+"=")), &p); err != nil {
				t.Fatal(err)
			}
			data, err := json.MarshalIndent(p, "", " ")
			if err != nil {
				t.Fatal(err)
			}
			cmd.Env[last] = envProgram + "=" + string(data)
		}
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("%v: %s", err, stderr.Bytes())
		}
		return strings.ReplaceAll(stdout.String(), root, "ROOT"), stderr.String()
	}
	early, earlyInit := probe(false)
	reference, referenceInit := probe(true)
	// inittrace prints a package's line once its initializers returned:
	// the early package's, when it left the plugin to this package.
	const earlyReturned = "init github.com/stackd/stackd/sandbox/internal/early @"
	if strings.Contains(earlyInit, earlyReturned) || !strings.Contains(referenceInit, earlyReturned) {
		t.Fatalf("the early package wrapped the plugin %v, the reference %v: want true, false",
			!strings.Contains(earlyInit, earlyReturned), !strings.Contains(referenceInit, earlyReturned))
	}
	if early != reference {
		t.Errorf("the early wrapper's answers differ from go-landlock's:\n%s\nwant\n%s", early, reference)
	}
	for _, want := range []string{"ro read allowed", "ro append denied", "rw rename to another read-write directory allowed",
		"other read denied", "rwfile truncate allowed", "etc read denied", "test signal denied"} {
		if !strings.Contains(early, want+"\n") {
			t.Errorf("no %q in\n%s", want, early)
		}
	}
}

// realLinkName is the name of the link to the real plugin beside the
// link to its wrapper (the runner's realLink).
func realLinkName(name string) string { return "." + name + ".real" }

// TestProgramEnv: the plugin's environment is the engine's without its
// own variables, with what the policy sets; a name alone removes.
func TestProgramEnv(t *testing.T) {
	for _, c := range []struct {
		name         string
		environ, set []string
		want         []string
	}{
		{"replaced", []string{"HOME=/engine", "KEEP=1"}, []string{"HOME=/program"}, []string{"KEEP=1", "HOME=/program"}},
		{"engine only", []string{"PULUMI_CONFIG_PASSPHRASE=p", "PULUMI_CONFIG_PASSPHRASE_FILE=/f", "KEEP=1"}, nil, []string{"KEEP=1"}},
		{"removed", []string{"GOGC=400", "KEEP=1"}, []string{"GOGC"}, []string{"KEEP=1"}},
		{"removed, absent", []string{"KEEP=1"}, []string{"GOGC"}, []string{"KEEP=1"}},
		{"empty value kept", []string{"X=1"}, []string{"X="}, []string{"X="}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := programEnv(c.environ, c.set); !slices.Equal(got, c.want) {
				t.Errorf("programEnv(%q, %q) = %q, want %q", c.environ, c.set, got, c.want)
			}
		})
	}
}
