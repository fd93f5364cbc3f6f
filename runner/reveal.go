package runner

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/stackd/stackd/daemon/model"
)

// Policies judge what is applied, so a judged preview's steps are also
// returned as policies see them: secret inputs in clear, where people see
// "[secret]" (model.Result.PolicySteps). The engine writes no secret's
// plaintext into its event log, whatever the flags: CLI v3.250.0 writes
// the log's events with secrets blinded ("ciphertext":"[secret]"), and
// --show-secrets reaches only its display (stdout, which is the stored
// log) and a saved plan (a file, which an approval keeps for hours). So
// the log stays the authority on the steps and on where their secrets
// are, and the plaintext of each comes from what the engine keeps
// encrypted, decrypted into the daemon's memory through a pipe, never
// into a file:
//   - an old input is in the stack's state: `pulumi stack export
//     --show-secrets`;
//   - a new input that the preview adds or changes is in the plan it saved
//     (--save-plan), encrypted by the stack's secrets provider: `pulumi
//     config --show-secrets` decrypts its ciphertexts, written as secure
//     values into a scratch config file of that provider; a new input the
//     preview leaves as it was is the old one.
//
// As no plaintext is written, the event log stays a regular file, read
// once the CLI exited. These commands run only when a step holds a
// secret. A secret whose plaintext is found nowhere (an import's, say:
// its plan holds no inputs) fails the preview, so that policies fail
// closed; a read's new inputs, which neither the plan nor the state hold
// and which change nothing, stay "[secret]". A limit: with --refresh, a
// secret input that the refresh changed in the engine's memory is
// revealed as the state held it before the refresh.

// judgedPlan is the throwaway plan a judged preview that saves none of
// its own saves in the runner's directory, for the policies' view.
const judgedPlan = "judged-plan.json"

// decryptFile is the scratch config file that decrypt writes in the
// runner's directory: ciphertexts only.
const decryptFile = "decrypt.yaml"

// revealNamespace is the config namespace of the ciphertexts decrypt
// writes: none of a project's.
const revealNamespace = "stackd-reveal"

// policyPlan is the plan, relative to w.dir, from which the policies'
// view of op reads new inputs, and the arguments that make the preview
// save it: a judged up preview that saves a plan has it; another one
// saves judgedPlan, which nothing applies. A destroy preview has none:
// its steps are deletes, whose inputs are the state's.
func policyPlan(w *workspace, op model.Operation, planID string) (string, []string) {
	switch {
	case !op.Judged || op.Type != model.UpdatePreview:
		return "", nil
	case op.SavePlan:
		return filepath.Join(filepath.Base(w.planDir()), planID+".json"), nil
	}
	return judgedPlan, []string{"--save-plan", filepath.Join(w.dir, judgedPlan)}
}

// policySteps returns raw, the steps as the event log holds them, as
// policies judge them (secret values in clear, values unknown before the
// update as "[unknown]"), and the texts of the secret values revealed.
// plan is the plan the preview saved, relative to w.dir; empty for none.
func (r *Runner) policySteps(ctx context.Context, w *workspace, raw []stepMetadata, plan string) ([]model.Step, []string, error) {
	var rv revealer
	var err error
	if needsState(raw) {
		if rv.state, err = r.secretState(ctx, w); err != nil {
			return nil, nil, err
		}
	}
	if urns := newSecrets(raw); len(urns) > 0 && plan != "" {
		if rv.plan, err = planInputs(w, plan, urns); err != nil {
			return nil, nil, fmt.Errorf("stack %s: read the plan's inputs: %w", w.Name, err)
		}
		if rv.plain, err = r.decrypt(ctx, w, ciphertexts(rv.plan)); err != nil {
			return nil, nil, err
		}
	}
	steps := make([]model.Step, 0, len(raw))
	for _, md := range raw {
		st, err := rv.step(md)
		if err != nil {
			return nil, nil, fmt.Errorf("stack %s: reveal the secret inputs of %s for the policies: %w", w.Name, md.URN, err)
		}
		steps = append(steps, st)
	}
	return steps, rv.secrets, nil
}

// rawSecret says whether raw inputs may hold a secret value: whether the
// secret signature is in their text (a plain string may hold it too).
func rawSecret(in map[string]json.RawMessage) bool {
	for _, v := range in {
		if bytes.Contains(v, []byte(secretSigValue)) {
			return true
		}
	}
	return false
}

// needsState says whether revealing steps may read the state: a step
// with old inputs holds a secret (an old input's, or a new one left as
// it was).
func needsState(steps []stepMetadata) bool {
	return slices.ContainsFunc(steps, func(md stepMetadata) bool {
		return md.Old != nil && (rawSecret(md.Old.Inputs) || md.New != nil && rawSecret(md.New.Inputs))
	})
}

// newSecrets are the URNs of the steps whose new inputs hold a secret.
func newSecrets(steps []stepMetadata) map[string]bool {
	urns := map[string]bool{}
	for _, md := range steps {
		if md.New != nil && rawSecret(md.New.Inputs) {
			urns[md.URN] = true
		}
	}
	return urns
}

// resourceKey names a resource of the state.
type resourceKey struct{ urn, id string }

// revealer fills the secret values of a preview's steps in with their
// plaintext.
type revealer struct {
	// state holds the inputs of the stack's resources, secrets in clear.
	state map[resourceKey]map[string]any
	// plan holds, by URN, the inputs each resource's plan adds or
	// changes, secrets encrypted; plain the plaintext of each ciphertext.
	plan  map[string]map[string]any
	plain map[string]string
	// secrets collects the texts of the secret values revealed.
	secrets []string
}

// step is md with its secret inputs in clear.
func (rv *revealer) step(md stepMetadata) (model.Step, error) {
	st := model.Step{Op: md.Op, URN: md.URN, Type: md.Type, Diffs: md.Diffs}
	var base map[string]any // the old inputs in clear, as the state holds them
	if md.Old != nil {
		old, err := decodeInputs(md.Old.Inputs)
		if err != nil {
			return st, fmt.Errorf("old inputs: %w", err)
		}
		// The old resource's own URN: an alias renames it in the step.
		base = rv.state[resourceKey{cmp.Or(md.Old.URN, md.URN), md.Old.ID}]
		for k, v := range old {
			if !hasSecret(v) {
				continue
			}
			src, ok := base[k]
			if !ok {
				return st, fmt.Errorf("old input %s: the state holds no value of it", k)
			}
			if old[k], err = rv.input(v, src); err != nil {
				return st, fmt.Errorf("old input %s: %w", k, err)
			}
		}
		st.Old = unknownInputs(old)
	}
	if md.New != nil {
		in, err := decodeInputs(md.New.Inputs)
		if err != nil {
			return st, fmt.Errorf("new inputs: %w", err)
		}
		for k, v := range in {
			if !hasSecret(v) {
				continue
			}
			// An input the plan neither adds nor changes is the old one.
			src, ok := rv.plan[md.URN][k]
			if !ok {
				src, ok = base[k]
			}
			switch {
			case !ok && md.Op == "read":
				in[k] = mask(v)
				continue
			case !ok:
				return st, fmt.Errorf("new input %s: neither the plan nor the state holds its value", k)
			}
			if in[k], err = rv.input(v, src); err != nil {
				return st, fmt.Errorf("new input %s: %w", k, err)
			}
		}
		st.New = unknownInputs(in)
	}
	return st, nil
}

// unknownInputs is unknown of each input; nil stays nil.
func unknownInputs(in map[string]any) map[string]any {
	for k, v := range in {
		in[k] = unknown(v)
	}
	return in
}

// input returns v, an input as the event log holds it, with each secret
// value in it replaced by the plaintext at the same place of src, the
// input as the state or the plan holds it.
func (rv *revealer) input(v, src any) (any, error) {
	plain, err := rv.plainValue(src, false)
	if err != nil {
		return nil, err
	}
	return rv.fill(v, plain)
}

// fill replaces the secret values in v with those at the same place of
// plain.
func (rv *revealer) fill(v, plain any) (any, error) {
	if isSecret(v) {
		rv.note(plain)
		return plain, nil
	}
	switch x := v.(type) {
	case map[string]any:
		p, _ := plain.(map[string]any)
		for k, e := range x {
			if !hasSecret(e) {
				continue
			}
			pe, ok := p[k]
			if !ok {
				return nil, fmt.Errorf("no value at %s", k)
			}
			var err error
			if x[k], err = rv.fill(e, pe); err != nil {
				return nil, err
			}
		}
	case []any:
		p, _ := plain.([]any)
		for i, e := range x {
			if !hasSecret(e) {
				continue
			}
			if i >= len(p) {
				return nil, fmt.Errorf("no value at [%d]", i)
			}
			var err error
			if x[i], err = rv.fill(e, p[i]); err != nil {
				return nil, err
			}
		}
	}
	return v, nil
}

// plainValue returns a copy of x, a value of the state or the plan
// (which several steps may share), with every secret in it replaced by
// its plaintext, decoded. The state's secrets hold their plaintext
// (JSON); the plan's hold a ciphertext, whose plaintext rv.plain has; a
// secret nested in another (inner) is not encrypted twice: its
// "ciphertext" is its JSON.
func (rv *revealer) plainValue(x any, inner bool) (any, error) {
	switch t := x.(type) {
	case map[string]any:
		if isSecret(t) {
			text, err := rv.plaintext(t, inner)
			if err != nil {
				return nil, err
			}
			var v any
			if err := decodeJSON(strings.NewReader(text), &v); err != nil {
				return nil, fmt.Errorf("decode a secret value: %w", err)
			}
			return rv.plainValue(v, true)
		}
		out := make(map[string]any, len(t))
		for k, e := range t {
			var err error
			if out[k], err = rv.plainValue(e, inner); err != nil {
				return nil, err
			}
		}
		return out, nil
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			var err error
			if out[i], err = rv.plainValue(e, inner); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	return x, nil
}

// plaintext is the JSON text of secret.
func (rv *revealer) plaintext(secret map[string]any, inner bool) (string, error) {
	if p, ok := secret["plaintext"].(string); ok {
		return p, nil
	}
	ct, ok := secret["ciphertext"].(string)
	switch {
	case !ok:
		return "", errors.New("a secret value holds neither plaintext nor ciphertext")
	case inner:
		return ct, nil
	}
	p, ok := rv.plain[ct]
	if !ok {
		return "", errors.New("a secret value was not decrypted")
	}
	return p, nil
}

// note adds the texts of v, a secret value in clear, to rv.secrets: its
// strings and numbers (never the engine's unknown value).
func (rv *revealer) note(v any) {
	switch t := v.(type) {
	case string:
		if t != unknownValue {
			rv.secrets = append(rv.secrets, t)
		}
	case json.Number:
		rv.secrets = append(rv.secrets, t.String())
	case map[string]any:
		for _, e := range t {
			rv.note(e)
		}
	case []any:
		for _, e := range t {
			rv.note(e)
		}
	}
}

// isSecret says whether x is a secret value as the engine writes one.
func isSecret(x any) bool {
	m, ok := x.(map[string]any)
	return ok && m[secretSigKey] == secretSigValue
}

// hasSecret says whether x holds a secret value at any depth.
func hasSecret(x any) bool {
	switch t := x.(type) {
	case map[string]any:
		if isSecret(t) {
			return true
		}
		for _, e := range t {
			if hasSecret(e) {
				return true
			}
		}
	case []any:
		return slices.ContainsFunc(t, hasSecret)
	}
	return false
}

// secretState reads the inputs of w's resources from its state, secrets
// in clear: `pulumi stack export --show-secrets` prints them to a pipe.
func (r *Runner) secretState(ctx context.Context, w *workspace) (map[resourceKey]map[string]any, error) {
	out, err := r.pulumi(ctx, w, call{what: "read the state's secret inputs"}, "stack", "export", "--show-secrets", "--stack", w.Stack)
	if err != nil {
		return nil, fmt.Errorf("stack %s: %w", w.Name, err)
	}
	var st struct {
		Deployment struct {
			Resources []struct {
				URN    string         `json:"urn"`
				ID     string         `json:"id"`
				Inputs map[string]any `json:"inputs"`
			} `json:"resources"`
		} `json:"deployment"`
	}
	if err := decodeJSON(strings.NewReader(out), &st); err != nil {
		return nil, fmt.Errorf("stack %s: read the exported state: %w", w.Name, err)
	}
	state := make(map[resourceKey]map[string]any, len(st.Deployment.Resources))
	for _, x := range st.Deployment.Resources {
		if k := (resourceKey{x.URN, x.ID}); state[k] == nil {
			state[k] = x.Inputs
		}
	}
	return state, nil
}

// planInputs reads, of the plan name (relative to w.dir), the inputs
// that the plan of each resource of urns adds or changes, secrets
// encrypted.
func planInputs(w *workspace, name string, urns map[string]bool) (map[string]map[string]any, error) {
	data, err := readIn(w.dir, name)
	if err != nil {
		return nil, err
	}
	var plan struct {
		ResourcePlans map[string]struct {
			Goal *struct {
				InputDiff struct {
					Adds    map[string]any `json:"adds"`
					Updates map[string]any `json:"updates"`
				} `json:"inputDiff"`
			} `json:"goal"`
		} `json:"resourcePlans"`
	}
	if err := decodeJSON(bytes.NewReader(data), &plan); err != nil {
		return nil, err
	}
	out := map[string]map[string]any{}
	for urn := range urns {
		rp, ok := plan.ResourcePlans[urn]
		if !ok || rp.Goal == nil {
			continue
		}
		in := map[string]any{}
		maps.Copy(in, rp.Goal.InputDiff.Adds)
		maps.Copy(in, rp.Goal.InputDiff.Updates)
		out[urn] = in
	}
	return out, nil
}

// ciphertexts are the ciphertexts of the secret values in plan, sorted.
func ciphertexts(plan map[string]map[string]any) []string {
	var out []string
	var walk func(x any)
	walk = func(x any) {
		switch t := x.(type) {
		case map[string]any:
			if ct, ok := t["ciphertext"].(string); ok && isSecret(t) {
				out = append(out, ct)
				return
			}
			for _, e := range t {
				walk(e)
			}
		case []any:
			for _, e := range t {
				walk(e)
			}
		}
	}
	for _, in := range plan {
		walk(map[string]any(in))
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// decrypt returns the plaintext of each of cts, ciphertexts of w's
// secrets provider: `pulumi config --show-secrets` decrypts the secure
// values of a scratch config file, which holds the provider's settings
// of w's config file and the ciphertexts under keys of their own
// namespace. It lives in the runner's directory, out of the program's
// reach, and is deleted at once; the plaintexts come back through a pipe.
func (r *Runner) decrypt(ctx context.Context, w *workspace, cts []string) (map[string]string, error) {
	if len(cts) == 0 {
		return nil, nil
	}
	values := &yaml.Node{Kind: yaml.MappingNode}
	for i, ct := range cts {
		secure := &yaml.Node{Kind: yaml.MappingNode, Content: []*yaml.Node{strNode("secure"), strNode(ct)}}
		values.Content = append(values.Content, strNode(revealKey(i)), secure)
	}
	doc := &yaml.Node{Kind: yaml.MappingNode, Content: append(fileHeader(w.configFile), strNode("config"), values)}
	data, err := encodeYAML(doc)
	if err != nil {
		return nil, fmt.Errorf("stack %s: encode the ciphertexts: %w", w.Name, err)
	}
	path := filepath.Join(w.dir, decryptFile)
	if err := writeFileAtomic(path, data, 0o600); err != nil {
		return nil, fmt.Errorf("stack %s: write the ciphertexts: %w", w.Name, err)
	}
	defer os.Remove(path)
	out, err := r.pulumi(ctx, w, call{what: "decrypt the plan's secret inputs"},
		"config", "--show-secrets", "--json", "--config-file", path, "--stack", w.Stack)
	if err != nil {
		return nil, fmt.Errorf("stack %s: %w", w.Name, err)
	}
	var got map[string]struct {
		Value string `json:"value"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		return nil, fmt.Errorf("stack %s: read the decrypted values: %w", w.Name, err)
	}
	plain := make(map[string]string, len(cts))
	for i, ct := range cts {
		v, ok := got[revealKey(i)]
		if !ok {
			return nil, fmt.Errorf("stack %s: the plan's secret inputs were not all decrypted", w.Name)
		}
		plain[ct] = v.Value
	}
	return plain, nil
}

// revealKey is the config key of the i-th ciphertext decrypt writes.
func revealKey(i int) string { return revealNamespace + ":v" + strconv.Itoa(i) }
