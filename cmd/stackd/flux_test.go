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
`, url, token)
	in := startDaemon(t, config, "")
	in.waitStack("app", "deployed", 2*time.Minute, isReady)
	r.commit(map[string]string{"infra/app/Pulumi.yaml": "name: app\nruntime: yaml\noutputs:\n  v: v2\n"})
	v := in.waitStack("app", "the new commit deployed", time.Minute, func(v daemon.StackView) bool { return isReady(v) && output(v, "v") == "v2" })
	if v.Tracking != url+"@main" {
		t.Errorf("tracking %q", v.Tracking)
	}
}
