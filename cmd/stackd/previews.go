package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/stackd/stackd/daemon/review"
)

// previewsPath is the API's list of open pull requests.
const previewsPath = "/api/v1/previews"

// previewsCommand runs "stackd previews [--json]": the open pull
// requests a running daemon previews, each with its stacks' previews.
func previewsCommand(args []string, stdout io.Writer) error {
	fs := newFlagSet("previews")
	opts := clientFlags(fs)
	asJSON := fs.Bool("json", false, "print the API's JSON")
	if err := parseFlags(fs, "previews [--json] [flags]", args, stdout); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return usageErrorf("previews: unexpected argument %q", fs.Arg(0))
	}
	c, err := opts.newClient()
	if err != nil {
		return err
	}
	body, err := c.getBody(previewsPath)
	if err != nil {
		return err
	}
	if *asJSON {
		var out bytes.Buffer
		if err := json.Indent(&out, body, "", "  "); err != nil {
			return fmt.Errorf("GET %s: %w", previewsPath, err)
		}
		out.WriteByte('\n')
		_, err = stdout.Write(out.Bytes())
		return err
	}
	var list struct {
		PullRequests []review.PullRequest `json:"pullRequests"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		return fmt.Errorf("GET %s: decode: %w", previewsPath, err)
	}
	printPullRequests(stdout, list.PullRequests, time.Now())
	return nil
}

// getBody GETs path and returns the whole (2xx) body.
func (c *client) getBody(path string) ([]byte, error) {
	resp, err := c.do(http.MethodGet, path)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("GET %s: read: %w", path, err)
	}
	return body, nil
}

// printPullRequests prints a line per pull request ("forge repo#N
// title base←head updated") and below it an indented line per stack's
// preview (stack, result, "+create ~update -delete ±replace", duration,
// the error's first line), the stacks it would remove and its own
// error; "no open pull requests" when there is none.
func printPullRequests(w io.Writer, prs []review.PullRequest, now time.Time) {
	if len(prs) == 0 {
		fmt.Fprintln(w, "no open pull requests")
		return
	}
	for i, pr := range prs {
		if i > 0 {
			fmt.Fprintln(w)
		}
		fork := ""
		if pr.Fork {
			fork = " (fork)"
		}
		updated := "-"
		if !pr.UpdatedAt.IsZero() {
			updated = since(now, pr.UpdatedAt) + " ago"
		}
		fmt.Fprintf(w, "%s %s#%d  %s  %s←%s%s  %s\n", pr.Forge, pr.Repo, pr.Number, oneLine(pr.Title, 72),
			pr.BaseBranch, shortSHA(pr.HeadSHA), fork, updated)
		printPreviews(w, pr.Previews)
		if len(pr.Removed) > 0 {
			fmt.Fprintf(w, "    would remove: %s\n", strings.Join(pr.Removed, ", "))
		}
		if pr.Error != "" {
			fmt.Fprintf(w, "    error: %s\n", oneLine(pr.Error, 100))
		}
	}
}

// printPreviews prints a pull request's previews, one indented line each.
func printPreviews(w io.Writer, previews []review.Preview) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, p := range previews {
		stack, took := p.Stack, "-"
		if p.New {
			stack += " (new)"
		}
		if p.Duration > 0 {
			took = p.Duration.Round(time.Second).String()
		}
		c := p.Changes
		line := fmt.Sprintf("    %s\t%s\t+%d ~%d -%d ±%d\t%s", stack, p.Result, c["create"], c["update"], c["delete"], c["replace"], took)
		if p.Error != "" {
			line += "\t" + oneLine(p.Error, 100)
		}
		fmt.Fprintln(tw, line)
	}
	tw.Flush()
}

// oneLine is the first line of s, cut to n runes.
func oneLine(s string, n int) string {
	first, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
	return shorten(first, n)
}
