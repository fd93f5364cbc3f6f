package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pulumi/pulumi/sdk/v3/go/auto"

	"github.com/stackd/stackd/daemon/model"
	"github.com/stackd/stackd/daemon/scrub"
)

// operationArgs are the CLI arguments of op on w, event log aside.
func operationArgs(w *workspace, op model.Operation) ([]string, error) {
	var args []string
	switch op.Type {
	case model.UpdateUp:
		args = []string{"up", "--yes", "--skip-preview"}
	case model.UpdatePreview:
		args = []string{"preview"}
		if op.Diff {
			args = append(args, "--diff")
		}
	case model.UpdateRefresh:
		args = []string{"refresh", "--yes", "--skip-preview"}
	case model.UpdateDrift:
		args = []string{"refresh", "--preview-only"}
	case model.UpdateDestroy:
		args = []string{"destroy", "--yes", "--skip-preview"}
		if op.PreviewOnly {
			args = []string{"destroy", "--preview-only"}
		}
	default:
		return nil, fmt.Errorf("stack %s: unknown operation %q", w.Name, op.Type)
	}
	args = append(args, "--stack", w.Stack, "--config-file", w.configFile, "--color", "never")
	return append(args, optionArgs(op)...), nil
}

// optionArgs are op's options as flags of the commands that take them.
func optionArgs(op model.Operation) []string {
	var args []string
	is := func(types ...string) bool { return slices.Contains(types, op.Type) }
	up, preview, refresh, destroy := model.UpdateUp, model.UpdatePreview, model.UpdateRefresh, model.UpdateDestroy
	if op.Refresh && is(up, preview, destroy) {
		args = append(args, "--refresh")
	}
	for _, t := range op.Targets {
		args = append(args, "--target", t)
	}
	if op.TargetDependents {
		args = append(args, "--target-dependents")
	}
	if op.Parallel > 0 {
		args = append(args, "--parallel", strconv.Itoa(op.Parallel))
	}
	if op.Message != "" {
		args = append(args, "--message", op.Message)
	}
	if op.ExpectNoChanges && is(up, preview, refresh) {
		args = append(args, "--expect-no-changes")
	}
	if is(up, preview) {
		for _, u := range op.Replace {
			args = append(args, "--replace", u)
		}
	}
	// A destroy preview neither goes on after errors nor removes.
	if op.ContinueOnError && is(up, destroy) && !op.PreviewOnly {
		args = append(args, "--continue-on-error")
	}
	if op.Remove && destroys(op) {
		args = append(args, "--remove")
	}
	return args
}

// destroys says whether op destroys: a destroy that is not a preview.
func destroys(op model.Operation) bool {
	return op.Type == model.UpdateDestroy && !op.PreviewOnly
}

// previewsDestroy says whether op is a destroy preview.
func previewsDestroy(op model.Operation) bool {
	return op.Type == model.UpdateDestroy && op.PreviewOnly
}

// operate runs op as one CLI process and reads its result from the
// engine's event log. A failure is an *Error whose message is the
// engine's diagnostics; the result still holds what the log said.
func (r *Runner) operate(ctx context.Context, w *workspace, op model.Operation) (model.Result, error) {
	args, err := operationArgs(w, op)
	if err != nil {
		return model.Result{}, err
	}
	eventLog := filepath.Join(w.dir, "events.json")
	_ = os.Remove(eventLog)
	defer os.Remove(eventLog)
	args = append(args, "--event-log", eventLog)
	env, planID, args, err := r.planArgs(ctx, w, op, args)
	if err != nil {
		return model.Result{}, err
	}
	if op.Plan != nil {
		defer os.Remove(w.planPath(planID))
	}
	viewPlan, saveArgs := policyPlan(w, op, planID)
	log := newLogWriter(op.Log, w.redact)
	// The CLI tells how to apply the plan it saved ("Run `pulumi up
	// --plan=...`"): advice for a person at a terminal, wrong under the
	// daemon, which applies a saved plan itself (or never, for the
	// policies' own). Its lines name the plan's path: they are dropped.
	switch {
	case saveArgs != nil:
		path := filepath.Join(w.dir, viewPlan)
		_ = os.Remove(path)
		defer os.Remove(path)
		args = append(args, saveArgs...)
		log.omit = path
	case op.SavePlan && op.Type == model.UpdatePreview:
		log.omit = w.planPath(planID)
	}
	access := r.access(w)
	creds, err := r.credentials(ctx, w, op)
	if err != nil {
		return model.Result{}, err
	}
	if creds != nil {
		defer creds.stop()
		env = append(env, creds.env...)
		access.ReadOnly = append(access.ReadOnly, creds.dir)
		access.Program.ReadOnly = append(access.Program.ReadOnly, creds.dir)
	}
	start := time.Now()
	stdout, stderr, code, runErr := r.cmd.RunIn(ctx, access, w.ProjectDir, nil,
		[]io.Writer{log.stdout}, []io.Writer{log.stderr}, env, args...)
	log.flush()

	ev, evErr := readEvents(eventLog)
	if evErr != nil {
		r.log.Warn("cannot read the event log", "stack", w.Name, "err", evErr)
	}
	res := model.Result{Changes: changes(ev)}
	if link, err := auto.GetPermalink(stdout); err == nil {
		res.Permalink = link
	}
	r.log.Debug("pulumi operation", "stack", w.Name, "type", op.Type, "code", code,
		"duration", time.Since(start), "changes", res.Changes)
	if runErr != nil {
		if planID != "" {
			_ = os.Remove(w.planPath(planID))
		}
		err := r.operationError(ctx, w, op.Type, ev, stderr, code, runErr)
		if op.Plan != nil {
			err = planViolated(err)
		}
		return res, err
	}
	if op.Judged && (op.Type == model.UpdatePreview || previewsDestroy(op)) {
		// Before the plan is described: the view reads it.
		if res.PolicySteps, res.PolicySecrets, err = r.policySteps(ctx, w, ev.raw, viewPlan); err != nil {
			if planID != "" {
				_ = os.Remove(w.planPath(planID))
			}
			return res, err
		}
		// The steps show the stack's tokens in clear (an old value in the
		// state, a new one): a verdict that quotes them is scrubbed of them.
		res.PolicySecrets = append(res.PolicySecrets, r.tokens.secrets(w.Name)...)
	}
	switch {
	case op.SavePlan && op.Type == model.UpdatePreview:
		if res.Plan, err = r.savedPlan(ctx, w, planID); err != nil {
			_ = os.Remove(w.planPath(planID))
			return res, err
		}
	case op.SavePlan && previewsDestroy(op):
		if res.Plan, err = r.destroyPlan(ctx, w, planID); err != nil {
			return res, err
		}
	}
	if op.Type == model.UpdateDrift {
		res.Drift = ev.drift
	}
	if op.Type == model.UpdatePreview || previewsDestroy(op) {
		res.Steps = cleanSteps(ev.steps, w.redact.Replace)
	}
	if op.Type == model.UpdateUp {
		if res.Outputs = ev.outputs; res.Outputs == nil {
			res.Outputs, err = r.maskedOutputs(ctx, w)
		}
		// An output may echo what the runner keeps secret (the
		// passphrase, an environment value): masked as in the log.
		for k, v := range res.Outputs {
			res.Outputs[k] = scrub.JSON(v, w.redact.Replace)
		}
	}
	return res, err
}

// planArgs adds to args what op asks of plans: a preview that saves one
// gets --save-plan and a new plan's path; an up constrained to one gets
// --plan once the plan is checked to hold, and PULUMI_EXPERIMENTAL,
// which `up --plan` needs, in its process's environment only. A destroy
// preview that saves a plan gets a new plan's ID (its plan is a binding
// of the state, made once it ran); a destroy constrained to such a plan
// runs as it is once the binding is checked to hold. It returns the
// environment and the plan's ID. The plan of an up is deleted once the
// up ran (see operate).
func (r *Runner) planArgs(ctx context.Context, w *workspace, op model.Operation, args []string) ([]string, string, []string, error) {
	switch {
	case op.SavePlan && op.Type == model.UpdatePreview:
		id, path, err := newPlan(w)
		if err != nil {
			return nil, "", nil, err
		}
		return r.env(w), id, append(args, "--save-plan", path), nil
	case op.Plan != nil && op.Type == model.UpdateUp:
		path, err := r.checkPlan(ctx, w, *op.Plan)
		if err != nil {
			return nil, "", nil, err
		}
		env := append(slices.Clone(r.env(w)), "PULUMI_EXPERIMENTAL=true")
		return env, op.Plan.ID, append(args, "--plan", path), nil
	case op.SavePlan && previewsDestroy(op):
		id, _, err := newPlan(w)
		if err != nil {
			return nil, "", nil, err
		}
		return r.env(w), id, args, nil
	case op.Plan != nil && destroys(op):
		if err := r.checkDestroyPlan(ctx, w, *op.Plan); err != nil {
			return nil, "", nil, err
		}
		return r.env(w), op.Plan.ID, args, nil
	case op.Plan != nil || op.SavePlan:
		return nil, "", nil, fmt.Errorf("stack %s: a %s takes no plan", w.Name, op.Type)
	}
	return r.env(w), "", args, nil
}

// cleanSteps applies clean to the steps' inputs: a program may pass what
// the runner keeps secret (an environment value) as a plain input.
func cleanSteps(steps []model.Step, clean func(string) string) []model.Step {
	for i, s := range steps {
		if s.Old != nil {
			steps[i].Old, _ = scrub.Value(s.Old, clean).(map[string]any)
		}
		if s.New != nil {
			steps[i].New, _ = scrub.Value(s.New, clean).(map[string]any)
		}
	}
	return steps
}

// changes is the summary's count of resources by operation.
func changes(ev events) map[string]int {
	if ev.summary == nil {
		return nil
	}
	out := make(map[string]int, len(ev.summary.ResourceChanges))
	for op, n := range ev.summary.ResourceChanges {
		out[string(op)] = n
	}
	return out
}

// operationError is the *Error of a failed operation.
func (r *Runner) operationError(ctx context.Context, w *workspace, typ string, ev events, stderr string, code int, err error) error {
	msg, prefix := ev.message(stderr), ""
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		prefix = typ + " timed out"
	case ctx.Err() != nil:
		prefix = typ + " was cancelled"
	case msg == "":
		msg = fmt.Sprintf("pulumi %s failed with exit code %d", typ, code)
	}
	switch {
	case prefix != "" && msg != "":
		msg = prefix + ": " + msg
	case prefix != "":
		msg = prefix
	}
	return &Error{Op: typ, Message: w.redact.Replace(msg), ExitCode: code, Err: err, locked: lockedText(stderr)}
}

// maskedOutputs reads the outputs, secrets masked, with `stack output`:
// for an up whose event log held no outputs of the stack (a targeted up
// that left the stack resource alone).
func (r *Runner) maskedOutputs(ctx context.Context, w *workspace) (map[string]json.RawMessage, error) {
	out, err := r.pulumi(ctx, w, call{what: "read outputs"}, "stack", "output", "--json", "--stack", w.Stack)
	if err != nil {
		return nil, fmt.Errorf("stack %s: %w", w.Name, err)
	}
	var outputs map[string]json.RawMessage
	return outputs, decodeJSON(strings.NewReader(out), &outputs)
}
