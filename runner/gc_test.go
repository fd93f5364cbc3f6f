package runner

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stackd/stackd/daemon/model"
)

func TestEngineGOGCDecision(t *testing.T) {
	for _, c := range []struct {
		name                   string
		gogc, size             int
		known, confined, isSet bool
		want                   int
	}{
		{"small state", 400, 3549, true, true, false, 400},
		{"at the bound", 400, smallState, true, true, false, 400},
		{"large state", 400, smallState + 1, true, true, false, 0},
		{"not read since the start", 400, 0, false, true, false, 0},
		{"plugins unconfined would inherit it", 400, 3549, true, false, false, 0},
		{"the operator or the stack sets GOGC", 400, 3549, true, true, true, 0},
		{"off", 0, 3549, true, true, false, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := engineGOGC(c.gogc, c.size, c.known, c.confined, c.isSet); got != c.want {
				t.Errorf("engineGOGC = %d, want %d", got, c.want)
			}
		})
	}
}

// TestEngineGOGCConfined holds operations open at the provider's gate
// and reads the environments of the running engine and provider: the
// engine of a small stack gets the runner's GOGC once its state was
// read, the plugins never do, and a stack's own GOGC reaches both.
func TestEngineGOGCConfined(t *testing.T) {
	h := newSandboxedHarness(t)
	h.r.opts.EngineGOGC = 400
	g := newGates(t)
	g.dir = filepath.Join(filepath.Dir(h.file), "gates") // where the sandbox lets the provider look
	if err := os.Mkdir(g.dir, 0o700); err != nil {
		t.Fatal(err)
	}
	file := filepath.Base(h.file)
	held := func(op, content string, env map[string]string) (engine, provider string) {
		t.Helper()
		ws := h.workspace(content, "token-1")
		ws.Env = g.env()
		for k, v := range env {
			ws.Env[k] = v
		}
		g.close(op, file)
		done := make(chan error, 1)
		go func() {
			_, err := h.try(model.Operation{Workspace: ws, Type: model.UpdateUp, Export: true})
			done <- err
		}()
		pid := g.waitHeld(op, file)
		up := childProcess(t, "pulumi", "up")
		if up == 0 {
			t.Fatal("the provider waits at its gate, but no pulumi up runs")
		}
		engine = environValue(t, up, "GOGC") + " " + environValue(t, up, "GOMEMLIMIT")
		provider = environValue(t, pid, "GOGC") + " " + environValue(t, pid, "GOMEMLIMIT")
		if err := os.Remove(filepath.Join(g.dir, op+"-"+file)); err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil {
			t.Fatalf("%s: %v\n%s", op, err, h.log.String())
		}
		return engine, provider
	}
	for _, c := range []struct {
		name, op, content string
		env               map[string]string
		engine, provider  string
	}{
		{"a stack whose state was never read", "create", "one", nil, "unset unset", "unset unset"},
		{"a small stack", "update", "two", nil, "400 512MiB", "unset unset"},
		{"a stack that sets GOGC", "update", "three", map[string]string{"GOGC": "150"}, "150 unset", "150 unset"},
	} {
		engine, provider := held(c.op, c.content, c.env)
		if engine != c.engine || provider != c.provider {
			t.Errorf("%s: GOGC of the engine %s, of the provider %s; want %s, %s", c.name, engine, provider, c.engine, c.provider)
		}
	}
}

// environValue is the value of the variable name in the environment of
// process pid, "unset" when it has none, "bare" for a "name" without a
// value (what a wrapper that did not know removal would pass on).
func environValue(t *testing.T, pid int, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "environ"))
	if err != nil {
		t.Fatal(err)
	}
	for kv := range strings.SplitSeq(string(data), "\x00") {
		if v, ok := strings.CutPrefix(kv, name+"="); ok {
			return v
		}
		if kv == name {
			return "bare"
		}
	}
	return "unset"
}

// TestGOGCSetByOthers: a GOGC or GOMEMLIMIT of the stack, of --env-file,
// or of the daemon's environment passed by --pass-env turns tuning off.
func TestGOGCSetByOthers(t *testing.T) {
	t.Setenv("GOMEMLIMIT", "1GiB")
	for _, c := range []struct {
		name string
		r    *Runner
		w    *workspace
		want bool
	}{
		{"nobody", &Runner{}, &workspace{}, false},
		{"the stack", &Runner{}, &workspace{Workspace: model.Workspace{Env: map[string]string{"GOGC": "50"}}}, true},
		{"--env-file", &Runner{opts: Options{Env: []string{"GOGC=50"}}}, &workspace{}, true},
		{"--pass-env of a variable the daemon has", &Runner{opts: Options{PassEnv: []string{"GO*"}}}, &workspace{}, true},
		{"--pass-env of a variable the daemon lacks", &Runner{opts: Options{PassEnv: []string{"GOGC"}}}, &workspace{}, false},
	} {
		if got := c.r.gogcSet(c.w); got != c.want {
			t.Errorf("%s: gogcSet = %v, want %v", c.name, got, c.want)
		}
	}
}
