package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stackd/stackd/daemon/model"
)

// TestE2EProgramEnvironment: what a program's environment holds. A
// --pass-env glob passes the daemon's matching variables and no others;
// --env-file sets values for every stack; HOME is the program's own, in the data dir. In the
// update log, plain values stay readable and secret-named ones are
// hidden.
func TestE2EProgramEnvironment(t *testing.T) {
	t.Setenv("STACKD_TEST_PASSED", "passed-value")
	t.Setenv("OTHER_TEST_VAR", "other-value")
	t.Setenv("STACKD_TEST_REGION", "eu-west-9")
	envFile := filepath.Join(t.TempDir(), "env")
	if err := os.WriteFile(envFile, []byte("# set for every stack\nFROM_FILE=file-value\nexport FILE_TOKEN=tok-CANARY-77\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	getEnv := func(name string) string {
		return "    fn::invoke:\n      function: stackdtest:index:getEnv\n      arguments: {name: " + name + "}\n      return: value\n"
	}
	r := newRepo(t)
	r.commit(map[string]string{"Pulumi.yaml": "name: env\nruntime: yaml\noutputs:\n" +
		"  passed:\n" + getEnv("STACKD_TEST_PASSED") + "  other:\n" + getEnv("OTHER_TEST_VAR") +
		"  file:\n" + getEnv("FROM_FILE") + "  home:\n" + getEnv("HOME") +
		"  region:\n" + getEnv("REGION") + "  token:\n" + getEnv("FILE_TOKEN")})
	dataDir := filepath.Join(t.TempDir(), "data")
	in := startDaemonWith(t, "stacks:\n"+stackYAML("app", r, "    envRefs:\n      REGION: {type: Env, env: {name: STACKD_TEST_REGION}}\n"), dataDir,
		func(f *runFlags) {
			_ = f.passEnv.Set("STACKD_TEST_*")
			_ = f.envFiles.Set(envFile)
		})
	v := in.waitStack("app", "deployed", time.Minute, isReady)
	for name, want := range map[string]string{
		"passed": "passed-value", "other": "", "file": "file-value",
		"home": filepath.Join(dataDir, "workspaces", "app", "program", "home"), "region": "eu-west-9", "token": "[redacted]",
	} {
		if got := output(v, name); got != want {
			t.Errorf("output %s = %q, want %q", name, got, want)
		}
	}
	us := in.updates("app")
	_, log := in.get("/api/v1/updates/"+us[len(us)-1].ID+"/log", nil)
	if !strings.Contains(string(log), "eu-west-9") || strings.Contains(string(log), "CANARY") {
		t.Errorf("the log hides a plain value or shows a secret-named one:\n%s", log)
	}
}

// TestE2EInstallWhenDependenciesChange: pulumi install runs before the
// update when the program's dependency files changed, once, with its
// output in the update log; not for the next commit that leaves them;
// and its failure (here its time limit) fails the update with its output.
func TestE2EInstallWhenDependenciesChange(t *testing.T) {
	t.Parallel()
	r := newRepo(t)
	prog := func(v string) string { return "name: deps\nruntime: yaml\noutputs:\n  v: " + v + "\n" }
	r.commit(map[string]string{"Pulumi.yaml": prog("one"), "requirements.txt": "pulumi>=3\n"})
	dataDir := filepath.Join(t.TempDir(), "data")
	config := "stacks:\n" + stackYAML("app", r, "")
	in := startDaemon(t, config, dataDir)
	in.waitStack("app", "deployed", time.Minute, func(v model.StackView) bool { return isReady(v) && output(v, "v") == "one" })
	logOf := func(in *instance, n int) string {
		us := in.updates("app")
		_, log := in.get("/api/v1/updates/"+us[n].ID+"/log", nil)
		return string(log)
	}
	if log := logOf(in, 0); !strings.Contains(log, "dependencies changed: pulumi install") {
		t.Fatalf("the first update did not install:\n%s", log)
	}
	// A commit that leaves Pulumi.yaml and the dependency files alone.
	second := r.commit(map[string]string{"README.md": "docs\n"})
	in.waitStack("app", "second commit", time.Minute, func(v model.StackView) bool {
		return isReady(v) && v.Status.LastUpdate.LastSuccessfulCommit == second
	})
	if log := logOf(in, 1); strings.Contains(log, "pulumi install") {
		t.Fatalf("an unchanged dependency file installed again:\n%s", log)
	}
	in.stop()

	r.commit(map[string]string{"Pulumi.yaml": prog("three"), "requirements.txt": "pulumi>=3\nrequests\n"})
	in = startDaemonWith(t, config, dataDir, func(f *runFlags) { f.installTimeout = time.Millisecond })
	v := in.waitStack("app", "the install failed", time.Minute, func(v model.StackView) bool {
		return v.Status.LastUpdate != nil && v.Status.LastUpdate.State == model.UpdateFailed
	})
	if msg := v.Status.LastUpdate.Message; !strings.Contains(msg, "pulumi install: timed out after 1ms") {
		t.Fatalf("message %q", msg)
	}
	if log := logOf(in, len(in.updates("app"))-1); !strings.Contains(log, "pulumi install") || !strings.Contains(log, "timed out") {
		t.Fatalf("the failed update's log:\n%s", log)
	}
}
