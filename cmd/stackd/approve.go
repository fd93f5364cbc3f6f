package main

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/stackd/stackd/daemon/model"
)

// decideCommand runs "stackd approve NAME [--plan ID]" and "stackd reject
// NAME [--plan ID] [--reason TEXT]". Without --plan it decides on the plan
// that awaits approval now, which it shows first.
func decideCommand(name string, args []string, stdout io.Writer) error {
	fs := newFlagSet(name)
	opts := clientFlags(fs)
	plan := fs.String("plan", "", "the plan's `ID` or digest (default: the one awaiting approval now)")
	var reason *string
	if name == "reject" {
		reason = fs.String("reason", "", "why the plan is rejected (recorded)")
	}
	if err := parseFlags(fs, name+" NAME [flags]", args, stdout); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageErrorf("%s: give one stack name", name)
	}
	c, err := opts.newClient()
	if err != nil {
		return err
	}
	stack := fs.Arg(0)
	path := "/api/v1/stacks/" + url.PathEscape(stack)
	what := "plan"
	if *plan == "" {
		var v model.StackView
		if err := c.getJSON(path, &v); err != nil {
			return err
		}
		g := v.Status.Gate
		if g == nil || g.State != model.GateAwaiting || g.Plan == nil {
			return fmt.Errorf("%s: stack %s has no plan awaiting approval", name, stack)
		}
		printGate(stdout, g)
		*plan = g.Plan.ID
		if g.Operation() == model.UpdateDestroy {
			what = "destroy plan"
		}
	}
	body := map[string]string{"plan": *plan}
	if reason != nil && *reason != "" {
		body["reason"] = *reason
	}
	resp, err := c.doJSON(http.MethodPost, path+"/"+name, body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var out struct{ State string }
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return fmt.Errorf("%s: decode: %w", name, err)
	}
	fmt.Fprintf(stdout, "%s %s of %s: %s\n", what, *plan, stack, strings.ToLower(out.State))
	return nil
}

// printGate shows a held plan: why it waits, its summary and its steps.
// A removed stack's destroy plan has no commit to show.
func printGate(w io.Writer, g *model.Gate) {
	if g.Operation() == model.UpdateDestroy {
		fmt.Fprintf(w, "%s %s: %s\n", g.PlanName(), g.State, g.Reason)
	} else {
		fmt.Fprintf(w, "%s (commit %s) %s: %s\n", g.PlanName(), shortSHA(g.Commit), g.State, g.Reason)
	}
	if g.Refused != "" {
		fmt.Fprintf(w, "  the plan approved before was not applied: %s\n", g.Refused)
	}
	var counts []string
	for _, op := range slices.Sorted(maps.Keys(g.Changes)) {
		if op != "same" {
			counts = append(counts, fmt.Sprintf("%d to %s", g.Changes[op], op))
		}
	}
	if len(counts) > 0 {
		fmt.Fprintf(w, "  %s\n", strings.Join(counts, ", "))
	}
	for _, s := range g.Steps {
		line := fmt.Sprintf("  %s %s", s.Op, s.URN)
		if len(s.Diffs) > 0 {
			line += " (" + strings.Join(s.Diffs, ", ") + ")"
		}
		fmt.Fprintln(w, line)
	}
	fmt.Fprintf(w, "  full diff: the log of update %s (stackd logs NAME)\n", g.Update)
}
