package runner

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stackd/stackd/daemon/model"
)

// withProviderWrapper makes h's project declare the test provider at
// ./prov (Pulumi.yaml plugins.providers), a shell script committed with
// the program that runs script, then the real provider: code of the
// committer's, run by the engine in every operation, beside it, as the
// operator allowed (--allow-project-plugins).
func withProviderWrapper(t *testing.T, h *harness, script string) {
	t.Helper()
	real := filepath.Join(toolchainBin(t), "pulumi-resource-stackdtest")
	dir := filepath.Join(h.project, "prov")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	wrapper := "#!/bin/sh\n" + script + "\nexec '" + real + "' \"$@\"\n"
	if err := os.WriteFile(filepath.Join(dir, "pulumi-resource-stackdtest"), []byte(wrapper), 0o755); err != nil {
		t.Fatal(err)
	}
	h.writeProgram(testProgram + "plugins:\n  providers:\n    - name: stackdtest\n      path: ./prov\n")
	h.r.opts.ProjectPlugins = true
}

// TestHostileLinksInWorkspace: a program leaves links in its stack's
// state directory, where the runner keeps files of its own: its config
// file and marker lead to files of the host (a YAML file holding another
// stack's secret), and its mirror of the shared provider leads to the
// shared plugin itself. The daemon, unconfined, must follow none of
// them: it read the YAML file and wrote it back where the program reads
// it, and replaced the shared provider with a link to itself, breaking
// every other stack.
func TestHostileLinksInWorkspace(t *testing.T) {
	h := newSandboxedHarness(t)
	victims := t.TempDir()
	yamlVictim, jsonVictim := filepath.Join(victims, "other.yaml"), filepath.Join(victims, "other.json")
	const canary = "VICTIM-SECRET-of-another-stack"
	mkfile(t, yamlVictim, "encryptionsalt: v1:abc\nconfig:\n  other:password: "+canary+"\n", 0o600)
	mkfile(t, jsonVictim, `{"identity": "`+canary+`"}`, 0o600)
	withProviderWrapper(t, h, `ws=$(dirname "$PULUMI_HOME")
data=$(dirname "$(dirname "$ws")")
ln -sfn '`+yamlVictim+`' "$ws/Pulumi.dev.yaml"
ln -sfn '`+jsonVictim+`' "$ws/stack.json"
mirror="$ws/pulumi-home/plugins/resource-stackdtest-v0.1.0"
rm -rf "$mirror" && ln -s "$data/pulumi-home/plugins/resource-stackdtest-v0.1.0" "$mirror"`)

	h.run(model.Operation{Workspace: h.workspace("one", "secret-token-1"), Type: model.UpdateUp})
	ws := filepath.Join(h.dataDir, "workspaces", "test")
	if fi, err := os.Lstat(filepath.Join(ws, "stack.json")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("the program planted no link: %v %v", fi, err)
	}
	// The next operation, with new config: the runner rewrites its
	// config file and marker, and mirrors the plugins again.
	_, err := h.try(model.Operation{Workspace: h.workspace("two", "secret-token-2"), Type: model.UpdateUp})
	if err != nil {
		t.Logf("the second up failed: %v", err)
	}

	shared := filepath.Join(h.dataDir, "pulumi-home", "plugins", "resource-stackdtest-v0.1.0", "pulumi-resource-stackdtest")
	if fi, err := os.Lstat(shared); err != nil || !fi.Mode().IsRegular() {
		t.Fatalf("the shared provider is no longer a regular file: %v %v", fi, err)
	}
	if same, err := sameContent(filepath.Join(toolchainBin(t), "pulumi-resource-stackdtest"), shared); err != nil || !same {
		t.Errorf("the shared provider changed: %v %v", same, err)
	}
	if found := filesContaining(t, h.dataDir, canary); len(found) > 0 {
		t.Errorf("the daemon copied a host file through a link into %v", found)
	}
	if got := readFileString(t, yamlVictim); !strings.Contains(got, canary) || !strings.HasPrefix(got, "encryptionsalt: v1:abc") {
		t.Errorf("the YAML file behind the link changed: %q", got)
	}
	if err != nil {
		t.Errorf("the stack's next operation failed on the links its program left: %v", err)
	}
}

// attackProgram is testProgram with commands run in every preview and
// update, as committed code of the program runs (stackdtest:index:run,
// as pulumi-command's local:run): they try to forge what the engine
// reports and to reach what is the engine's, and record in report what
// they managed ("forged …", "wrote …", "read …"), then "done".
func attackProgram(report string) string {
	script := `ws=$(dirname "$PULUMI_HOME"); [ "$(basename "$ws")" = program ] && ws=$(dirname "$ws")
data=$(dirname "$(dirname "$ws")")
for f in "$ws/events.json" "$ws/Pulumi.dev.yaml" "$ws/stack.json"; do
  if [ -e "$f" ] && mv "$f" "$f.moved" 2>/dev/null && : > "$f" 2>/dev/null; then echo "forged $f"; fi
done
for d in "$ws/plans" "$data"/backends/*/.pulumi; do
  if [ -d "$d" ] && touch "$d/forged" 2>/dev/null; then echo "wrote $d"; fi
done
for p in "$data"/passphrases/* "$data/passphrase" "$data/digest.key"; do
  if [ -f "$p" ] && cat "$p" >/dev/null 2>&1; then echo "read $p"; fi
done
echo done`
	return strings.Replace(testProgram, "resources:\n", `variables:
  attack:
    fn::invoke:
      function: stackdtest:index:run
      arguments:
        command: |
`+indent("{\n"+script+"\n} >> '"+report+"'", "          ")+`
      return: output
resources:
`, 1)
}

// indent prefixes every line of s with prefix.
func indent(s, prefix string) string {
	return prefix + strings.ReplaceAll(s, "\n", "\n"+prefix) + "\n"
}

// TestHostileProgramForgesNothing: committed code of the program, run in
// a preview that saves a plan (what approval and policies judge), tries
// to forge the engine's report (the review moved the event log aside and
// left an empty one: the change was judged to change nothing and applied
// unapproved), to write the stack's config, marker, plans and state, and
// to read the passphrases. Under the default sandbox none of it may
// succeed, and the preview still reports the change.
func TestHostileProgramForgesNothing(t *testing.T) {
	h := newSandboxedHarness(t)
	report := filepath.Join(filepath.Dir(h.file), "attack.log")
	h.writeProgram(attackProgram(report))
	h.run(model.Operation{Workspace: h.workspace("one", "secret-token-1"), Type: model.UpdateUp})
	if err := os.Remove(report); err != nil {
		t.Fatalf("the program's commands ran not: %v\n%s", err, h.log.String())
	}

	res := h.run(model.Operation{Workspace: h.workspace("two", "secret-token-1"), Type: model.UpdatePreview, SavePlan: true})
	got := readFileString(t, report)
	if !strings.Contains(got, "done") {
		t.Fatalf("the program's commands did not finish: %q", got)
	}
	for _, line := range strings.Split(strings.TrimSpace(got), "\n") {
		if line != "done" {
			t.Errorf("the program %s", line)
		}
	}
	if !slices.ContainsFunc(res.Steps, func(s model.Step) bool { return strings.HasSuffix(s.URN, "::note") && s.Op == "update" }) {
		t.Errorf("the preview reports no update of the File: steps %+v, changes %v", res.Steps, res.Changes)
	}
}
