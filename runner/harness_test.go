package runner

import (
	"bytes"
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stackd/stackd/daemon/model"
)

// testProgram is a Pulumi YAML program with one stackdtest:index:File
// whose absolute path and content come from typed config, an output of
// its content and a secret output of the config value token.
const testProgram = `name: runnertest
runtime: yaml
configuration:
  path:
    type: String
  content:
    type: String
  token:
    type: String
    default: none
resources:
  note:
    type: stackdtest:index:File
    properties:
      path: ${path}
      content: ${content}
outputs:
  content: ${note.content}
  token:
    fn::secret: ${token}
`

// harness is a Runner on the real toolchain whose pulumi is a wrapper
// script: it appends each invocation's arguments to a file, one line per
// process, and execs the real CLI.
type harness struct {
	t       testing.TB
	r       *Runner
	dataDir string
	bin     string // the wrapper's directory, the runner's Bin
	calls   string // the wrapper's record
	seen    int    // bytes of calls that processes returned
	project string // the program's directory
	file    string // the File resource's absolute path
	log     syncBuffer
}

// newHarness builds the wrapper, a runner and a project holding program.
func newHarness(t testing.TB, program string) *harness {
	t.Helper()
	real := toolchainBin(t)
	h := &harness{t: t, dataDir: t.TempDir(), project: t.TempDir()}
	h.file = filepath.Join(t.TempDir(), "out", "note.txt")
	bin := t.TempDir()
	h.bin = bin
	h.calls = filepath.Join(t.TempDir(), "calls")
	script := "#!/bin/sh\nprintf '%s\\n' \"$*\" >> '" + h.calls + "'\nexec '" + filepath.Join(real, "pulumi") + "' \"$@\"\n"
	if err := os.WriteFile(filepath.Join(bin, "pulumi"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"pulumi-language-yaml", "pulumi-resource-stackdtest"} {
		if err := os.Symlink(filepath.Join(real, name), filepath.Join(bin, name)); err != nil {
			t.Fatal(err)
		}
	}
	h.writeProgram(program)
	r, err := New(context.Background(), Options{
		Bin:     bin,
		DataDir: h.dataDir,
		Env:     []string{"PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION=true"},
	})
	if err != nil {
		t.Fatal(err)
	}
	h.r = r
	return h
}

func (h *harness) writeProgram(program string) {
	h.t.Helper()
	if err := os.WriteFile(filepath.Join(h.project, "Pulumi.yaml"), []byte(program), 0o600); err != nil {
		h.t.Fatal(err)
	}
}

// workspace is the test stack with content and the secret token.
func (h *harness) workspace(content, token string) model.Workspace {
	return model.Workspace{
		Name:       "test",
		Stack:      "dev",
		ProjectDir: h.project,
		Config: []model.ConfigValue{
			{Key: "path", Value: h.file},
			{Key: "runnertest:content", Value: content},
			{Key: "token", Value: token, Secret: true},
		},
	}
}

// run runs an operation and fails the test on error.
func (h *harness) run(op model.Operation) model.Result {
	h.t.Helper()
	res, err := h.try(op)
	if err != nil {
		h.t.Fatalf("%s: %v\nlog:\n%s", op.Type, err, h.log.String())
	}
	return res
}

// try runs an operation with the harness's log.
func (h *harness) try(op model.Operation) (model.Result, error) {
	op.Log = &h.log
	return h.r.Run(context.Background(), op)
}

// processes returns the pulumi invocations recorded since its last call.
func (h *harness) processes() []string {
	h.t.Helper()
	all := h.allCalls()
	recent := strings.TrimSpace(all[h.seen:])
	h.seen = len(all)
	if recent == "" {
		return nil
	}
	return strings.Split(recent, "\n")
}

// allCalls is every invocation recorded so far, kept.
func (h *harness) allCalls() string {
	data, _ := os.ReadFile(h.calls)
	return string(data)
}

// onDisk is the File resource's content, "" when it does not exist.
func (h *harness) onDisk() string {
	h.t.Helper()
	data, err := os.ReadFile(h.file)
	if err != nil && !os.IsNotExist(err) {
		h.t.Fatal(err)
	}
	return string(data)
}

// filesContaining lists the files under dir that contain s.
func filesContaining(t testing.TB, dir, s string) []string {
	t.Helper()
	var found []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err // directories, and the links to the plugin cache
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if bytes.Contains(data, []byte(s)) {
			found = append(found, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}

// syncBuffer is a bytes.Buffer safe for concurrent use.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// gates are the test provider's gates (STACKDTEST_HOLD): a directory
// where a test holds a File's create, update, delete or diff open for as
// long as it needs, rather than hoping to catch it while it runs. The gate
// of an operation is named "<op>-<base name of the File's path>", as
// "update-note.txt".
type gates struct {
	t   testing.TB
	dir string
}

// newGates makes t's gates directory. Every gate left closed is opened
// when the test ends, so that no operation waits past it.
func newGates(t testing.TB) *gates {
	t.Helper()
	g := &gates{t: t, dir: t.TempDir()}
	t.Cleanup(func() {
		closed, _ := filepath.Glob(filepath.Join(g.dir, "*"))
		for _, f := range closed {
			if !strings.HasSuffix(f, ".held") {
				_ = os.Remove(f)
			}
		}
	})
	return g
}

// env is the workspace environment that gives the provider these gates.
func (g *gates) env() map[string]string {
	return map[string]string{"STACKDTEST_HOLD": g.dir}
}

// close closes the gate of op on file: the next such operation waits
// there until the test ends (or the gate file is removed).
func (g *gates) close(op, file string) {
	g.t.Helper()
	if err := os.WriteFile(filepath.Join(g.dir, op+"-"+file), nil, 0o644); err != nil {
		g.t.Fatal(err)
	}
}

// waitHeld waits until an operation op on file waits at its closed gate,
// and returns the pid of the provider holding it, which stays held until
// the gate opens. The wait is bounded generously: it is a whole pulumi
// operation's start, on a machine that may be busy.
func (g *gates) waitHeld(op, file string) int {
	g.t.Helper()
	held := filepath.Join(g.dir, op+"-"+file+".held")
	for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(20 * time.Millisecond) {
		if data, err := os.ReadFile(held); err == nil {
			if pid, err := strconv.Atoi(string(data)); err == nil {
				return pid
			}
		}
		if time.Now().After(deadline) {
			g.t.Fatalf("timed out waiting for the %s of %s to wait at its gate", op, file)
		}
	}
}
