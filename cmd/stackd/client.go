package main

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/stackd/stackd/daemon/model"
	"github.com/stackd/stackd/web/view"
)

// client talks to a running daemon's HTTP API.
type client struct {
	server string
	token  string
	// hint is added to a 401 answer: where the token comes from.
	hint string
	http *http.Client
}

// clientOpts are the flags every client command shares.
type clientOpts struct {
	server, tokenFile, dataDir string
	// caFile verifies an https server (see httpClient).
	caFile string
}

// clientFlags defines the flags every client command shares.
func clientFlags(fs *flag.FlagSet) *clientOpts {
	o := &clientOpts{}
	fs.StringVar(&o.server, "server", "", "URL of the daemon's HTTP API (default: the one the daemon of --data-dir recorded in its "+apiURLFile+", else "+defaultServer+")")
	fs.StringVar(&o.tokenFile, "api-token-file", "", "file holding the API token (default: the daemon's "+apiTokenFile+" in --data-dir)")
	fs.StringVar(&o.dataDir, "data-dir", defaultDataDir, "data directory of the daemon on this host: its "+apiTokenFile+" is sent to that daemon only")
	fs.StringVar(&o.caFile, "ca-file", "", "PEM CA certificates that verify an https --server (default: the system's)")
	return o
}

func (o *clientOpts) newClient() (*client, error) {
	c, err := newClient(o.server, o.tokenFile, o.dataDir)
	if err != nil {
		return nil, err
	}
	if c.http, err = httpClient(o.caFile); err != nil {
		return nil, err
	}
	return c, nil
}

// newClient is a client of the daemon at server (see serverOf: "" for
// the daemon of dataDir) that sends the token of tokenFile, or without
// one the token in dataDir (see localToken).
func newClient(server, tokenFile, dataDir string) (*client, error) {
	server, err := serverOf(server, dataDir, tokenFile == "")
	if err != nil {
		return nil, err
	}
	c := &client{server: strings.TrimSuffix(server, "/"), http: &http.Client{}}
	if tokenFile == "" {
		c.token, c.hint = localToken(c.server, dataDir)
		if c.token != "" {
			return c, nil
		}
		// A person signed in with `stackd login`.
		session, err := loadSession(c.server)
		if err != nil {
			return nil, err
		}
		if session != "" {
			c.token = session
			c.hint = "the session of stackd login for " + c.server + " was refused (sessions expire): run stackd login --server " + c.server
		}
		return c, nil
	}
	data, err := os.ReadFile(tokenFile)
	if err != nil {
		return nil, fmt.Errorf("read the API token: %w", err)
	}
	c.token = strings.TrimSpace(string(data))
	c.hint = "the API token of --api-token-file " + tokenFile + " was refused"
	return c, nil
}

// do sends a request and returns the response when its status is 2xx;
// otherwise the API's error message.
func (c *client) do(method, path string) (*http.Response, error) {
	return c.doJSON(method, path, nil)
}

// doJSON is do with body, when not nil, sent as JSON.
func (c *client) doJSON(method, path string, body any) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, c.server+path, rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("cannot reach stackd at %s: %w%s", c.server, err, tlsHint(err))
	}
	if resp.StatusCode/100 == 2 {
		return resp, nil
	}
	defer resp.Body.Close()
	var e struct{ Error string }
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if json.Unmarshal(raw, &e) != nil || e.Error == "" {
		e.Error = strings.TrimSpace(string(raw))
	}
	msg := fmt.Sprintf("%s %s: %s: %s", method, path, resp.Status, e.Error)
	if resp.StatusCode == http.StatusUnauthorized && c.hint != "" {
		msg += "\n" + c.hint
	}
	return nil, &apiError{msg, resp.StatusCode}
}

// apiError is an answer of the API that is not 2xx.
type apiError struct {
	msg  string
	code int
}

func (e *apiError) Error() string { return e.msg }

// isStatus says whether err is an answer of the API with one of codes.
func isStatus(err error, codes ...int) bool {
	var ae *apiError
	return errors.As(err, &ae) && slices.Contains(codes, ae.code)
}

func (c *client) getJSON(path string, v any) error {
	resp, err := c.do(http.MethodGet, path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		return fmt.Errorf("GET %s: decode: %w", path, err)
	}
	return nil
}

// statusCommand runs "stackd status [NAME] [--json]".
func statusCommand(args []string, stdout io.Writer) error {
	fs := newFlagSet("status")
	opts := clientFlags(fs)
	asJSON := fs.Bool("json", false, "print the API's JSON")
	if err := parseFlags(fs, "status [NAME] [--json] [flags]", args, stdout); err != nil {
		return err
	}
	if fs.NArg() > 1 {
		return usageErrorf("status: at most one stack name")
	}
	c, err := opts.newClient()
	if err != nil {
		return err
	}
	// The API's shapes: a stack's full view, or the list's summary view.
	var out any
	var stacks []view.StackSummary
	var gate *model.Gate
	if name := fs.Arg(0); name != "" {
		var v model.StackView
		err = c.getJSON("/api/v1/stacks/"+url.PathEscape(name), &v)
		out, stacks, gate = v, []view.StackSummary{view.SummaryOf(&v)}, v.Status.Gate
	} else {
		var list struct {
			Stacks []view.StackSummary `json:"stacks"`
			Total  int                 `json:"total"`
		}
		err = c.getJSON("/api/v1/stacks?view=summary", &list)
		out, stacks = list, list.Stacks
	}
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	// A single node answers 404: no Node. A caller whose roles cover
	// some stacks only may not read the cluster or the config (403): the
	// table shows their stacks alone.
	var cs model.ClusterStatus
	if err := c.getJSON("/api/v1/cluster", &cs); err != nil && !isStatus(err, http.StatusNotFound, http.StatusForbidden) {
		return err
	}
	if fs.NArg() == 0 {
		var cfg model.ConfigStatus
		if err := c.getJSON("/api/v1/config", &cfg); err != nil && !isStatus(err, http.StatusForbidden) {
			return err
		}
		printCluster(stdout, cs)
		if cfg.Paused {
			fmt.Fprintln(stdout, "PAUSED: no operation starts until stackd resume")
			fmt.Fprintln(stdout)
		}
		if n := len(cfg.Orphaned); n > 0 {
			fmt.Fprintf(stdout, "ORPHANED: %s: their config source is no longer configured; kept until stackd reload --allow-removal %d\n\n",
				strings.Join(cfg.Orphaned, ", "), n)
		}
		printSources(stdout, cfg.Sources)
	}
	printStacks(stdout, stacks, time.Now(), cs.Node != "")
	if gate != nil && gate.Plan != nil {
		fmt.Fprintln(stdout)
		printGate(stdout, gate)
	}
	return nil
}

// printCluster prints the cluster as the replica sees it, then a blank
// line; nothing for a single node.
func printCluster(w io.Writer, cs model.ClusterStatus) {
	if cs.Node == "" {
		return
	}
	session := "session ok"
	if !cs.Session {
		session = "NO SESSION: acting on no stack"
	}
	leader := cs.Leader
	if leader == "" {
		leader = "-"
	}
	fmt.Fprintf(w, "cluster: this replica %s, leader %s, %s, lease %s\n", cs.Node, leader, session, time.Duration(cs.LeaseTTL))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "MEMBER\tSTACKS\tURL\tUP")
	for _, m := range cs.Members {
		url := m.URL
		if url == "" {
			url = "-"
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\n", m.Name, m.Stacks, url, since(time.Now(), m.Started))
	}
	tw.Flush()
	fmt.Fprintln(w)
}

// printSources prints one line per config source: its health, the
// source, the commit in force (with "→ <latest>" when the ref points at
// another one) and its error's first problem (a cause first), after the
// count of its problems, if any; then a blank
// line. It prints nothing when there is no source.
func printSources(w io.Writer, sources []model.SourceStatus) {
	if len(sources) == 0 {
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "HEALTH\tCONFIG SOURCE\tCOMMIT\tERROR")
	for _, src := range sources {
		health := src.Health.Status
		if health == "" {
			health = "-"
		}
		commit := shortCommit(src.Commit)
		if src.LatestCommit != "" && src.LatestCommit != src.Commit {
			commit += " → " + shortCommit(src.LatestCommit)
		}
		line := health + "\t" + src.Source + "\t" + commit
		if errLine := model.ProblemSummary(src.Error); errLine != "" {
			line += "\t" + errLine
		}
		fmt.Fprintln(tw, line)
	}
	tw.Flush()
	fmt.Fprintln(w)
}

// printStacks prints a table like kubectl get; an OWNER column when a
// stack has an owner (the StackSet that generates it).
func printStacks(w io.Writer, stacks []view.StackSummary, now time.Time, holders bool) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	head := "NAME\tHEALTH\tREADY\tLAST UPDATE\tSTATE\tAGE\tCOMMIT\tDRIFT\tREASON"
	if holders {
		head += "\tHOLDER"
	}
	owners := slices.ContainsFunc(stacks, func(v view.StackSummary) bool { return v.Owner != "" })
	if owners {
		head += "\tOWNER"
	}
	fmt.Fprintln(tw, head)
	for _, v := range stacks {
		health, ready, reason := v.Health, cmp.Or(v.Ready, "-"), v.Reason
		if v.Condition != "" {
			reason = view.ConditionWord(&model.Condition{Type: v.Condition, Reason: v.Reason})
		}
		if first, _, _ := strings.Cut(strings.TrimSpace(v.Message), "\n"); first != "" && v.Reason != model.ReasonStackProcessing {
			reason += ": " + shorten(first, 100) // the error's first line
		}
		if v.Orphaned != "" {
			reason = "Orphaned: " + v.Orphaned
		}
		last, state, age, commit := "-", "-", "-", "-"
		if lu := v.LastUpdate; lu != nil {
			last, state, commit = lu.Type, lu.State, shortSHA(lu.Commit)
			if strings.HasPrefix(v.Tracking, "program ") && commit != "-" {
				commit = "program:" + commit // a Program's content hash, not a commit
			}
			age = since(now, lu.Time)
		}
		if v.Retry != nil {
			state = fmt.Sprintf("failing, retry %d of %d at %s", v.Retry.Attempt, v.Retry.Of, v.Retry.At.Local().Format(time.TimeOnly))
		}
		if v.Running != "" {
			state = "running"
		}
		drift := cmp.Or(v.Drift, "-")
		line := fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s", v.Name, health, ready, last, state, age, commit, drift, reason)
		if holders {
			line += "\t" + cmp.Or(v.Holder, "-")
		}
		if owners {
			line += "\t" + cmp.Or(v.Owner, "-")
		}
		fmt.Fprintln(tw, line)
	}
	tw.Flush()
}

// shorten cuts s to at most n runes, marking the cut.
func shorten(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

func shortSHA(s string) string {
	if s == "" {
		return "-"
	}
	return s[:min(7, len(s))]
}

// shortCommit abbreviates a config source's commit to 12 characters, as
// the web UI does; "-" for none.
func shortCommit(s string) string {
	if s == "" {
		return "-"
	}
	return s[:min(12, len(s))]
}

// since is a kubectl-style age: 45s, 12m, 3h, 5d.
func since(now, t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := now.Sub(t)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

// syncCommand runs "stackd sync NAME".
func syncCommand(args []string, stdout io.Writer) error {
	fs := newFlagSet("sync")
	opts := clientFlags(fs)
	override := fs.Bool("override-window", false, "run through closed change windows (needs the override action and --reason)")
	reason := fs.String("reason", "", "why the change cannot wait for its change windows (recorded in the audit trail)")
	if err := parseFlags(fs, "sync NAME [flags]", args, stdout); err != nil {
		return err
	}
	switch {
	case fs.NArg() != 1:
		return usageErrorf("sync: give one stack name")
	case *override && strings.TrimSpace(*reason) == "":
		return usageErrorf("sync: --override-window needs --reason \"why it cannot wait\"")
	case !*override && *reason != "":
		return usageErrorf("sync: --reason goes with --override-window")
	}
	c, err := opts.newClient()
	if err != nil {
		return err
	}
	var body any
	if *override {
		body = map[string]any{"overrideWindow": true, "reason": *reason}
	}
	resp, err := c.doJSON(http.MethodPost, "/api/v1/stacks/"+url.PathEscape(fs.Arg(0))+"/sync", body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var out struct {
		Request             string
		Refresh             bool
		ChangeWindow        *model.ChangeWindowStatus
		ChangeWindowMessage string
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return fmt.Errorf("sync: decode: %w", err)
	}
	if *override {
		fmt.Fprintf(stdout, "sync of %s through its change windows requested (%s)\n", fs.Arg(0), out.Request)
		return nil
	}
	how := ""
	if out.Refresh {
		how = " with refresh: the stack drifted, and what changed is put back"
	}
	fmt.Fprintf(stdout, "sync of %s requested%s (%s)\n", fs.Arg(0), how, out.Request)
	if out.ChangeWindow != nil {
		return &waitsError{fmt.Sprintf("the sync of %s waits: change windows are closed: %s; it runs by itself when they open, or now with --override-window --reason \"why it cannot wait\"",
			fs.Arg(0), out.ChangeWindowMessage)}
	}
	return nil
}

// reloadCommand runs "stackd reload [--allow-removal N]": the config is
// read again; with N, this one reload may remove up to N stacks past the
// mass-removal guard (recorded in the audit trail).
func reloadCommand(args []string, stdout io.Writer) error {
	fs := newFlagSet("reload")
	opts := clientFlags(fs)
	allow := fs.Int("allow-removal", 0, "let this reload remove up to this many stacks, past the mass-removal guard")
	if err := parseFlags(fs, "reload [flags]", args, stdout); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return usageErrorf("reload: unexpected argument %q", fs.Arg(0))
	}
	if *allow < 0 {
		return usageErrorf("reload: --allow-removal wants a number of stacks, not %d", *allow)
	}
	c, err := opts.newClient()
	if err != nil {
		return err
	}
	path := "/api/v1/reload"
	if *allow > 0 {
		path += "?allowRemoval=" + strconv.Itoa(*allow)
	}
	resp, err := c.do(http.MethodPost, path)
	if err != nil {
		return err
	}
	resp.Body.Close()
	fmt.Fprintln(stdout, "config reloaded")
	return nil
}

// pauseCommand runs "stackd pause [--wait D]" and "stackd resume": no
// operation starts while paused; pause returns once none runs (or the
// wait ended), so that the backend can be copied.
func pauseCommand(name string, args []string, stdout io.Writer) error {
	fs := newFlagSet(name)
	opts := clientFlags(fs)
	wait := fs.Duration("wait", 5*time.Minute, "how long pause waits for running operations to end")
	if err := parseFlags(fs, name+" [flags]", args, stdout); err != nil {
		return err
	}
	if fs.NArg() != 0 {
		return usageErrorf("%s: unexpected argument %q", name, fs.Arg(0))
	}
	c, err := opts.newClient()
	if err != nil {
		return err
	}
	path := "/api/v1/resume"
	if name == "pause" {
		path = "/api/v1/pause?wait=" + url.QueryEscape(wait.String())
	}
	resp, err := c.do(http.MethodPost, path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var out struct {
		Paused  bool
		Running int
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return fmt.Errorf("%s: decode: %w", name, err)
	}
	switch {
	case !out.Paused:
		fmt.Fprintln(stdout, "resumed: operations start again")
	case out.Running > 0:
		return fmt.Errorf("paused, but %d operation(s) still run after %s", out.Running, *wait)
	default:
		fmt.Fprintln(stdout, "paused: no operation runs or starts until stackd resume")
	}
	return nil
}

// lastOperation is the ID of stack's running update, else of the newest
// in its history, whatever its type.
func lastOperation(c *client, stack string) (string, error) {
	base := "/api/v1/stacks/" + url.PathEscape(stack)
	var v model.StackView
	if err := c.getJSON(base, &v); err != nil {
		return "", err
	}
	if cu := v.Status.CurrentUpdate; cu != nil {
		return cu.Name, nil
	}
	var page struct{ Updates []model.Update }
	if err := c.getJSON(base+"/updates?limit=1", &page); err != nil {
		return "", err
	}
	if len(page.Updates) == 0 {
		return "", errors.New("the stack has no update yet")
	}
	return page.Updates[0].ID, nil
}

// lastOfTypes is the ID of stack's newest update (running or not) of
// types, a comma-separated list of update types.
func lastOfTypes(c *client, stack, types string) (string, error) {
	var page struct{ Updates []model.Update }
	q := url.Values{"type": {types}, "limit": {"1"}}
	if err := c.getJSON("/api/v1/stacks/"+url.PathEscape(stack)+"/updates?"+q.Encode(), &page); err != nil {
		return "", err
	}
	if len(page.Updates) == 0 {
		return "", fmt.Errorf("the stack has no %s update in its history", types)
	}
	return page.Updates[0].ID, nil
}

// logsCommand runs "stackd logs NAME [--update ID | --type T[,T…]]
// [--follow]": the log of update ID; else of the newest update of the
// types T; else of the running update, else of the last operation of any
// type (a drift check, a preview).
func logsCommand(args []string, stdout io.Writer) error {
	fs := newFlagSet("logs")
	opts := clientFlags(fs)
	follow := fs.Bool("follow", false, "stream the running update's log until it ends")
	update := fs.String("update", "", "the update whose log to print (an ID of the stack's history)")
	types := fs.String("type", "", "print the log of the newest update of these types (up, preview, refresh, destroy, drift; comma-separated)")
	if err := parseFlags(fs, "logs NAME [--update ID | --type T[,T...]] [--follow] [flags]", args, stdout); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageErrorf("logs: give one stack name")
	}
	if *update != "" && *types != "" {
		return usageErrorf("logs: give --update or --type, not both")
	}
	c, err := opts.newClient()
	if err != nil {
		return err
	}
	id := *update
	switch {
	case *types != "":
		if id, err = lastOfTypes(c, fs.Arg(0), *types); err != nil {
			return err
		}
	case id == "":
		if id, err = lastOperation(c, fs.Arg(0)); err != nil {
			return err
		}
	default:
		if stack, _, err := model.ParseUpdateID(id); err != nil || stack != fs.Arg(0) {
			return usageErrorf("logs: %q is not an update of stack %s", id, fs.Arg(0))
		}
	}
	path := "/api/v1/updates/" + url.PathEscape(id) + "/log"
	if *follow {
		path += "?follow=1"
	}
	resp, err := c.do(http.MethodGet, path)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, err = io.Copy(stdout, resp.Body)
	return err
}
