package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stackd/stackd/daemon"
	"github.com/stackd/stackd/daemon/model"
)

// TestE2EFluxSource: a Stack with fluxSource and the Flux GitRepository it
// names, with a Secret of Flux's keys (username, password), as PKO's Flux
// example has them, deploys from a repository served over HTTP with
// those credentials; a new commit on the branch is applied.
func TestE2EFluxSource(t *testing.T) {
	t.Parallel()
	toolchainBin(t)
	r := newRepo(t)
	r.commit(map[string]string{"infra/app/Pulumi.yaml": "name: app\nruntime: yaml\noutputs:\n  v: v1\n", "README.md": "x"})
	r.git("tag", "v1.0.0")
	const token = "flux-token"
	url := gitHTTP(t, filepath.Dir(r.dir), token) + "/repo"
	config := fmt.Sprintf(`apiVersion: source.toolkit.fluxcd.io/v1
kind: GitRepository
metadata: {name: infra}
spec:
  interval: 1m
  url: %s
  ref: {branch: main}
  secretRef: {name: infra-git}
---
apiVersion: v1
kind: Secret
metadata: {name: infra-git}
stringData: {username: git, password: %s}
---
apiVersion: pulumi.com/v1
kind: Stack
metadata: {name: app}
spec:
  stack: app
  resyncFrequencySeconds: 1
  fluxSource:
    sourceRef: {apiVersion: source.toolkit.fluxcd.io/v1, kind: GitRepository, name: infra}
    dir: infra/app
---
apiVersion: source.toolkit.fluxcd.io/v1beta2
kind: GitRepository
metadata: {name: releases}
spec:
  url: %s
  ref: {semver: ">=1.0.0 <2.0.0"}
  secretRef: {name: infra-git}
---
apiVersion: pulumi.com/v1
kind: Stack
metadata: {name: released}
spec:
  stack: released
  resyncFrequencySeconds: 1
  fluxSource:
    sourceRef: {apiVersion: source.toolkit.fluxcd.io/v1beta2, kind: GitRepository, name: releases}
    dir: infra/app
`, url, token, url)
	in := startDaemon(t, config, "")
	in.waitStack("app", "deployed", 2*time.Minute, isReady)
	in.waitStack("released", "v1.0.0 deployed", 2*time.Minute, func(v model.StackView) bool { return isReady(v) && output(v, "v") == "v1" })
	r.commit(map[string]string{"infra/app/Pulumi.yaml": "name: app\nruntime: yaml\noutputs:\n  v: v2\n"})
	v := in.waitStack("app", "the new commit deployed", time.Minute, func(v model.StackView) bool { return isReady(v) && output(v, "v") == "v2" })
	if v.Tracking != url+"@main" {
		t.Errorf("tracking %q", v.Tracking)
	}
	// The semver stack follows releases only: a new commit on main moves
	// nothing; a tag in the range does, a tag beyond it does not.
	if v := in.waitStack("released", "still at v1.0.0", time.Minute, isReady); output(v, "v") != "v1" {
		t.Fatalf("the semver stack followed main: %v", v.Status.Outputs)
	}
	r.git("tag", "v1.1.0")
	in.waitStack("released", "v1.1.0 deployed", time.Minute, func(v model.StackView) bool { return isReady(v) && output(v, "v") == "v2" })
	r.commit(map[string]string{"infra/app/Pulumi.yaml": "name: app\nruntime: yaml\noutputs:\n  v: v3\n"})
	r.git("tag", "v2.0.0")
	time.Sleep(3 * time.Second)
	if v := in.waitStack("released", "still at v1.1.0", time.Minute, isReady); output(v, "v") != "v2" {
		t.Fatalf("the semver stack took v2.0.0, beyond its range: %v", v.Status.Outputs)
	}
}

// TestE2EDestroyNeverDeployed: a stack with destroyOnFinalize that stackd
// never deployed (its prerequisite never succeeded) is destroyed when it
// leaves the config, as PKO does: here it exists in the backend from
// before stackd, with a resource, which goes. One that does not exist in
// the backend is removed as done.
func TestE2EDestroyNeverDeployed(t *testing.T) {
	t.Parallel()
	bin := toolchainBin(t)
	r := newRepo(t)
	r.commit(map[string]string{"Pulumi.yaml": program("v1")})
	dir := t.TempDir()
	backend, note := "file://"+filepath.Join(dir, "state"), filepath.Join(outDir(t), "note.txt")
	if err := os.MkdirAll(filepath.Join(dir, "state"), 0o700); err != nil {
		t.Fatal(err)
	}
	// Deployed before stackd, with the pulumi CLI alone.
	env := []string{"PATH=" + bin + ":/usr/bin:/bin", "HOME=" + dir, "PULUMI_HOME=" + filepath.Join(dir, "home"),
		"PULUMI_BACKEND_URL=" + backend, "PULUMI_CONFIG_PASSPHRASE=before-stackd", "PULUMI_SKIP_UPDATE_CHECK=true"}
	for _, args := range [][]string{{"stack", "init", "legacy"}, {"config", "set", "path", note}, {"up", "--yes", "--skip-preview"}} {
		cmd := exec.Command(filepath.Join(bin, "pulumi"), append(args, "--non-interactive")...)
		cmd.Dir, cmd.Env = r.dir, env
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("pulumi %v: %v\n%s", args, err, out)
		}
	}
	if got := readFile(t, note); got != "hello v1" {
		t.Fatalf("note = %q", got)
	}
	blocker := "  - name: blocker\n    stack: blocker\n    projectRepo: file://" + r.dir + "\n    branch: no-such-branch\n"
	stack := func(name string) string {
		return fmt.Sprintf(`  - name: %s
    stack: %s
    projectRepo: file://%s
    branch: main
    backend: %s
    destroyOnFinalize: true
    config: {path: %s}
    envRefs:
      PULUMI_CONFIG_PASSPHRASE: {type: Literal, literal: {value: before-stackd}}
    prerequisites: [{name: blocker}]
`, name, name, r.dir, backend, note)
	}
	in := startDaemon(t, "stacks:\n"+blocker+stack("legacy")+stack("ghost"), "")
	for _, name := range []string{"legacy", "ghost"} {
		in.waitStack(name, "waiting for its prerequisite", time.Minute, func(v model.StackView) bool {
			c := v.Status.Condition(model.ConditionReconciling)
			return c != nil && c.Reason == model.ReasonPrerequisiteNotSatisfied
		})
	}
	if n := len(in.updates("legacy")) + len(in.updates("ghost")); n != 0 {
		t.Fatalf("%d updates before the removal", n)
	}
	in.reload("stacks:\n" + blocker)
	waitFor(t, "both removed", 2*time.Minute, func() bool {
		_, err := in.app.d.Stack("legacy")
		_, err2 := in.app.d.Stack("ghost")
		return errors.Is(err, daemon.ErrUnknownStack) && errors.Is(err2, daemon.ErrUnknownStack)
	})
	if _, err := os.Stat(note); !os.IsNotExist(err) {
		t.Fatalf("the resource of the stack deployed before stackd is still there: %v", err)
	}
	// The one that never existed: a destroy with nothing to do, done.
	for _, name := range []string{"legacy", "ghost"} {
		if !strings.Contains(in.logs.String(), "stack="+name+" type=destroy state=succeeded") {
			t.Errorf("%s: no successful destroy in the log", name)
		}
	}
}
