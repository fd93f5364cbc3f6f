package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/stackd/stackd/daemon/model"
)

// auditCommand runs "stackd audit [--stack S] [--actor A] [--since D]
// [--limit N] [--json]": the audit trail, newest first.
func auditCommand(args []string, stdout io.Writer) error {
	fs := newFlagSet("audit")
	opts := clientFlags(fs)
	stack := fs.String("stack", "", "only the entries about this stack (needs read on it; the whole trail needs admin)")
	actor := fs.String("actor", "", "only the entries of this user or token name")
	since := fs.String("since", "", "only the entries since a time (2006-01-02T15:04:05Z) or an age (90m, 24h, 7d)")
	limit := fs.Int("limit", 50, "at most this many entries")
	asJSON := fs.Bool("json", false, "print the API's JSON")
	if err := parseFlags(fs, "audit [--stack S] [--actor A] [--since D] [--json] [flags]", args, stdout); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return usageErrorf("audit: unexpected argument %q", fs.Arg(0))
	}
	if *limit < 1 {
		return usageErrorf("audit: --limit must be positive")
	}
	c, err := opts.newClient()
	if err != nil {
		return err
	}
	q := url.Values{"limit": {strconv.Itoa(*limit)}}
	for k, v := range map[string]string{"stack": *stack, "actor": *actor, "since": *since} {
		if v != "" {
			q.Set(k, v)
		}
	}
	var out struct {
		Entries []model.AuditEntry `json:"entries"`
		Next    string             `json:"next,omitempty"`
	}
	if err := c.getJSON("/api/v1/audit?"+q.Encode(), &out); err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	printAudit(stdout, out.Entries)
	return nil
}

// printAudit prints audit entries as a table, one line each.
func printAudit(w io.Writer, entries []model.AuditEntry) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TIME\tWHO\tACTION\tSTACK\tOUTCOME\tREQUEST\tFROM\tREASON")
	for _, e := range entries {
		reason, _, _ := strings.Cut(strings.TrimSpace(e.Reason), "\n")
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", e.Time.UTC().Format("2006-01-02 15:04:05"), e.Principal,
			e.Action, cmp.Or(e.Stack, "-"), e.Outcome, fmt.Sprintf("%s %s %d", e.Method, e.Path, e.Status),
			cmp.Or(e.Remote, "-"), cmp.Or(shorten(reason, 100), "-"))
	}
	tw.Flush()
}
