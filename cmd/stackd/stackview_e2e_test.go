package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stackd/stackd/daemon/model"
	"github.com/stackd/stackd/daemon/spec"
)

// groupProgram is three test-provider Files whose parent is a fourth, in
// the directory of the stack's config "dir": the YAML language host
// declares no component, a parent option makes the tree.
func groupProgram(version string) string {
	file := func(name, parent string) string {
		s := "  " + name + ":\n    type: stackdtest:index:File\n    properties:\n      path: ${dir}/" + name +
			".txt\n      content: " + name + " " + version + "\n"
		if parent != "" {
			s += "    options:\n      parent: ${" + parent + "}\n"
		}
		return s
	}
	return "name: e2e\nruntime: yaml\nconfiguration:\n  dir:\n    type: String\nresources:\n" +
		file("group", "") + file("a", "group") + file("b", "group") + file("c", "group")
}

// resourcesByName reads the stack's resources from the API, by name.
func (in *instance) resourcesByName(t *testing.T, stack string) (model.Resources, map[string]model.Resource) {
	t.Helper()
	var rs model.Resources
	if code, body := in.get("/api/v1/stacks/"+stack+"/resources", &rs); code != 200 {
		t.Fatalf("GET resources: %d %s", code, body)
	}
	m := map[string]model.Resource{}
	for _, r := range rs.Resources {
		m[r.Name] = r
	}
	return rs, m
}

// TestE2EResources: a stack of three Files under a parent. The API lists
// them with parent and type and the update that created them; the stack
// page shows the tree and the picture in Chromium; after a drift check
// that found one edited by hand, that one is drifted and the others in
// sync, in the API and on the page.
func TestE2EResources(t *testing.T) {
	t.Parallel()
	chromium := tool(t, "chromium")
	r := newRepo(t)
	r.commit(map[string]string{"Pulumi.yaml": groupProgram("v1")})
	dir := outDir(t)
	in := startDaemon(t, "stacks:\n"+stackYAML("app", r, "    config:\n      dir: "+dir+"\n"+
		"    driftDetection:\n      interval: 1s\n"), "")
	v := in.waitStack("app", "in sync", 2*time.Minute, driftState(spec.DriftInSync))
	first := v.Status.LastUpdate.Name
	if c := v.AppliedCommit; c == nil || c.SHA != v.Status.LastUpdate.LastSuccessfulCommit || c.Subject != "change" || c.Author != "test" {
		t.Errorf("applied commit = %+v, want the repository's commit with its subject and author", c)
	}
	_, byName := in.resourcesByName(t, "app")
	group := byName["group"]
	if group.Type != "stackdtest:index:File" || !strings.HasSuffix(group.Parent, "pulumi:pulumi:Stack::e2e-app") {
		t.Fatalf("group = %+v", group)
	}
	for _, name := range []string{"a", "b", "c"} {
		r := byName[name]
		if r.Type != "stackdtest:index:File" || r.Parent != group.URN || r.ChangedBy != first || r.Drift != model.ResourceInSync {
			t.Errorf("%s = %+v, want a File under %s created by %s, in sync", name, r, group.URN, first)
		}
	}

	if err := os.WriteFile(filepath.Join(dir, "b.txt"), []byte("edited by hand"), 0o644); err != nil {
		t.Fatal(err)
	}
	in.waitStack("app", "drifted", time.Minute, driftState(spec.DriftDrifted))
	_, byName = in.resourcesByName(t, "app")
	for name, want := range map[string]string{"a": model.ResourceInSync, "b": model.ResourceDrifted, "c": model.ResourceInSync, "group": model.ResourceInSync} {
		if got := byName[name]; got.Drift != want {
			t.Errorf("%s: drift %q, want %q", name, got.Drift, want)
		}
	}
	if p := byName["b"].DriftProperties; strings.Join(p, ",") != "content" {
		t.Errorf("b's drifted properties = %v, want content", p)
	}

	// The CLI: describe says it all in words; logs prints the last
	// operation (a drift check), as the page does, or any update's.
	code, stdout, stderr := stackd(t, in.clientArgs("describe", "app")...)
	for _, want := range []string{"Health:", "Applied commit:", `"change" by test`, "Drift:", "Drifted", "Resources: 6",
		"stackdtest:index:File", "drifted: b"} {
		if code != exitOK || !strings.Contains(stdout, want) {
			t.Errorf("stackd describe (exit %d) lacks %q:\n%s%s", code, want, stdout, stderr)
		}
	}
	// Drift checks run every second: the last operation is one of them,
	// not the up that the stack's lastUpdate names.
	code, stdout, _ = stackd(t, in.clientArgs("logs", "app")...)
	if code != exitOK || !strings.Contains(stdout, "refreshing") || strings.Contains(stdout, "created") {
		t.Errorf("stackd logs app (exit %d) is not a drift check's log:\n%s", code, stdout)
	}
	if code, stdout, _ = stackd(t, in.clientArgs("logs", "app", "--update", first)...); code != exitOK || !strings.Contains(stdout, "+ 5 created") {
		t.Errorf("stackd logs app --update %s (exit %d):\n%s", first, code, stdout)
	}
	if code, _, stderr = stackd(t, in.clientArgs("logs", "app", "--update", "other-1")...); code != exitUsage {
		t.Errorf("stackd logs app --update other-1: exit %d %s", code, stderr)
	}

	dom := chromiumRun(t, chromium, "--dump-dom", in.url+"/stacks/app")
	for _, want := range []string{`class="resource-graph"`, `class="node node-drifted"`, `class="node node-in-sync"`,
		`<ul class="tree">`, "<summary>", ">drifted<", "changed: content", "<code>stackdtest:index:File</code> <strong>4</strong>"} {
		if !strings.Contains(dom, want) {
			t.Errorf("the stack page lacks %q", want)
		}
	}
	screenshotSized(t, chromium, in.url+"/stacks/app", "e2e-resources.png", "1400,2400")
}

// TestE2EPreviewNowWhilePaused: with the daemon paused and a new commit
// pushed, stackd diff (the API's "Preview now") shows what that commit
// would change, and the stack, its history, its resources and the file
// it deploys stay as they were; the page keeps the preview with its
// commit.
func TestE2EPreviewNowWhilePaused(t *testing.T) {
	t.Parallel()
	r := newRepo(t)
	r.commit(map[string]string{"Pulumi.yaml": program("v1")})
	out := filepath.Join(outDir(t), "note.txt")
	in := startDaemon(t, "stacks:\n"+stackYAML("app", r, pathConfig(out)), "")
	in.waitStack("app", "deployed", time.Minute, isReady)
	if code, stdout, stderr := stackd(t, in.clientArgs("pause")...); code != exitOK {
		t.Fatalf("pause: exit %d\n%s%s", code, stdout, stderr)
	}
	before := in.stack("app")
	resources, _ := in.resourcesByName(t, "app")
	updates := len(in.updates("app"))
	second := r.commit(map[string]string{"Pulumi.yaml": program("v2")})

	code, stdout, stderr := stackd(t, in.clientArgs("diff", "app")...)
	if code != exitOK {
		t.Fatalf("diff: exit %d\n%s%s", code, stdout, stderr)
	}
	for _, want := range []string{"preview of app at " + second[:12], "succeeded", "1 update", "stackdtest:index:File::note", `~ content: "hello v1" => "hello v2"`} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stackd diff lacks %q:\n%s", want, stdout)
		}
	}
	after := in.stack("app")
	if after.Status.LastUpdate.Name != before.Status.LastUpdate.Name || after.Status.CurrentUpdate != nil ||
		output(after, "content") != "hello v1" || len(in.updates("app")) != updates {
		t.Errorf("the preview touched the stack: last update %s, then %s; %d updates, then %d",
			before.Status.LastUpdate.Name, after.Status.LastUpdate.Name, updates, len(in.updates("app")))
	}
	if again, _ := in.resourcesByName(t, "app"); again.Update != resources.Update || len(again.Resources) != len(resources.Resources) {
		t.Errorf("the preview changed the resources: %+v, then %+v", resources, again)
	}
	if got := readFile(t, out); got != "hello v1" {
		t.Errorf("the preview changed the file to %q", got)
	}
	_, page := in.get("/stacks/app", nil)
	for _, want := range []string{`<section id="preview"`, `<code title="` + second + `">`, "hello v2"} {
		if !strings.Contains(string(page), want) {
			t.Errorf("the stack page lacks %q", want)
		}
	}
	if code, stdout, _ := stackd(t, in.clientArgs("diff", "app", "--last")...); code != exitOK || !strings.Contains(stdout, second[:12]) {
		t.Errorf("diff --last: exit %d\n%s", code, stdout)
	}
}
