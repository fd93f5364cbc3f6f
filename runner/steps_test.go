package runner

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stackd/stackd/daemon/model"
)

// previewLog is the shape of the resource pre-events CLI v3.250.0 writes
// for a preview: a same step, an update with a secret input and an
// unknown one, a delete.
const previewLog = `{"sequence":1,"timestamp":1,"resourcePreEvent":{"metadata":{"op":"same","urn":"urn:pulumi:dev::p::pulumi:pulumi:Stack::p-dev","type":"pulumi:pulumi:Stack","old":null,"new":null,"detailedDiff":null,"provider":""},"planning":true}}
{"sequence":2,"timestamp":1,"resourcePreEvent":{"metadata":{"op":"update","urn":"urn:pulumi:dev::p::stackdtest:index:File::a","type":"stackdtest:index:File","old":{"type":"stackdtest:index:File","urn":"u","id":"x","parent":"","provider":"","inputs":{"path":"a.txt","size":12345678901234567890,"content":{"4dabf18193072939515e22adb298388d":"1b47061264138c4ac30d75fd1eb44270","ciphertext":"[secret]"}},"outputs":{}},"new":{"type":"stackdtest:index:File","urn":"u","id":"x","parent":"","provider":"","inputs":{"path":"a.txt","content":"04da6b54-80e4-46f7-96ec-b56ff0331ba9","tags":[{"4dabf18193072939515e22adb298388d":"1b47061264138c4ac30d75fd1eb44270","ciphertext":"[secret]"}]},"outputs":{}},"diffs":["content"],"detailedDiff":{},"provider":""},"planning":true}}
{"sequence":3,"timestamp":1,"resourcePreEvent":{"metadata":{"op":"delete","urn":"urn:pulumi:dev::p::stackdtest:index:File::b","type":"stackdtest:index:File","old":{"type":"stackdtest:index:File","urn":"u","id":"y","parent":"","provider":"","inputs":{"path":"b.txt"},"outputs":{}},"new":null,"detailedDiff":null,"provider":""},"planning":true}}
`

func TestReadEventsSteps(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.json")
	if err := os.WriteFile(path, []byte(previewLog), 0o600); err != nil {
		t.Fatal(err)
	}
	ev, err := readEvents(path)
	if err != nil {
		t.Fatal(err)
	}
	got, err := json.Marshal(ev.steps)
	if err != nil {
		t.Fatal(err)
	}
	want := `[{"op":"update","urn":"urn:pulumi:dev::p::stackdtest:index:File::a","type":"stackdtest:index:File",` +
		`"old":{"content":"[secret]","path":"a.txt","size":12345678901234567890},` +
		`"new":{"content":"[unknown]","path":"a.txt","tags":["[secret]"]},"diffs":["content"]},` +
		`{"op":"delete","urn":"urn:pulumi:dev::p::stackdtest:index:File::b","type":"stackdtest:index:File","old":{"path":"b.txt"}}]`
	if string(got) != want {
		t.Errorf("steps\n got %s\nwant %s", got, want)
	}
}

func TestCleanSteps(t *testing.T) {
	steps := []model.Step{{Op: "create", New: map[string]any{"env": "pw=hunter22", "list": []any{"hunter22"}}}}
	got := cleanSteps(steps, func(s string) string { return strings.ReplaceAll(s, "hunter22", "[secret]") })
	b, _ := json.Marshal(got)
	if want := `[{"op":"create","urn":"","type":"","new":{"env":"pw=[secret]","list":["[secret]"]}}]`; string(b) != want {
		t.Errorf("cleaned %s, want %s", b, want)
	}
}

// twoFiles is a program of two stackdtest:index:File resources: note,
// whose content is plain config, and key, whose content is the secret
// config value token. Without keep, note is left out.
func twoFiles(keep bool) string {
	p := `name: runnertest
runtime: yaml
configuration:
  path:
    type: String
  content:
    type: String
  token:
    type: String
resources:
  key:
    type: stackdtest:index:File
    properties:
      path: ${path}.key
      content: ${token}
`
	if keep {
		p += `  note:
    type: stackdtest:index:File
    properties:
      path: ${path}
      content: ${content}
`
	}
	return p
}

// TestRunPreviewSteps previews with the real CLI and the test provider: a
// preview's result lists the steps that change something, with their
// inputs, secrets masked; "same" steps are left out; other operations
// have no steps.
func TestRunPreviewSteps(t *testing.T) {
	h := newHarness(t, twoFiles(true))
	ws := h.workspace("one", secretOne)
	preview := model.Operation{Workspace: ws, Type: model.UpdatePreview}

	res := h.run(preview)
	creates := map[string]model.Step{}
	for _, s := range res.Steps {
		if s.Op != "create" {
			t.Errorf("first preview step %+v, want only creates", s)
		}
		creates[s.Type+" "+s.URN[strings.LastIndex(s.URN, "::")+2:]] = s
	}
	note, key := creates["stackdtest:index:File note"], creates["stackdtest:index:File key"]
	if note.New["content"] != "one" || note.New["path"] != h.file || note.Old != nil {
		t.Errorf("note's create %+v, want content one at %s", note, h.file)
	}
	if key.New["content"] != "[secret]" {
		t.Errorf("key's create %+v, want a secret content", key)
	}
	if _, ok := creates["pulumi:pulumi:Stack runnertest-dev"]; !ok {
		t.Errorf("first preview steps %v, want the stack's create", creates)
	}

	if res = h.run(model.Operation{Workspace: ws, Type: model.UpdateUp}); res.Steps != nil {
		t.Errorf("up result has steps %+v", res.Steps)
	}
	if res = h.run(preview); len(res.Steps) != 0 {
		t.Errorf("a no-change preview has steps %+v", res.Steps)
	}

	// Remove note, change the secret: a delete and an update.
	h.writeProgram(twoFiles(false))
	preview.Workspace = h.workspace("one", secretTwo)
	res = h.run(preview)
	if len(res.Steps) != 2 {
		t.Fatalf("steps %+v, want an update of key and a delete of note", res.Steps)
	}
	byOp := map[string]model.Step{res.Steps[0].Op: res.Steps[0], res.Steps[1].Op: res.Steps[1]}
	upd, del := byOp["update"], byOp["delete"]
	if !strings.HasSuffix(upd.URN, "::key") || upd.Old["content"] != "[secret]" || upd.New["content"] != "[secret]" ||
		strings.Join(upd.Diffs, ",") != "content" {
		t.Errorf("update step %+v, want key's secret content changing", upd)
	}
	if !strings.HasSuffix(del.URN, "::note") || del.Type != "stackdtest:index:File" || del.Old["content"] != "one" || del.New != nil {
		t.Errorf("delete step %+v, want note's delete with its old inputs", del)
	}
	if got := h.onDisk(); got != "one" {
		t.Errorf("a preview changed the file to %q", got)
	}
	data, _ := json.Marshal(res.Steps)
	for _, s := range []string{secretOne, secretTwo} {
		if strings.Contains(string(data), s) {
			t.Errorf("steps hold a secret in clear: %s", data)
		}
	}
}
