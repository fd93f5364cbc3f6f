package main

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stackd/stackd/daemon/model"
)

// gitops is the trunk-based workflow of configs/gitops with two real
// repositories: one of programs (stacks/network, stacks/app) with main,
// release and feature branches, and one of Stack manifests with a
// directory per environment, which the daemon reads as its config.
type gitops struct {
	t         *testing.T
	programs  *repo
	manifests *repo
	out       string // where the stacks' Files are written
	in        *instance
}

func newGitops(t *testing.T) *gitops {
	g := &gitops{t: t, programs: newRepo(t), manifests: newRepo(t), out: outDir(t)}
	return g
}

// file is where stack name writes its File.
func (g *gitops) file(name string) string { return filepath.Join(g.out, name+".txt") }

// manifest is a PKO Stack manifest of the programs repository; ref is a
// branch, or "commit: <sha>" for a pinned commit.
func (g *gitops) manifest(name, wave, dir, ref, extra string) string {
	track := "branch: " + ref
	if strings.HasPrefix(ref, "commit: ") {
		track = ref
	}
	return fmt.Sprintf(`apiVersion: pulumi.com/v1
kind: Stack
metadata:
  name: %s
  annotations:
    argocd.argoproj.io/sync-wave: "%s"
    link.argocd.argoproj.io/external-link: https://console.example/%s
spec:
  projectRepo: file://%s
  repoDir: stacks/%s
  stack: %s
  %s
  resyncFrequencySeconds: 1
  config:
    path: %s
%s`, name, wave, name, g.programs.dir, dir, name, track, g.file(name), extra)
}

// start runs the daemon on the manifests repository's environments
// directory at main.
func (g *gitops) start() {
	src := "git+file://" + g.manifests.dir + "//environments?ref=main"
	g.in = startDaemonWith(g.t, "", "", func(f *runFlags) { f.config, f.repoRoots = stringsFlag{src}, g.repoRoot() })
}

// repoRoot is the --repo-root that lets the manifests, a config from Git,
// name the programs repository, a local one.
func (g *gitops) repoRoot() stringsFlag { return stringsFlag{filepath.Dir(g.programs.dir)} }

// config reads GET /api/v1/config.
func (g *gitops) config() model.ConfigStatus {
	var st model.ConfigStatus
	if code, body := g.in.get("/api/v1/config", &st); code != http.StatusOK {
		g.t.Fatalf("GET /api/v1/config: %d %s", code, body)
	}
	return st
}

// waitConfig polls the config status until cond holds.
func (g *gitops) waitConfig(what string, cond func(model.ConfigStatus) bool) model.ConfigStatus {
	g.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		st := g.config()
		if cond(st) {
			return st
		}
		if time.Now().After(deadline) {
			g.t.Fatalf("timed out waiting for %s; config status: %+v", what, st)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (g *gitops) deployedAt(name, commit string) func(model.StackView) bool {
	return func(v model.StackView) bool {
		return isReady(v) && v.Status.LastUpdate != nil && v.Status.LastUpdate.LastSuccessfulCommit == commit
	}
}

// firstUp is the stack's first successful up.
func (g *gitops) firstUp(name string) model.Update {
	for _, u := range g.in.updates(name) {
		if u.Type == model.UpdateUp && u.State == model.UpdateSucceeded {
			return u
		}
	}
	g.t.Fatalf("%s has no successful up", name)
	return model.Update{}
}

func TestE2EGitOpsTrunkBased(t *testing.T) {
	t.Parallel()
	toolchainBin(t)
	g := newGitops(t)
	v1 := g.programs.commit(map[string]string{"stacks/network/Pulumi.yaml": program("v1"), "stacks/app/Pulumi.yaml": program("v1")})
	g.programs.git("branch", "release")
	g.programs.git("checkout", "-q", "-b", "feature/cache")
	g.programs.commit(map[string]string{"stacks/app/Pulumi.yaml": program("cache")})
	g.programs.git("checkout", "-q", "main")

	g.manifests.commit(map[string]string{
		"README.md":                            "manifests",
		"environments/staging/network.yaml":    g.manifest("staging-network", "1", "network", "main", ""),
		"environments/staging/app.yaml":        g.manifest("staging-app", "2", "app", "main", ""),
		"environments/production/network.yaml": g.manifest("production-network", "1", "network", "commit: "+v1, ""),
		"environments/production/app.yaml":     g.manifest("production-app", "2", "app", "release", ""),
		"environments/preview/app.yaml":        g.manifest("preview-app", "1", "app", "feature/cache", "  preview: true\n"),
	})
	g.start()

	// Committed manifests deploy, wave by wave.
	for _, name := range []string{"staging-network", "staging-app", "production-network", "production-app"} {
		g.in.waitStack(name, "first deploy", 2*time.Minute, g.deployedAt(name, v1))
		if got := readFile(t, g.file(name)); got != "hello v1" {
			t.Fatalf("%s wrote %q", name, got)
		}
	}
	for _, env := range []string{"staging", "production"} {
		net, app := g.firstUp(env+"-network"), g.firstUp(env+"-app")
		if app.StartTime.Before(net.EndTime) {
			t.Fatalf("%s: wave 2 started at %v, before wave 1 was Ready at %v", env, app.StartTime, net.EndTime)
		}
		t.Logf("%s: wave 1 ready at %v, wave 2 started %v later", env, net.EndTime.Format(time.StampMilli), app.StartTime.Sub(net.EndTime))
	}
	preview := g.in.waitStack("preview-app", "the preview", time.Minute, isReady)
	if preview.Status.LastUpdate.Type != model.UpdatePreview || readFile(t, g.file("preview-app")) != "" {
		t.Fatalf("the preview stack changed something: %+v", preview.Status.LastUpdate)
	}
	if v := g.in.stack("staging-app"); v.ExternalLink != "https://console.example/staging-app" || v.Status.Health.Status != model.HealthHealthy {
		t.Fatalf("staging-app: link %q health %+v", v.ExternalLink, v.Status.Health)
	}
	st := g.waitConfig("a healthy config", func(st model.ConfigStatus) bool { return st.Health.Status == model.HealthHealthy })
	if src := st.Sources[0]; src.Commit != g.manifests.git("rev-parse", "HEAD") || src.Stacks != 5 {
		t.Fatalf("source status = %+v", src)
	}

	// A new manifest deploys; a config change re-applies.
	g.manifests.commit(map[string]string{
		"environments/staging/cache.yaml": g.manifest("staging-cache", "3", "network", "main", "  destroyOnFinalize: true\n"),
		"environments/staging/app.yaml":   g.manifest("staging-app", "2", "app", "main", "    greeting: bonjour\n"),
	})
	g.in.waitStack("staging-cache", "the new manifest", time.Minute, g.deployedAt("staging-cache", v1))
	g.in.waitStack("staging-app", "the config change", time.Minute, func(v model.StackView) bool {
		return isReady(v) && output(v, "content") == "bonjour v1"
	})

	// Promotion: main moves staging; release and the pinned commit move
	// production.
	v2 := g.programs.commit(map[string]string{"stacks/network/Pulumi.yaml": program("v2"), "stacks/app/Pulumi.yaml": program("v2")})
	g.in.waitStack("staging-app", "v2 on staging", time.Minute, g.deployedAt("staging-app", v2))
	if v := g.in.stack("production-app"); v.Status.LastUpdate.LastSuccessfulCommit != v1 {
		t.Fatal("production moved before its promotion")
	}
	g.programs.git("branch", "-f", "release", "main")
	g.in.waitStack("production-app", "release fast-forwarded", time.Minute, g.deployedAt("production-app", v2))
	g.manifests.commit(map[string]string{
		"environments/production/network.yaml": g.manifest("production-network", "1", "network", "commit: "+v2, ""),
	})
	g.in.waitStack("production-network", "the pinned commit changed", time.Minute, g.deployedAt("production-network", v2))
	if got := readFile(t, g.file("production-network")); got != "hello v2" {
		t.Fatalf("production-network wrote %q", got)
	}

	// A broken document keeps the config in force and reports the commit
	// and the error.
	good := g.manifests.git("rev-parse", "HEAD")
	broken := g.manifests.commit(map[string]string{"environments/staging/cache.yaml": "kind: Stack\nmetadata: {name: [\n"})
	st = g.waitConfig("the broken commit", func(st model.ConfigStatus) bool { return st.Sources[0].LatestCommit == broken && st.Error != "" })
	src := st.Sources[0]
	if src.Commit != good || src.Health.Status != model.HealthDegraded ||
		!strings.Contains(src.Error, "file://"+g.manifests.dir+"//environments/staging/cache.yaml:") {
		t.Fatalf("after a broken commit, source = %+v", src)
	}
	if v := g.in.stack("staging-cache"); v.Removed || !isReady(v) {
		t.Fatalf("the broken commit touched staging-cache: %+v", v.Status)
	}

	// Deleting manifests: destroyOnFinalize decides.
	g.manifests.git("rm", "-q", "environments/staging/cache.yaml", "environments/production/app.yaml")
	g.manifests.git("commit", "-q", "-m", "remove cache and production app")
	waitGone(t, g.in, "staging-cache")
	waitGone(t, g.in, "production-app")
	if got := readFile(t, g.file("staging-cache")); got != "" {
		t.Fatalf("staging-cache's File survived its destroy: %q", got)
	}
	if got := readFile(t, g.file("production-app")); got != "hello v2" {
		t.Fatalf("production-app's File was touched without destroyOnFinalize: %q", got)
	}

	// Deleting every manifest is refused by the mass-removal guard.
	g.manifests.git("rm", "-q", "-r", "environments")
	g.manifests.git("commit", "-q", "-m", "delete everything")
	emptied := g.manifests.git("rev-parse", "HEAD")
	st = g.waitConfig("the emptying commit refused", func(st model.ConfigStatus) bool {
		return st.Sources[0].LatestCommit == emptied && strings.Contains(st.Error, "removes 4 of the 4 stacks")
	})
	if v := g.in.stack("staging-network"); v.Removed {
		t.Fatal("the emptying commit was applied")
	}

	// The history names every revision, applied or not.
	var page struct{ Revisions []model.ConfigRevision }
	if code, body := g.in.get("/api/v1/config/revisions", &page); code != http.StatusOK {
		t.Fatalf("GET revisions: %d %s", code, body)
	}
	var got []string
	for _, r := range page.Revisions {
		got = append(got, fmt.Sprintf("%s applied=%v +%v ~%v -%v", r.Sources[0].Commit[:7], r.Applied, r.Added, r.Changed, r.Removed))
	}
	t.Logf("revisions:\n%s", strings.Join(got, "\n"))
	if len(page.Revisions) != 6 || page.Revisions[0].Applied || page.Revisions[0].Sources[0].Commit != emptied ||
		strings.Join(page.Revisions[1].Removed, ",") != "production-app,staging-cache" ||
		strings.Join(page.Revisions[5].Added, ",") != "preview-app,production-app,production-network,staging-app,staging-network" {
		t.Fatalf("unexpected revisions:\n%s", strings.Join(got, "\n"))
	}
}

// waitGone waits until the stack is no longer known.
func waitGone(t *testing.T, in *instance, name string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		code, body, err := in.tryGet("/api/v1/stacks/"+name, nil)
		if err == nil && code == http.StatusNotFound {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("stack %s is still there: %d %s", name, code, body)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestE2EGitOpsWebhook: a push webhook naming the manifests repository
// applies its new commit at once, long before the polling period.
func TestE2EGitOpsWebhook(t *testing.T) {
	t.Parallel()
	toolchainBin(t)
	g := newGitops(t)
	v1 := g.programs.commit(map[string]string{"stacks/app/Pulumi.yaml": program("v1")})
	g.manifests.commit(map[string]string{"environments/staging/app.yaml": g.manifest("app", "0", "app", "main", "")})
	hookFile := filepath.Join(t.TempDir(), "hook")
	const hookSecret = "hook-secret-gitops"
	if err := os.WriteFile(hookFile, []byte(hookSecret), 0o600); err != nil {
		t.Fatal(err)
	}
	src := "git+file://" + g.manifests.dir + "//environments?ref=main"
	g.in = startDaemonWith(t, "", "", func(f *runFlags) {
		f.config, f.pollInterval, f.webhookFile, f.repoRoots = stringsFlag{src}, 10*time.Minute, hookFile, g.repoRoot()
	})
	g.in.waitStack("app", "first deploy", time.Minute, g.deployedAt("app", v1))

	commit := g.manifests.commit(map[string]string{"environments/staging/db.yaml": g.manifest("db", "0", "app", "main", "")})
	payload := []byte(fmt.Sprintf(`{"ref":"refs/heads/main","after":%q,"repository":{"clone_url":%q}}`, commit, "file://"+g.manifests.dir))
	mac := hmac.New(sha256.New, []byte(hookSecret))
	mac.Write(payload)
	start := time.Now()
	code := g.in.post("/api/v1/webhooks/git", payload, map[string]string{"X-GitHub-Event": "push",
		"Content-Type": "application/json", "X-Hub-Signature-256": "sha256=" + hex.EncodeToString(mac.Sum(nil))})
	if code != http.StatusAccepted {
		t.Fatalf("webhook: %d", code)
	}
	g.waitConfig("the pushed commit in force", func(st model.ConfigStatus) bool { return st.Sources[0].Commit == commit })
	t.Logf("push-to-config-applied latency: %v (polling period 10m)", time.Since(start).Round(time.Millisecond))
	g.in.waitStack("db", "the new stack", time.Minute, g.deployedAt("db", v1))
	t.Logf("push-to-new-stack-deployed: %v", time.Since(start).Round(time.Millisecond))
}
