package main

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/stackd/stackd/daemon/model"
	"github.com/stackd/stackd/web/view"
)

// diffCommand runs "stackd diff NAME [--last] [--wait D]": it asks the
// daemon for a read-only preview of the stack at its latest commit,
// waits for it and prints its diff; --last prints the last one without
// starting another.
func diffCommand(args []string, stdout io.Writer) error {
	fs := newFlagSet("diff")
	opts := clientFlags(fs)
	last := fs.Bool("last", false, "print the last preview instead of starting one")
	wait := fs.Duration("wait", 10*time.Minute, "how long to wait for the preview")
	if err := parseFlags(fs, "diff NAME [--last] [--wait D] [flags]", args, stdout); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageErrorf("diff: give one stack name")
	}
	c, err := opts.newClient()
	if err != nil {
		return err
	}
	path := "/api/v1/stacks/" + url.PathEscape(fs.Arg(0)) + "/preview"
	var before model.StackPreview
	if err := c.getJSON(path, &before); err != nil && !isStatus(err, http.StatusNotFound) {
		return err
	}
	if *last {
		if before.Time.IsZero() {
			return fmt.Errorf("stack %s has no preview yet: run stackd diff %s", fs.Arg(0), fs.Arg(0))
		}
		return printPreview(stdout, fs.Arg(0), before)
	}
	resp, err := c.do(http.MethodPost, path)
	if err != nil {
		return err
	}
	resp.Body.Close()
	p, err := awaitPreview(c, path, before.Time, *wait)
	if err != nil {
		return err
	}
	return printPreview(stdout, fs.Arg(0), p)
}

// awaitPreview polls path until a preview newer than after has ended.
func awaitPreview(c *client, path string, after time.Time, wait time.Duration) (model.StackPreview, error) {
	deadline := time.Now().Add(wait)
	for {
		var p model.StackPreview
		err := c.getJSON(path, &p)
		if err != nil && !isStatus(err, http.StatusNotFound) {
			return p, err
		}
		if err == nil && p.Time.After(after) && p.State != model.UpdateRunning {
			return p, nil
		}
		if time.Now().After(deadline) {
			return p, fmt.Errorf("the preview did not end within %s", wait)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// printPreview prints p, and fails when the preview did.
func printPreview(w io.Writer, stack string, p model.StackPreview) error {
	fmt.Fprintf(w, "preview of %s at %s, %s (took %s): %s", stack, shortCommit(p.Commit),
		p.Time.UTC().Format(time.RFC3339), p.Duration, p.State)
	if len(p.Changes) > 0 {
		fmt.Fprintf(w, ", %s", view.ChangeCounts(p.Changes))
	}
	fmt.Fprintf(w, "\n\n%s", p.Diff)
	if p.State == model.UpdateFailed {
		return errors.New("the preview failed: " + p.Message)
	}
	return nil
}

// describeCommand runs "stackd describe NAME": one stack in words, as
// kubectl describe does, from its view and its resources.
func describeCommand(args []string, stdout io.Writer) error {
	fs := newFlagSet("describe")
	opts := clientFlags(fs)
	if err := parseFlags(fs, "describe NAME [flags]", args, stdout); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageErrorf("describe: give one stack name")
	}
	c, err := opts.newClient()
	if err != nil {
		return err
	}
	base := "/api/v1/stacks/" + url.PathEscape(fs.Arg(0))
	var v model.StackView
	if err := c.getJSON(base, &v); err != nil {
		return err
	}
	var rs model.Resources
	if err := c.getJSON(base+"/resources", &rs); err != nil {
		return err
	}
	printDescription(stdout, v, rs, time.Now())
	return nil
}

// printDescription writes v and its resources rs as describe shows them.
func printDescription(w io.Writer, v model.StackView, rs model.Resources, now time.Time) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	row := func(k, format string, args ...any) {
		fmt.Fprintf(tw, "%s:\t%s\n", k, continued(fmt.Sprintf(format, args...), "\t"))
	}
	s := view.SummaryOf(&v)
	row("Name", "%s", v.Name)
	row("Health", "%s%s", s.Health, prefixed(" (", s.Message, ")"))
	row("Tracking", "%s", orDash(v.Tracking))
	row("Source", "%s", orDash(v.Source))
	if v.Owner != "" {
		row("Owner", "%s", v.Owner)
	}
	if lu := v.Status.LastUpdate; lu != nil {
		row("Applied commit", "%s", describeCommit(lu.LastSuccessfulCommit, v.AppliedCommit))
		if lu.LastAttemptedCommit != lu.LastSuccessfulCommit {
			row("Latest commit", "%s, %s", describeCommit(lu.LastAttemptedCommit, v.LatestCommit), lu.State)
		}
		row("Last update", "%s %s %s, %s ago%s", lu.Name, lu.Type, lu.State, since(now, lu.LastResyncTime), prefixed(": ", lu.Message, ""))
	} else {
		row("Applied commit", "-")
	}
	if cu := v.Status.CurrentUpdate; cu != nil {
		row("Running", "%s at %s", cu.Name, shortCommit(cu.Commit))
	}
	if d := v.Status.Drift; d != nil {
		row("Drift", "%s, checked %s ago (%d drifted)%s", d.State, since(now, d.LastCheck), len(d.Resources), prefixed(": ", d.Message, ""))
	} else {
		row("Drift", "not checked")
	}
	tw.Flush()
	fmt.Fprintln(w, "\nConditions:")
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  TYPE\tSTATUS\tREASON\tMESSAGE")
	for _, c := range v.Status.Conditions {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", c.Type, c.Status, c.Reason, continued(c.Message, "  \t\t\t"))
	}
	tw.Flush()
	fmt.Fprintln(w, "\nOutputs:")
	for _, k := range slices.Sorted(maps.Keys(v.Status.Outputs)) {
		fmt.Fprintf(w, "  %s: %s\n", k, v.Status.Outputs[k])
	}
	fmt.Fprintf(w, "\nResources: %d", len(rs.Resources))
	if rs.Update != "" {
		fmt.Fprintf(w, " (as of %s)", rs.Update)
	}
	fmt.Fprintln(w)
	counts := map[string]int{}
	for _, r := range rs.Resources {
		counts[r.Type]++
		if r.Drift == model.ResourceDrifted || r.Drift == model.ResourceDeleted {
			counts[r.Drift+": "+r.Name]++
		}
	}
	for _, k := range slices.Sorted(maps.Keys(counts)) {
		fmt.Fprintf(w, "  %-40s %d\n", k, counts[k])
	}
}

// continued is text, a cell of a tabwriter's last column, with each line
// after the first behind prefix, the empty cells before it: a multi-line
// error lines up under its first line, not at the left margin. Trailing
// newlines are dropped. It is pure.
func continued(text, prefix string) string {
	return strings.ReplaceAll(strings.TrimRight(text, "\n"), "\n", "\n"+prefix)
}

// describeCommit is sha, short, with its subject, author and time when
// info describes it.
func describeCommit(sha string, info *model.Commit) string {
	if sha == "" {
		return "-"
	}
	out := shortCommit(sha)
	if info != nil && info.SHA == sha {
		out += fmt.Sprintf(" %q by %s, %s", info.Subject, info.Author, info.Time.UTC().Format(time.RFC3339))
	}
	return out
}

func prefixed(before, s, after string) string {
	if s == "" {
		return ""
	}
	return before + s + after
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
