package main

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/stackd/stackd/daemon"
)

// TestE2EFluxSource: a Stack with fluxSource and the Flux GitRepository it
// names, with a Secret of Flux's keys (username, password), as PKO's Flux
// example has them, deploys from a repository served over HTTP with
// those credentials; a new commit on the branch is applied.
func TestE2EFluxSource(t *testing.T) {
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
	in.waitStack("released", "v1.0.0 deployed", 2*time.Minute, func(v daemon.StackView) bool { return isReady(v) && output(v, "v") == "v1" })
	r.commit(map[string]string{"infra/app/Pulumi.yaml": "name: app\nruntime: yaml\noutputs:\n  v: v2\n"})
	v := in.waitStack("app", "the new commit deployed", time.Minute, func(v daemon.StackView) bool { return isReady(v) && output(v, "v") == "v2" })
	if v.Tracking != url+"@main" {
		t.Errorf("tracking %q", v.Tracking)
	}
	// The semver stack follows releases only: a new commit on main moves
	// nothing; a tag in the range does, a tag beyond it does not.
	if v := in.waitStack("released", "still at v1.0.0", time.Minute, isReady); output(v, "v") != "v1" {
		t.Fatalf("the semver stack followed main: %v", v.Status.Outputs)
	}
	r.git("tag", "v1.1.0")
	in.waitStack("released", "v1.1.0 deployed", time.Minute, func(v daemon.StackView) bool { return isReady(v) && output(v, "v") == "v2" })
	r.commit(map[string]string{"infra/app/Pulumi.yaml": "name: app\nruntime: yaml\noutputs:\n  v: v3\n"})
	r.git("tag", "v2.0.0")
	time.Sleep(3 * time.Second)
	if v := in.waitStack("released", "still at v1.1.0", time.Minute, isReady); output(v, "v") != "v2" {
		t.Fatalf("the semver stack took v2.0.0, beyond its range: %v", v.Status.Outputs)
	}
}
