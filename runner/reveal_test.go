package runner

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stackd/stackd/daemon/model"
)

// secretPathProgram is a program of one File whose path, written in the
// program, is a secret (fn::secret), and whose content is the secret
// config value token.
func secretPathProgram(path string) string {
	return `name: runnertest
runtime: yaml
configuration:
  token:
    type: String
resources:
  key:
    type: stackdtest:index:File
    properties:
      path:
        fn::secret: ` + path + `
      content: ${token}
`
}

// tokenOnly is the test stack whose only config is the secret token: the
// File's path is in no config.
func tokenOnly(h *harness, token string) model.Workspace {
	ws := h.workspace("", token)
	ws.Config = ws.Config[2:]
	return ws
}

// TestRunPolicySteps previews with the real CLI a program whose File has
// a secret path and a secret content: the steps show "[secret]", the
// policies' view of a judged preview shows the real values, old (from
// the state) and new (from the plan, decrypted), for a create, an update
// under a saved plan (which still applies), a destroy preview and a
// read-only replace; no plaintext is left in a file of the runner's and
// none is in the log. An alias renames nothing of what is revealed.
func TestRunPolicySteps(t *testing.T) {
	h := newHarness(t, "")
	h.writeProgram(secretPathProgram(h.file))
	ws := tokenOnly(h, secretOne)
	key := func(steps []model.Step, op string) model.Step {
		t.Helper()
		for _, s := range steps {
			if s.Op == op && strings.HasSuffix(s.URN, "::key") {
				return s
			}
		}
		t.Fatalf("no %s of key in %+v", op, steps)
		return model.Step{}
	}
	wantSecrets := func(res model.Result, want ...string) {
		t.Helper()
		for _, s := range want {
			if !slices.Contains(res.PolicySecrets, s) {
				t.Errorf("policy secrets %q lack %q", res.PolicySecrets, s)
			}
		}
	}

	// A create: new inputs only, from the plan the preview saves aside.
	res := h.run(model.Operation{Workspace: ws, Type: model.UpdatePreview, Diff: true, Judged: true})
	if c := key(res.Steps, "create"); c.New["path"] != "[secret]" || c.New["content"] != "[secret]" {
		t.Errorf("shown create %+v, want secrets masked", c)
	}
	if c := key(res.PolicySteps, "create"); c.New["path"] != h.file || c.New["content"] != secretOne {
		t.Errorf("judged create %+v, want path %s and content %s", c, h.file, secretOne)
	}
	wantSecrets(res, h.file, secretOne)
	if found := filesContaining(t, h.dataDir, h.file); len(found) > 0 {
		t.Errorf("the secret path is in files of the runner: %v", found)
	}
	for _, name := range []string{judgedPlan, decryptFile} {
		if _, err := os.Stat(filepath.Join(h.dataDir, "workspaces", "test", name)); !os.IsNotExist(err) {
			t.Errorf("%s is left: %v", name, err)
		}
	}
	if log := h.log.String(); strings.Contains(log, judgedPlan) || strings.Contains(log, h.file) {
		t.Errorf("the log names the throwaway plan or the secret path:\n%s", log)
	}

	h.run(model.Operation{Workspace: ws, Type: model.UpdateUp})

	// An update under a saved plan: the old values from the state, the
	// new content from the plan, the path (unchanged) from the state.
	ws = tokenOnly(h, secretTwo)
	res = h.run(model.Operation{Workspace: ws, Type: model.UpdatePreview, Diff: true, SavePlan: true, Judged: true})
	u := key(res.PolicySteps, "update")
	if u.Old["path"] != h.file || u.Old["content"] != secretOne || u.New["path"] != h.file || u.New["content"] != secretTwo {
		t.Errorf("judged update %+v, want path %s, content %s then %s", u, h.file, secretOne, secretTwo)
	}
	if s := key(res.Steps, "update"); s.Old["content"] != "[secret]" || s.New["content"] != "[secret]" {
		t.Errorf("shown update %+v, want secrets masked", s)
	}
	wantSecrets(res, h.file, secretOne, secretTwo)
	h.run(model.Operation{Workspace: ws, Type: model.UpdateUp, Plan: res.Plan})
	if got := h.onDisk(); got != secretTwo {
		t.Fatalf("the plan applied %q, want %q", got, secretTwo)
	}

	// A destroy preview: the deletes' old inputs, from the state.
	res = h.run(model.Operation{Workspace: ws, Type: model.UpdateDestroy, PreviewOnly: true, SavePlan: true, Judged: true})
	if d := key(res.PolicySteps, "delete"); d.Old["path"] != h.file || d.Old["content"] != secretTwo || d.New != nil {
		t.Errorf("judged delete %+v, want path %s and content %s", d, h.file, secretTwo)
	}

	// A read-only preview of a new path: a replace, the new path from the
	// plan.
	moved := h.file + ".moved"
	h.writeProgram(secretPathProgram(moved))
	res = h.run(model.Operation{Workspace: ws, Type: model.UpdatePreview, Diff: true, ReadOnly: true, Judged: true})
	if r := key(res.PolicySteps, "replace"); r.Old["path"] != h.file || r.New["path"] != moved || r.New["content"] != secretTwo {
		t.Errorf("judged replace %+v, want path %s then %s", r, h.file, moved)
	}
	wantSecrets(res, moved)
	data, _ := json.Marshal(res.Steps)
	for _, s := range []string{h.file, secretTwo} {
		if strings.Contains(string(data), s) {
			t.Errorf("shown steps hold %q: %s", s, data)
		}
	}
	// A rename (an alias) that changes the content: the old inputs are
	// the state's of the old URN.
	h.writeProgram(strings.Replace(secretPathProgram(h.file), "  key:\n", "  renamed:\n    options:\n      aliases:\n        - "+
		"urn:pulumi:dev::runnertest::stackdtest:index:File::key\n", 1))
	res = h.run(model.Operation{Workspace: tokenOnly(h, secretOne), Type: model.UpdatePreview, Judged: true})
	if len(res.PolicySteps) != 1 || res.PolicySteps[0].Old["path"] != h.file || res.PolicySteps[0].New["content"] != secretOne {
		t.Errorf("judged rename %+v, want the old path %s and the new content", res.PolicySteps, h.file)
	}

	calls := h.allCalls()
	if strings.Contains(calls, secretOne) || strings.Contains(calls, secretTwo) || strings.Contains(calls, "--show-secrets --diff") {
		t.Errorf("a secret or --show-secrets reached a preview's argv:\n%s", calls)
	}
	for _, want := range []string{"stack export --show-secrets", "config --show-secrets --json --config-file"} {
		if !strings.Contains(calls, want) {
			t.Errorf("no %q among the calls:\n%s", want, calls)
		}
	}
}

// TestRunPolicyStepsUnjudged: a preview that is not judged has no
// policies' view and runs nothing to make one.
func TestRunPolicyStepsUnjudged(t *testing.T) {
	h := newHarness(t, "")
	h.writeProgram(secretPathProgram(h.file))
	res := h.run(model.Operation{Workspace: tokenOnly(h, secretOne), Type: model.UpdatePreview})
	if res.PolicySteps != nil || res.PolicySecrets != nil {
		t.Errorf("an unjudged preview revealed %+v %q", res.PolicySteps, res.PolicySecrets)
	}
	if calls := h.allCalls(); strings.Contains(calls, "--show-secrets") || strings.Contains(calls, "--save-plan") {
		t.Errorf("an unjudged preview read secrets:\n%s", calls)
	}
}

// sig is the secret signature of the engine's serialized values.
const sig = `"4dabf18193072939515e22adb298388d":"1b47061264138c4ac30d75fd1eb44270"`

// blinded is a secret value as the event log holds it.
const blinded = `{` + sig + `,"ciphertext":"[secret]"}`

func rawInputs(t *testing.T, s string) map[string]json.RawMessage {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func decoded(t *testing.T, s string) map[string]any {
	t.Helper()
	m, err := decodeInputs(rawInputs(t, s))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestRevealStep masks and reveals nested secrets: in an object, in an
// array, a whole object, a secret nested in a secret (which the plan
// does not encrypt twice), an input left as it was (the state's value),
// beside plain and unknown values.
func TestRevealStep(t *testing.T) {
	const old = `{"tags":{"a":` + blinded + `,"b":"plain"},"list":[1,` + blinded + `],"same":` + blinded + `}`
	md := stepMetadata{Op: "update", URN: "u", Type: "t:index:T",
		Old: &stepState{URN: "u", ID: "id1", Inputs: rawInputs(t, old)},
		New: &stepState{ID: "id1", Inputs: rawInputs(t, `{"tags":{"a":`+blinded+`,"b":"plain"},"list":[1,`+blinded+`],"same":`+blinded+
			`,"obj":`+blinded+`,"later":"`+unknownValue+`"}`)}}
	rv := revealer{
		state: map[resourceKey]map[string]any{{"u", "id1"}: decoded(t, `{"tags":{"a":{`+sig+`,"plaintext":"\"old-a\""},"b":"plain"},`+
			`"list":[1,{`+sig+`,"plaintext":"12345"}],"same":{`+sig+`,"plaintext":"\"unchanged-value\""}}`)},
		plan: map[string]map[string]any{"u": decoded(t, `{"tags":{"a":{`+sig+`,"ciphertext":"CT1"},"b":"plain"},`+
			`"list":[1,{`+sig+`,"ciphertext":"CT2"}],"obj":{`+sig+`,"ciphertext":"CT3"}}`)},
		plain: map[string]string{"CT1": `"new-a"`, "CT2": `67890`,
			"CT3": `{"user":"admin","pass":{` + sig + `,"ciphertext":"\"inner-pass\""}}`},
	}
	if got := ciphertexts(rv.plan); strings.Join(got, ",") != "CT1,CT2,CT3" {
		t.Errorf("ciphertexts %q, want CT1, CT2, CT3", got)
	}
	st, err := rv.step(md)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(st)
	want := `{"op":"update","urn":"u","type":"t:index:T",` +
		`"old":{"list":[1,12345],"same":"unchanged-value","tags":{"a":"old-a","b":"plain"}},` +
		`"new":{"later":"[unknown]","list":[1,67890],"obj":{"pass":"inner-pass","user":"admin"},"same":"unchanged-value","tags":{"a":"new-a","b":"plain"}}}`
	if string(got) != want {
		t.Errorf("revealed\n got %s\nwant %s", got, want)
	}
	slices.Sort(rv.secrets)
	if s := strings.Join(slices.Compact(rv.secrets), ","); s != "12345,67890,admin,inner-pass,new-a,old-a,unchanged-value" {
		t.Errorf("secrets %s", s)
	}

	// The same inputs as shown: every secret masked, at any depth.
	masked, err := maskInputs(md.New.Inputs)
	if err != nil {
		t.Fatal(err)
	}
	got, _ = json.Marshal(masked)
	if want := `{"later":"[unknown]","list":[1,"[secret]"],"obj":"[secret]","same":"[secret]","tags":{"a":"[secret]","b":"plain"}}`; string(got) != want {
		t.Errorf("masked\n got %s\nwant %s", got, want)
	}
}

// TestRevealStepUnknown: a secret whose value neither the plan nor the
// state holds fails, but in a read, which changes nothing and stays
// masked; a plain step needs neither.
func TestRevealStepUnknown(t *testing.T) {
	var rv revealer
	secretNew := &stepState{Inputs: rawInputs(t, `{"p":`+blinded+`}`)}
	if _, err := rv.step(stepMetadata{Op: "import", URN: "u", New: secretNew}); err == nil || !strings.Contains(err.Error(), "new input p") {
		t.Errorf("an import's unknown secret: %v, want an error", err)
	}
	if _, err := rv.step(stepMetadata{Op: "delete", URN: "u", Old: &stepState{ID: "x", Inputs: rawInputs(t, `{"p":`+blinded+`}`)}}); err == nil {
		t.Error("a secret the state does not hold was revealed")
	}
	st, err := rv.step(stepMetadata{Op: "read", URN: "u", New: secretNew})
	if err != nil || st.New["p"] != "[secret]" {
		t.Errorf("read %+v, %v: want its secret masked", st, err)
	}
	st, err = rv.step(stepMetadata{Op: "create", URN: "u", New: &stepState{Inputs: rawInputs(t, `{"p":"plain"}`)}})
	if err != nil || st.New["p"] != "plain" {
		t.Errorf("plain create %+v, %v", st, err)
	}
}
