package runner

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stackd/stackd/daemon/model"
)

// groupProgram is three Files whose parent is a fourth: the YAML language
// host declares no components, and a parent option is what makes a tree.
func groupProgram(dir string) string {
	file := func(name, parent, extra string) string {
		s := "  " + name + ":\n    type: stackdtest:index:File\n    properties:\n      path: " +
			filepath.Join(dir, name) + "\n      content: " + name + "\n"
		if parent != "" || extra != "" {
			s += "    options:\n"
		}
		if parent != "" {
			s += "      parent: ${" + parent + "}\n"
		}
		return s + extra
	}
	return "name: grouptest\nruntime: yaml\nresources:\n" + file("group", "", "") +
		file("a", "group", "      protect: true\n") + file("b", "group", "      retainOnDelete: true\n") + file("c", "group", "")
}

// TestRunExportResources: an up asked to export gives the resources of
// the state with their tree; a read-only preview exports nothing.
func TestRunExportResources(t *testing.T) {
	h := newHarness(t, groupProgram(t.TempDir()))
	ws := h.workspace("x", secretOne)
	res := h.run(model.Operation{Workspace: ws, Type: model.UpdateUp, Export: true})
	if !res.Exported || res.ExportFailed {
		t.Fatalf("an up with Export exported nothing (failed: %v); log:\n%s", res.ExportFailed, h.log.String())
	}
	byName := map[string]model.Resource{}
	for _, r := range res.Resources {
		byName[r.Type+" "+r.Name] = r
	}
	group, ok := byName["stackdtest:index:File group"]
	if !ok || len(res.Resources) != 6 {
		t.Fatalf("resources = %+v, want the stack, the provider, the group and three files", res.Resources)
	}
	stack := byName["pulumi:pulumi:Stack grouptest-dev"]
	if stack.URN == "" || group.Parent != stack.URN || !group.Custom || group.ID == "" {
		t.Errorf("group = %+v, want a custom resource whose parent is the stack %q", group, stack.URN)
	}
	for _, name := range []string{"a", "b", "c"} {
		r := byName["stackdtest:index:File "+name]
		if r.Parent != group.URN || !strings.HasPrefix(r.Provider, "urn:pulumi:dev::grouptest::pulumi:providers:stackdtest::") {
			t.Errorf("%s = %+v, want parent %s and the stackdtest provider", name, r, group.URN)
		}
		if r.Created.IsZero() || r.Modified.IsZero() {
			t.Errorf("%s has no created or modified time: %+v", name, r)
		}
		if r.Protect != (name == "a") || r.RetainOnDelete != (name == "b") {
			t.Errorf("%s: protect %v, retainOnDelete %v", name, r.Protect, r.RetainOnDelete)
		}
	}
	// Read from the checkpoint, not by another process, and as the
	// CLI's export says.
	if slices.ContainsFunc(h.processes(), func(p string) bool { return strings.Contains(p, "stack export") }) {
		t.Error("the resources were exported by a pulumi process")
	}
	w, err := h.r.open(ws)
	if err != nil {
		t.Fatal(err)
	}
	out, err := h.r.pulumi(context.Background(), w, call{what: "export"}, "stack", "export", "--stack", w.Stack)
	if err != nil {
		t.Fatal(err)
	}
	if exported, err := parseExport([]byte(out)); err != nil || !reflect.DeepEqual(exported, res.Resources) {
		t.Errorf("the checkpoint's resources differ from the CLI's export (%v):\n%+v\n%+v", err, res.Resources, exported)
	}
	res = h.run(model.Operation{Workspace: ws, Type: model.UpdatePreview, ReadOnly: true, Export: true})
	if res.Exported || res.Resources != nil || res.ExportFailed {
		t.Errorf("a read-only preview exported %d resources", len(res.Resources))
	}
}

// TestRunKilledExportsNothing: an up whose process is killed (as the
// watchdog kills it when the daemon was frozen, and may have lost the
// stack meanwhile) runs no other pulumi process: no export, and no
// export failure either. The up is killed while its update waits at the
// provider's gate, so it is surely under way.
func TestRunKilledExportsNothing(t *testing.T) {
	h := newHarness(t, testProgram)
	ws := h.workspace("x", secretOne)
	h.run(model.Operation{Workspace: ws, Type: model.UpdateUp})
	h.processes()
	g := newGates(t)
	g.close("update", filepath.Base(h.file))
	ws = h.workspace("y", secretOne) // an update, held at its gate
	ws.Env = g.env()
	type outcome struct {
		res model.Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := h.try(model.Operation{Workspace: ws, Type: model.UpdateUp, Export: true})
		done <- outcome{res, err}
	}()
	// The plugins run in process groups of their own: killing the up
	// leaves the language host and the provider holding the gate
	// behind (the harness has no reaper, which in the daemon ends
	// them), so the test ends them.
	g.waitHeld("update", filepath.Base(h.file))
	t.Cleanup(func() { killWorkingIn(h.project, h.dataDir) })
	up := childProcess(t, "pulumi", "up")
	if up == 0 {
		t.Fatal("the update waits at its gate, but no pulumi up runs")
	}
	if err := syscall.Kill(up, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	o := <-done
	if o.err == nil {
		t.Fatal("the killed up succeeded")
	}
	if o.res.Exported || o.res.ExportFailed {
		t.Errorf("after the killed up: exported %v, export failed %v", o.res.Exported, o.res.ExportFailed)
	}
	for _, c := range h.processes() {
		if strings.HasPrefix(c, "stack export") {
			t.Errorf("pulumi %s ran after the killed up", c)
		}
	}
}

// childProcess is the pid of a descendant of this process whose command
// is name with the argument arg; 0 when there is none.
func childProcess(t *testing.T, name, arg string) int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		args := strings.Split(string(cmdline), "\x00")
		if err != nil || filepath.Base(args[0]) != name || !slices.Contains(args[1:], arg) {
			continue
		}
		for p := pid; p > 1; p = parentOf(p) {
			if p == os.Getpid() {
				return pid
			}
		}
	}
	return 0
}

// killWorkingIn kills the processes whose working directory is in one
// of dirs.
func killWorkingIn(dirs ...string) {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cwd, err := os.Readlink(filepath.Join("/proc", e.Name(), "cwd"))
		if err != nil {
			continue
		}
		cwd = strings.TrimSuffix(cwd, " (deleted)")
		if slices.ContainsFunc(dirs, func(d string) bool { return cwd == d || strings.HasPrefix(cwd, d+"/") }) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// parentOf is the parent pid of pid, 0 when it cannot be read.
func parentOf(pid int) int {
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0
	}
	// pid (comm) state ppid …; comm may hold spaces.
	fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	if len(fields) < 2 {
		return 0
	}
	ppid, _ := strconv.Atoi(fields[1])
	return ppid
}

func TestParseExport(t *testing.T) {
	data := `{"version":3,"deployment":{"resources":[
{"urn":"urn:pulumi:dev::p::pulumi:pulumi:Stack::p-dev","type":"pulumi:pulumi:Stack","outputs":{"token":{"4dabf18193072939515e22adb298388d":"1b47061264138c4ac30d75fd1eb44270","ciphertext":"v1:abc"}}},
{"urn":"urn:pulumi:dev::p::stackdtest:index:File::old","type":"stackdtest:index:File","delete":true},
{"urn":"urn:pulumi:dev::p::stackdtest:index:File::f","custom":true,"id":"/x","type":"stackdtest:index:File","parent":"urn:pulumi:dev::p::pulumi:pulumi:Stack::p-dev",
 "provider":"urn:pulumi:dev::p::pulumi:providers:stackdtest::default::0a1b","created":"2025-03-01T12:00:00Z"}]}}`
	rs, err := parseExport([]byte(data))
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 2 || rs[1].Name != "f" || rs[1].Provider != "urn:pulumi:dev::p::pulumi:providers:stackdtest::default" ||
		rs[1].Created.IsZero() || !rs[1].Modified.IsZero() || rs[0].Name != "p-dev" {
		t.Errorf("parseExport = %+v", rs)
	}
	if _, err := parseExport([]byte("{")); err == nil || !strings.Contains(err.Error(), "exported state") {
		t.Errorf("parseExport of bad JSON: %v", err)
	}
}
