package main

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/stackd/stackd/daemon"
	"github.com/stackd/stackd/web"
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
	var before daemon.StackPreview
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
func awaitPreview(c *client, path string, after time.Time, wait time.Duration) (daemon.StackPreview, error) {
	deadline := time.Now().Add(wait)
	for {
		var p daemon.StackPreview
		err := c.getJSON(path, &p)
		if err != nil && !isStatus(err, http.StatusNotFound) {
			return p, err
		}
		if err == nil && p.Time.After(after) && p.State != daemon.UpdateRunning {
			return p, nil
		}
		if time.Now().After(deadline) {
			return p, fmt.Errorf("the preview did not end within %s", wait)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// printPreview prints p, and fails when the preview did.
func printPreview(w io.Writer, stack string, p daemon.StackPreview) error {
	fmt.Fprintf(w, "preview of %s at %s, %s (took %s): %s", stack, shortCommit(p.Commit),
		p.Time.UTC().Format(time.RFC3339), p.Duration, p.State)
	if len(p.Changes) > 0 {
		fmt.Fprintf(w, ", %s", web.ChangeCounts(p.Changes))
	}
	fmt.Fprintf(w, "\n\n%s", p.Diff)
	if p.State == daemon.UpdateFailed {
		return errors.New("the preview failed: " + p.Message)
	}
	return nil
}
