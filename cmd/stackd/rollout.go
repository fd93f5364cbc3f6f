package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/stackd/stackd/daemon/model"
)

const rolloutUsage = "rollout: want `stackd rollout list`, `stackd rollout status SET`, `stackd rollout resume SET` or `stackd rollout abort SET`"

// rolloutCommand runs "stackd rollout list|status SET|resume SET|abort
// SET": the StackSets of a running daemon and their rollouts.
func rolloutCommand(args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return usageErrorf("%s", rolloutUsage)
	}
	switch sub, rest := args[0], args[1:]; sub {
	case "list":
		return rolloutList(rest, stdout)
	case "status":
		return rolloutStatus(rest, stdout)
	case "resume", "abort":
		return rolloutAct(sub, rest, stdout)
	default:
		return usageErrorf("rollout: unknown command %q; %s", sub, strings.TrimPrefix(rolloutUsage, "rollout: "))
	}
}

// rolloutArgs parses a rollout command's flags and arguments: a set's
// name when set is true, none otherwise. asJSON is nil for a command
// without --json.
func rolloutArgs(sub string, args []string, stdout io.Writer, set bool, asJSON *bool) (*client, string, error) {
	fs := newFlagSet("rollout " + sub)
	opts := clientFlags(fs)
	usage := "rollout " + sub
	if set {
		usage += " SET"
	}
	if asJSON != nil {
		fs.BoolVar(asJSON, "json", false, "print the API's JSON")
		usage += " [--json]"
	}
	if err := parseFlags(fs, usage+" [flags]", args, stdout); err != nil {
		return nil, "", err
	}
	switch {
	case set && fs.NArg() != 1:
		return nil, "", usageErrorf("rollout %s: give one stack set name", sub)
	case !set && fs.NArg() != 0:
		return nil, "", usageErrorf("rollout %s: unexpected argument %q", sub, fs.Arg(0))
	}
	c, err := opts.newClient()
	return c, fs.Arg(0), err
}

// stackSetAPIPath is the API path of a StackSet.
func stackSetAPIPath(name string) string { return "/api/v1/stacksets/" + url.PathEscape(name) }

// rolloutList runs "stackd rollout list [--json]".
func rolloutList(args []string, stdout io.Writer) error {
	var asJSON bool
	c, _, err := rolloutArgs("list", args, stdout, false, &asJSON)
	if err != nil {
		return err
	}
	var list struct {
		StackSets []model.StackSetView `json:"stackSets"`
	}
	if err := c.getJSON("/api/v1/stacksets", &list); err != nil {
		return err
	}
	if asJSON {
		return printRolloutJSON(stdout, list)
	}
	printStackSets(stdout, list.StackSets)
	return nil
}

// rolloutStatus runs "stackd rollout status SET [--json]".
func rolloutStatus(args []string, stdout io.Writer) error {
	var asJSON bool
	c, name, err := rolloutArgs("status", args, stdout, true, &asJSON)
	if err != nil {
		return err
	}
	var v model.StackSetView
	if err := c.getJSON(stackSetAPIPath(name), &v); err != nil {
		return err
	}
	if asJSON {
		return printRolloutJSON(stdout, v)
	}
	printRollout(stdout, v)
	return nil
}

// rolloutAct runs "stackd rollout resume SET" and "stackd rollout abort
// SET", and prints where the rollout stands after it.
func rolloutAct(sub string, args []string, stdout io.Writer) error {
	c, name, err := rolloutArgs(sub, args, stdout, true, nil)
	if err != nil {
		return err
	}
	resp, err := c.do(http.MethodPost, stackSetAPIPath(name)+"/"+sub)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var out struct {
		Rollout *model.RolloutStatus `json:"rollout"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return fmt.Errorf("rollout %s: decode: %w", sub, err)
	}
	done := map[string]string{"resume": "resumed", "abort": "aborted"}[sub]
	fmt.Fprintf(stdout, "rollout of stack set %s %s\n", name, done)
	if out.Rollout != nil {
		fmt.Fprintln(stdout, rolloutLine(name, out.Rollout))
	}
	return nil
}

func printRolloutJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// printStackSets prints a table of sets: name, stacks, rollout state,
// step and message.
func printStackSets(w io.Writer, sets []model.StackSetView) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tSTACKS\tROLLOUT\tSTEP\tMESSAGE")
	for _, v := range sets {
		state, step, msg := "-", "-", "-"
		if ro := v.Rollout; ro != nil {
			state, step, msg = ro.State, rolloutStepOf(ro), cmp.Or(rolloutFirstLine(ro.Message), "-")
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\n", v.Name, len(v.Stacks), state, step, msg)
	}
	tw.Flush()
}

// rolloutStepOf is "N/M", the rollout's step of its steps; "M/M" when complete.
func rolloutStepOf(ro *model.RolloutStatus) string {
	if ro.Step == 0 {
		return fmt.Sprintf("%d/%d", len(ro.Steps), len(ro.Steps))
	}
	return fmt.Sprintf("%d/%d", ro.Step, len(ro.Steps))
}

// printRollout prints a set's state line, its failing generators, and
// its rollout as a table with a row per stack of each step: step,
// selector, maxUpdate, stack, state, target commit and applied commit.
func printRollout(w io.Writer, v model.StackSetView) {
	for _, g := range v.Generators {
		if g.Error != "" {
			fmt.Fprintf(w, "generator %s (%s) failing: %s\n", g.Path, g.Kind, rolloutFirstLine(g.Error))
		}
	}
	ro := v.Rollout
	if ro == nil {
		fmt.Fprintf(w, "stack set %s: no rollout (no rollingSync strategy); %d stacks: %s\n", v.Name, len(v.Stacks), cmp.Or(strings.Join(v.Stacks, ", "), "-"))
		return
	}
	fmt.Fprintln(w, rolloutLine(v.Name, ro))
	if ro.State == model.RolloutHalted {
		fmt.Fprintf(w, "  stackd rollout resume %s, or stackd rollout abort %s\n", v.Name, v.Name)
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "STEP\tSELECTOR\tMAXUPDATE\tSTACK\tSTATE\tCOMMIT\tAPPLIED")
	for i, st := range ro.Steps {
		step, maxUpd := strconv.Itoa(i+1), "-"
		if i+1 == ro.Step {
			step += "*" // the current step
		}
		if st.MaxUpdate > 0 {
			maxUpd = strconv.Itoa(st.MaxUpdate)
		}
		sel := cmp.Or(st.Selector, "(the rest)")
		if len(st.Stacks) == 0 {
			fmt.Fprintf(tw, "%s\t%s\t%s\t-\t-\t-\t-\n", step, sel, maxUpd)
		}
		for _, m := range st.Stacks {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", step, sel, maxUpd, m.Name, m.State, shortSHA(m.Commit), shortSHA(m.AppliedCommit))
		}
	}
	tw.Flush()
}

// rolloutLine says in a line where a set's rollout stands.
func rolloutLine(set string, ro *model.RolloutStatus) string {
	line := fmt.Sprintf("stack set %s: rollout %s", set, ro.State)
	switch {
	case ro.Step == 0:
		line += fmt.Sprintf(", %d of %d steps done", len(ro.Steps), len(ro.Steps))
	default:
		line += fmt.Sprintf(" at step %d of %d", ro.Step, len(ro.Steps))
	}
	if len(ro.HaltedBy) > 0 {
		line += ", halted by " + strings.Join(ro.HaltedBy, ", ")
	}
	if msg := rolloutFirstLine(ro.Message); msg != "" {
		line += ": " + msg
	}
	return line
}

// rolloutFirstLine is s's first line, trimmed.
func rolloutFirstLine(s string) string {
	first, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return first
}
