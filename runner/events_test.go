package runner

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stackd/stackd/daemon/model"
)

// eventLog is an event log as CLI v3.250.0 writes it for a failed up,
// cut short in its last line.
const eventLog = `{"sequence":0,"timestamp":1,"diagnosticEvent":{"prefix":"warning: ","message":"using a plugin from $PATH\n","color":"never","severity":"warning"}}
{"sequence":1,"timestamp":1,"diagnosticEvent":{"message":"Warning: deprecated\n\n","color":"never","severity":"info#err"}}
{"sequence":2,"timestamp":1,"resOutputsEvent":{"metadata":{"op":"same","urn":"urn:pulumi:dev::p::pulumi:pulumi:Stack::p-dev","type":"pulumi:pulumi:Stack","old":null,"new":{"type":"pulumi:pulumi:Stack","urn":"urn:pulumi:dev::p::pulumi:pulumi:Stack::p-dev","id":"","parent":"","inputs":{},"outputs":{"n":12345678901234567890,"html":"<a&b>","nested":{"list":[1,{"4dabf18193072939515e22adb298388d":"1b47061264138c4ac30d75fd1eb44270","ciphertext":"[secret]"}]},"s":{"4dabf18193072939515e22adb298388d":"1b47061264138c4ac30d75fd1eb44270","ciphertext":"[secret]"}},"provider":""}}}}
{"sequence":3,"timestamp":1,"diagnosticEvent":{"urn":"urn:pulumi:dev::p::my:mod:Parent$stackdtest:index:File::note","prefix":"error: ","message":"mkdir /x: permission denied\n","color":"never","severity":"error"}}
{"sequence":4,"timestamp":1,"diagnosticEvent":{"prefix":"error: ","message":"update failed\n","color":"never","severity":"error"}}
{"sequence":5,"timestamp":1,"summaryEvent":{"maybeCorrupt":false,"durationSeconds":1,"resourceChanges":{"same":1,"update":1},"PolicyPacks":{},"isPreview":false,"result":"failed"}}
{"sequence":6,"timestamp":1,"cancelEv`

func TestReadEvents(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.json")
	if err := os.WriteFile(path, []byte(eventLog), 0o600); err != nil {
		t.Fatal(err)
	}
	ev, err := readEvents(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := changes(ev); got["same"] != 1 || got["update"] != 1 || len(got) != 2 {
		t.Errorf("changes %v", got)
	}
	want := map[string]string{
		"n":      "12345678901234567890",
		"html":   `"<a&b>"`,
		"nested": `{"list":[1,"[secret]"]}`,
		"s":      `"[secret]"`,
	}
	for k, v := range want {
		if got := string(ev.outputs[k]); got != v {
			t.Errorf("output %s = %s, want %s", k, got, v)
		}
	}
	if msg := ev.message("stderr"); msg != "stackdtest:index:File note: mkdir /x: permission denied" {
		t.Errorf("message %q", msg)
	}
	if ev, err := readEvents(filepath.Join(t.TempDir(), "none")); err != nil || ev.summary != nil {
		t.Errorf("a missing log: %+v, %v", ev, err)
	}
}

func TestEventsMessage(t *testing.T) {
	for _, c := range []struct {
		name string
		ev   events
		want string
	}{
		{"program stderr from the first error", events{programErr: []string{"Warning: x", "Error: boom", "  on line 3"}}, "Error: boom\n  on line 3"},
		{"generic engine error only", events{errors: []string{"update failed"}, programErr: []string{"Warning: x"}}, "error: locked\nsecond"},
		{"nothing at all", events{}, "error: locked\nsecond"},
	} {
		if got := c.ev.message("\n\nerror: locked\nsecond\n"); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
	if got := (&events{errors: []string{"update failed"}}).message(""); got != "update failed" {
		t.Errorf("generic error without stderr: %q", got)
	}
}

func TestOperationArgs(t *testing.T) {
	w := &workspace{Workspace: model.Workspace{Name: "n", Stack: "org/dev"}, configFile: "/c.yaml"}
	op := model.Operation{Refresh: true, Targets: []string{"urn:a"}, TargetDependents: true, Parallel: 4,
		Message: "m", ExpectNoChanges: true, Replace: []string{"urn:b"}, ContinueOnError: true, Remove: true}
	for typ, want := range map[string]string{
		model.UpdateUp:      "up --yes --skip-preview --stack org/dev --config-file /c.yaml --color never --refresh --target urn:a --target-dependents --parallel 4 --message m --expect-no-changes --replace urn:b --continue-on-error",
		model.UpdatePreview: "preview --stack org/dev --config-file /c.yaml --color never --refresh --target urn:a --target-dependents --parallel 4 --message m --expect-no-changes --replace urn:b",
		model.UpdateRefresh: "refresh --yes --skip-preview --stack org/dev --config-file /c.yaml --color never --target urn:a --target-dependents --parallel 4 --message m --expect-no-changes",
		model.UpdateDrift:   "refresh --preview-only --stack org/dev --config-file /c.yaml --color never --target urn:a --target-dependents --parallel 4 --message m",
		model.UpdateDestroy: "destroy --yes --skip-preview --stack org/dev --config-file /c.yaml --color never --refresh --target urn:a --target-dependents --parallel 4 --message m --continue-on-error --remove",
	} {
		op.Type = typ
		args, err := operationArgs(w, op)
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(args, " "); got != want {
			t.Errorf("%s:\n got %s\nwant %s", typ, got, want)
		}
	}
	op.Type, op.PreviewOnly = model.UpdateDestroy, true
	args, err := operationArgs(w, op)
	want := "destroy --preview-only --stack org/dev --config-file /c.yaml --color never --refresh --target urn:a --target-dependents --parallel 4 --message m"
	if got := strings.Join(args, " "); err != nil || got != want {
		t.Errorf("destroy preview:\n got %s %v\nwant %s", got, err, want)
	}
	op.Type = "nonsense"
	if _, err := operationArgs(w, op); err == nil {
		t.Error("an unknown operation was accepted")
	}
}
