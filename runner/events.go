package runner

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/pulumi/pulumi/sdk/v3/go/common/apitype"

	"github.com/stackd/stackd/daemon/model"
	"github.com/stackd/stackd/daemon/spec"
)

// Secret values in engine events are objects holding this signature key
// with this value (resource.SecretSig).
const (
	secretSigKey   = "4dabf18193072939515e22adb298388d"
	secretSigValue = "1b47061264138c4ac30d75fd1eb44270"
)

// maxMessage bounds an error message built from diagnostics.
const maxMessage = 4000

// engineEvent is the part of an apitype.EngineEvent the runner reads.
// Outputs stay raw JSON so that numbers keep their text.
type engineEvent struct {
	DiagnosticEvent  *apitype.DiagnosticEvent `json:"diagnosticEvent"`
	SummaryEvent     *apitype.SummaryEvent    `json:"summaryEvent"`
	ResourcePreEvent *struct {
		Metadata stepMetadata `json:"metadata"`
	} `json:"resourcePreEvent"`
	ResOutputsEvent *struct {
		Metadata struct {
			Op    string   `json:"op"`
			URN   string   `json:"urn"`
			Type  string   `json:"type"`
			Diffs []string `json:"diffs"`
			New   *struct {
				Outputs map[string]json.RawMessage `json:"outputs"`
			} `json:"new"`
		} `json:"metadata"`
	} `json:"resOutputsEvent"`
}

// stepMetadata is the part of an apitype.StepEventMetadata a step of a
// preview is made of. Inputs stay raw JSON so that numbers keep their
// text.
type stepMetadata struct {
	Op    string     `json:"op"`
	URN   string     `json:"urn"`
	Type  string     `json:"type"`
	Diffs []string   `json:"diffs"`
	Old   *stepState `json:"old"`
	New   *stepState `json:"new"`
}

type stepState struct {
	URN    string                     `json:"urn"`
	ID     string                     `json:"id"`
	Inputs map[string]json.RawMessage `json:"inputs"`
}

// events is what an operation's event log says.
type events struct {
	summary *apitype.SummaryEvent
	// outputs are the Stack resource's outputs, secrets masked; nil when
	// the log has none.
	outputs map[string]json.RawMessage
	// errors are the error diagnostics; programErr the program's stderr
	// (severity info#err), where some language hosts put their errors.
	errors     []string
	programErr []string
	// drift lists the resources a refresh would change.
	drift []spec.DriftedResource
	// steps are the steps that change something, as the engine announced
	// them (resource pre-events), inputs' secrets masked; raw are the same
	// steps as the log holds them, secret values marked (their plaintext
	// is not in the log), from which policySteps makes the policies' view.
	steps []model.Step
	raw   []stepMetadata
}

// readEvents reads the event log at path. A log cut short (the process
// was killed) yields what it holds; a missing log yields nothing.
func readEvents(path string) (events, error) {
	var ev events
	f, err := openRegular(filepath.Dir(path), filepath.Base(path))
	if errors.Is(err, os.ErrNotExist) {
		return ev, nil
	}
	if err != nil {
		return ev, err
	}
	defer f.Close()
	dec := json.NewDecoder(f)
	for {
		var e engineEvent
		if err := dec.Decode(&e); err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				return ev, nil
			}
			return ev, fmt.Errorf("read the event log: %w", err)
		}
		if err := ev.add(e); err != nil {
			return ev, err
		}
	}
}

func (ev *events) add(e engineEvent) error {
	switch {
	case e.SummaryEvent != nil:
		ev.summary = e.SummaryEvent
	case e.DiagnosticEvent != nil:
		ev.addDiagnostic(e.DiagnosticEvent)
	case e.ResourcePreEvent != nil:
		return ev.addStep(e.ResourcePreEvent.Metadata)
	case e.ResOutputsEvent != nil:
		md := e.ResOutputsEvent.Metadata
		if drifted(md.Op, md.Type) {
			ev.drift = append(ev.drift, spec.DriftedResource{URN: md.URN, Type: md.Type, Op: md.Op, Properties: md.Diffs})
		}
		if md.Type != model.StackType || md.New == nil {
			return nil
		}
		outputs, err := maskOutputs(md.New.Outputs)
		if err != nil {
			return fmt.Errorf("read the stack's outputs: %w", err)
		}
		ev.outputs = outputs
	}
	return nil
}

// addStep records md unless it is a "same" step.
func (ev *events) addStep(md stepMetadata) error {
	if md.Op == "" || md.Op == "same" {
		return nil
	}
	st := model.Step{Op: md.Op, URN: md.URN, Type: md.Type, Diffs: md.Diffs}
	var err error
	if md.Old != nil {
		if st.Old, err = maskInputs(md.Old.Inputs); err != nil {
			return fmt.Errorf("read the old inputs of %s: %w", md.URN, err)
		}
	}
	if md.New != nil {
		if st.New, err = maskInputs(md.New.Inputs); err != nil {
			return fmt.Errorf("read the new inputs of %s: %w", md.URN, err)
		}
	}
	ev.steps, ev.raw = append(ev.steps, st), append(ev.raw, md)
	return nil
}

// unknownValue is how the engine writes a value a preview cannot know
// (plugin.UnknownStringValue); a step shows it as "[unknown]".
const unknownValue = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"

// maskInputs decodes a resource's inputs with secrets as "[secret]" and
// values unknown before the update as "[unknown]". Nil inputs stay nil.
func maskInputs(raw map[string]json.RawMessage) (map[string]any, error) {
	in, err := decodeInputs(raw)
	for k, v := range in {
		in[k] = unknown(mask(v))
	}
	return in, err
}

// decodeInputs decodes a resource's inputs as the log holds them, secret
// values marked. Nil inputs stay nil.
func decodeInputs(raw map[string]json.RawMessage) (map[string]any, error) {
	if raw == nil {
		return nil, nil
	}
	out := make(map[string]any, len(raw))
	for k, v := range raw {
		var x any
		if err := decodeJSON(bytes.NewReader(v), &x); err != nil {
			return nil, fmt.Errorf("input %s: %w", k, err)
		}
		out[k] = x
	}
	return out, nil
}

// unknown replaces the engine's unknown values in x with "[unknown]".
func unknown(x any) any {
	switch x := x.(type) {
	case string:
		if x == unknownValue {
			return "[unknown]"
		}
	case map[string]any:
		for k, v := range x {
			x[k] = unknown(v)
		}
	case []any:
		for i, v := range x {
			x[i] = unknown(v)
		}
	}
	return x
}

// drifted says whether a refresh step with op changes a resource of typ:
// anything but "same" (and the reads a refresh always does), for the
// program's resources (model.ProgramResource).
func drifted(op, typ string) bool {
	switch {
	case op == "" || op == "same" || op == "refresh" || op == "read":
		return false
	}
	return model.ProgramResource(typ)
}

func (ev *events) addDiagnostic(d *apitype.DiagnosticEvent) {
	msg := strings.TrimSpace(d.Message)
	if msg == "" {
		return
	}
	switch d.Severity {
	case "error":
		if name := resourceName(d.URN); name != "" {
			msg = name + ": " + msg
		}
		ev.errors = append(ev.errors, msg)
	case "info#err":
		ev.programErr = append(ev.programErr, msg)
	}
}

// resourceName is "type name" of a URN, empty for none.
func resourceName(urn string) string {
	parts := strings.Split(urn, "::")
	if len(parts) < 4 {
		return ""
	}
	typ := parts[len(parts)-2]
	typ = typ[strings.LastIndexByte(typ, '$')+1:]
	return typ + " " + parts[len(parts)-1]
}

// genericFailure matches the engine's closing error, which says nothing
// when a more precise one was given.
var genericFailure = regexp.MustCompile(`^(update|preview|refresh|destroy) failed$`)

// message is the error message of a failed operation: the engine's error
// diagnostics; else the program's stderr from its first line that starts
// with "error"; else the end of the CLI's stderr.
func (ev *events) message(stderr string) string {
	var specific, generic []string
	for _, m := range ev.errors {
		if genericFailure.MatchString(m) {
			generic = append(generic, m)
		} else {
			specific = append(specific, m)
		}
	}
	msg := strings.Join(specific, "\n")
	if msg == "" {
		msg = strings.Join(fromFirstError(ev.programErr), "\n")
	}
	if msg == "" {
		msg = tailLines(stderr, 10)
	}
	if msg == "" {
		msg = strings.Join(generic, "\n")
	}
	if len(msg) > maxMessage {
		msg = msg[:maxMessage] + "…"
	}
	return msg
}

// fromFirstError is lines from the first that starts with "error".
func fromFirstError(lines []string) []string {
	for i, l := range lines {
		if strings.HasPrefix(strings.ToLower(l), "error") {
			return lines[i:]
		}
	}
	return nil
}

// maskOutputs replaces secret values, at any depth, with "[secret]".
func maskOutputs(raw map[string]json.RawMessage) (map[string]json.RawMessage, error) {
	out := make(map[string]json.RawMessage, len(raw))
	for k, v := range raw {
		var x any
		if err := decodeJSON(bytes.NewReader(v), &x); err != nil {
			return nil, fmt.Errorf("output %s: %w", k, err)
		}
		data, err := encodeJSON(mask(x))
		if err != nil {
			return nil, fmt.Errorf("output %s: %w", k, err)
		}
		out[k] = data
	}
	return out, nil
}

// mask replaces secret objects in x with "[secret]".
func mask(x any) any {
	switch x := x.(type) {
	case map[string]any:
		if x[secretSigKey] == secretSigValue {
			return "[secret]"
		}
		for k, v := range x {
			x[k] = mask(v)
		}
	case []any:
		for i, v := range x {
			x[i] = mask(v)
		}
	}
	return x
}

// encodeJSON encodes x without escaping HTML characters.
func encodeJSON(x any) (json.RawMessage, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(x); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
