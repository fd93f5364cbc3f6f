package runner

import (
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fileProgram is a Pulumi YAML program with one stackdtest:index:File.
//
// With CLI v3.250.0 and pulumi-language-yaml v1.25.0 the program needs
// nothing but the type token: no `packages:` block, no `options.version`.
// The language host asks the plugin found on PATH (an "ambient" plugin,
// bin/pulumi-resource-stackdtest) for its schema and checks the properties
// against it (a misspelt property fails with "Missing required property").
// The CLI warns "using pulumi-resource-stackdtest from $PATH at ..." on
// every run; an `options.version` other than the plugin's 0.1.0 only adds a
// warning, the ambient plugin is used anyway.
func fileProgram(path, content string) string {
	return `name: filetest
runtime: yaml
resources:
  note:
    type: stackdtest:index:File
    properties:
      path: ` + path + `
      content: ` + content + `
outputs:
  content: ${note.content}
`
}

// refreshPreview is the part of `pulumi refresh --preview-only --json` the
// test reads.
type refreshPreview struct {
	Steps []struct {
		Op           string `json:"op"`
		URN          string `json:"urn"`
		DetailedDiff map[string]struct {
			Kind string `json:"kind"`
		} `json:"detailedDiff"`
		NewState *struct {
			Outputs map[string]any `json:"outputs"`
		} `json:"newState"`
	} `json:"steps"`
	ChangeSummary map[string]int `json:"changeSummary"`
}

// fileStep returns the step of the File resource, failing the test when
// there is none.
func (r refreshPreview) fileStep(t *testing.T) (op string, diff []string, outputs map[string]any) {
	t.Helper()
	for _, s := range r.Steps {
		if strings.HasSuffix(s.URN, "::stackdtest:index:File::note") {
			for k, d := range s.DetailedDiff {
				diff = append(diff, k+":"+d.Kind)
			}
			if s.NewState != nil {
				outputs = s.NewState.Outputs
			}
			return s.Op, diff, outputs
		}
	}
	t.Fatalf("no step for the File resource in %+v", r)
	return "", nil, nil
}

// TestProviderFileLifecycle drives the test provider with the real CLI and
// YAML language host: create, update, drift seen by a refresh preview, drift
// repaired, a file deleted by hand, a replacement, destroy.
func TestProviderFileLifecycle(t *testing.T) {
	bin := toolchainBin(t)
	env := pulumiEnv(t, bin)
	project := t.TempDir()
	// A relative path: the provider runs in the program's directory.
	file := filepath.Join(project, "out", "note.txt")

	program := func(path, content string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(project, "Pulumi.yaml"), []byte(fileProgram(path, content)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// pulumi runs the CLI in the project and returns its standard output.
	pulumi := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(filepath.Join(bin, "pulumi"), append(args, "--non-interactive")...)
		cmd.Dir, cmd.Env = project, env
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("pulumi %s: %v\n%s%s", strings.Join(args, " "), err, stdout.Bytes(), stderr.Bytes())
		}
		return stdout.String()
	}
	onDisk := func(path string) string {
		t.Helper()
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return string(data)
	}
	// stateContent is the content output of the File in the stack's state.
	stateContent := func() string {
		t.Helper()
		var state struct {
			Deployment struct {
				Resources []struct {
					Type    string         `json:"type"`
					Outputs map[string]any `json:"outputs"`
				} `json:"resources"`
			} `json:"deployment"`
		}
		if err := json.Unmarshal([]byte(pulumi("stack", "export")), &state); err != nil {
			t.Fatal(err)
		}
		for _, r := range state.Deployment.Resources {
			if r.Type == "stackdtest:index:File" {
				s, _ := r.Outputs["content"].(string)
				return s
			}
		}
		t.Fatal("no stackdtest:index:File in the state")
		return ""
	}
	refreshPreview := func() refreshPreview {
		t.Helper()
		var r refreshPreview
		out := pulumi("refresh", "--preview-only", "--json")
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatalf("refresh --json: %v\n%s", err, out)
		}
		return r
	}

	// Create.
	program("out/note.txt", "one")
	pulumi("stack", "init", "dev")
	start := time.Now()
	pulumi("up", "--yes", "--skip-preview")
	t.Logf("pulumi up (create) took %v", time.Since(start))
	if got := onDisk(file); got != "one" {
		t.Fatalf("after create the file holds %q, want one", got)
	}
	if got := strings.TrimSpace(pulumi("stack", "output", "content")); got != "one" {
		t.Fatalf("output content = %q, want one", got)
	}

	// Update.
	program("out/note.txt", "two")
	pulumi("up", "--yes", "--skip-preview")
	if got := onDisk(file); got != "two" {
		t.Fatalf("after update the file holds %q, want two", got)
	}

	// Drift: a hand edit is an update in a refresh preview, which changes
	// neither the file nor the state.
	if err := os.WriteFile(file, []byte("by hand"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := refreshPreview()
	op, diff, outputs := r.fileStep(t)
	if op != "update" || strings.Join(diff, ",") != "content:update" || outputs["content"] != "by hand" {
		t.Fatalf("refresh preview of a hand edit: op %q, diff %v, new outputs %v; want update, content:update, content %q",
			op, diff, outputs, "by hand")
	}
	if r.ChangeSummary["update"] != 1 {
		t.Fatalf("refresh preview change summary %v, want 1 update", r.ChangeSummary)
	}
	if got := onDisk(file); got != "by hand" {
		t.Fatalf("a refresh preview changed the file to %q", got)
	}
	if got := stateContent(); got != "two" {
		t.Fatalf("a refresh preview changed the state's content to %q", got)
	}

	// Repair: refresh takes the drift into the state, up puts the program's
	// content back.
	pulumi("refresh", "--yes", "--skip-preview")
	if got := stateContent(); got != "by hand" {
		t.Fatalf("after refresh the state's content is %q, want %q", got, "by hand")
	}
	pulumi("up", "--yes", "--skip-preview")
	if got := onDisk(file); got != "two" {
		t.Fatalf("after refresh and up the file holds %q, want two", got)
	}

	// A file deleted by hand is a deleted resource in a refresh preview; up
	// with --refresh creates it again.
	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	r = refreshPreview()
	if op, _, _ := r.fileStep(t); op != "delete" || r.ChangeSummary["delete"] != 1 {
		t.Fatalf("refresh preview of a deleted file: op %q, change summary %v; want delete", op, r.ChangeSummary)
	}
	pulumi("up", "--yes", "--skip-preview", "--refresh")
	if got := onDisk(file); got != "two" {
		t.Fatalf("after up --refresh the file holds %q, want two", got)
	}

	// A new path replaces the resource: the old file goes, the new one comes.
	moved := filepath.Join(project, "moved", "note.txt")
	program("moved/note.txt", "two")
	out := pulumi("up", "--yes", "--skip-preview")
	if !strings.Contains(out, "replaced") {
		t.Fatalf("a new path did not replace the resource:\n%s", out)
	}
	if _, err := os.Stat(file); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("after the replacement the old file is still there (%v)", err)
	}
	if got := onDisk(moved); got != "two" {
		t.Fatalf("after the replacement the new file holds %q, want two", got)
	}

	// Destroy.
	pulumi("destroy", "--yes", "--skip-preview")
	if _, err := os.Stat(moved); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("after destroy the file is still there (%v)", err)
	}
}
