package web

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"mime"
	"net/http"
	"net/url"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/stackd/stackd/access"
	"github.com/stackd/stackd/daemon"
	"github.com/stackd/stackd/daemon/livelog"
	"github.com/stackd/stackd/daemon/spec"
	"github.com/stackd/stackd/model"
)

// The UI is server-rendered from embedded templates and static files; it
// fetches nothing from elsewhere, and every page is complete without
// JavaScript. ui.js only keeps pages current: it re-fetches a page every
// few seconds to swap its [data-live] regions, and streams a running
// update's log.

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// historyLimit is how many updates a stack page lists.
const historyLimit = 20

// revisionLimit is how many config revisions the config page lists; the
// API pages through them all.
const revisionLimit = 20

// logTail bounds the bytes of a log a stack page renders; the API serves
// the whole log.
const logTail = 64 << 10

// timeLayout is how the UI shows times, always in UTC.
const timeLayout = "2006-01-02 15:04:05 UTC"

// uiCSP allows the page's own origin only: no inline script or style and
// no third-party asset.
const uiCSP = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; " +
	"connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"

// routeUI registers the web UI's routes.
func (s *Server) routeUI(mux *http.ServeMux) {
	mux.HandleFunc("GET /{$}", s.uiList)
	mux.HandleFunc("GET /stacks/{name}", s.uiStack)
	mux.HandleFunc("GET /config", s.uiConfig)
	mux.HandleFunc("GET /previews", s.uiPreviews)
	mux.HandleFunc("GET /previews/{id}", s.uiPreview)
	mux.HandleFunc("GET /audit", s.uiAudit)
	mux.Handle("POST /stacks/{name}/sync",
		http.NewCrossOriginProtection().Handler(http.HandlerFunc(s.uiSync)))
	mux.Handle("POST /stacks/{name}/approve",
		http.NewCrossOriginProtection().Handler(http.HandlerFunc(s.uiApprove)))
	mux.Handle("POST /stacks/{name}/reject",
		http.NewCrossOriginProtection().Handler(http.HandlerFunc(s.uiReject)))
	mux.Handle("POST /stacks/{name}/preview",
		http.NewCrossOriginProtection().Handler(http.HandlerFunc(s.uiPreviewNow)))
	mux.Handle("POST /config/reload",
		http.NewCrossOriginProtection().Handler(http.HandlerFunc(s.uiReload)))
	mux.HandleFunc("GET /static/", serveStatic)
}

// uiReload reloads the config from the config page's form (the one-off
// override of the mass-removal guard), then shows the page, which says
// how it went.
func (s *Server) uiReload(w http.ResponseWriter, r *http.Request) {
	n, err := allowRemovalOf(r)
	if err != nil {
		s.renderError(w, r, http.StatusBadRequest, "Bad request", err.Error())
		return
	}
	if err := s.doReload(r, n); err != nil {
		s.log.Warn("config reload from the UI not applied", "allowRemoval", n, "err", err)
	}
	http.Redirect(w, r, "/config", http.StatusSeeOther)
}

// permission says whether the page's viewer may take an action: the UI
// shows one it may not take disabled, with the reason, never hides it.
type permission struct {
	Allowed bool
	// Reason is the whole refusal, shown on hover; Hint is its short
	// form, shown beside the disabled button.
	Reason, Hint string
}

// may is p's permission to take action on stack (nil: daemon-wide).
func (s *Server) may(p model.Principal, action string, stack *access.StackRef) permission {
	ok, why := s.allowed(p, action, stack)
	if ok {
		return permission{Allowed: true}
	}
	perm := permission{Reason: why, Hint: "needs a role with " + action + " on this stack"}
	switch {
	case s.opts.Access == nil:
		perm.Hint = "needs the API token"
		if stack != nil {
			perm.Reason += "; on the daemon's host: stackd " + action + " " + stack.Name
		}
	case p.Kind == model.PrincipalAnonymous && s.opts.SignIn != nil:
		perm.Hint = "sign in to " + action
	case stack == nil:
		perm.Hint = "needs a role with " + action + " on every stack"
	}
	return perm
}

// viewer is who looks at a page, for the header.
type viewer struct {
	model.Principal
	// SignIn says sign-in is set up; Login is then its URL, returning to
	// the page.
	SignIn bool
	Login  string
}

// Sections of the UI, which the header's navigation marks.
const (
	sectionStacks   = "stacks"
	sectionConfig   = "config"
	sectionPreviews = "previews"
	sectionAudit    = "audit"
)

// page is what every page's layout needs.
type page struct {
	Title string
	// Section is the navigation entry the page belongs to, if any.
	Section string
	// Version is stackd's version, if known.
	Version string
	Stats   model.Stats
	// Config is the config's status; zero unless DaemonRead.
	Config model.ConfigStatus
	// Who is the viewer; DaemonRead says they may read what is not any
	// one stack's (the config, the cluster).
	Who        viewer
	DaemonRead bool
	// Live pages refresh themselves, by script or else by reloading.
	Live bool
}

func (s *Server) newPage(r *http.Request, title string) page {
	p := principal(r)
	pg := page{Title: title, Version: s.opts.Version, Stats: s.api.Stats(),
		Who: viewer{Principal: p, SignIn: s.opts.SignIn != nil}}
	if pg.Who.SignIn {
		pg.Who.Login = loginPath + "?" + url.Values{"return": {returnPath(r)}}.Encode()
	}
	if pg.DaemonRead, _ = s.allowed(p, access.ActionRead, nil); pg.DaemonRead {
		pg.Config = s.api.ConfigStatus()
	}
	return pg
}

// stackItem is a stack's row with what the viewer may do to the stack.
type stackItem struct {
	stackRow
	Sync permission
}

// item is row with p's permissions on v.
func (s *Server) item(p model.Principal, v *model.StackView, row stackRow) stackItem {
	return stackItem{stackRow: row, Sync: s.may(p, access.ActionSync, refOf(v))}
}

// listPage is the stack list at /: a page of the stacks that pass the
// filters (?health=, ?source=, ?q=), after the name ?after=.
type listPage struct {
	page
	Stacks []stackItem
	// All counts every stack the viewer may read, Matched those that
	// pass the filters, Hidden those the viewer may not read.
	All, Matched, Hidden int
	// Health, Source and Q are the filters; Sources the config sources
	// to choose from.
	Health, Source, Q string
	Sources           []string
	// Next is the URL of the next page, empty on the last; First that of
	// the first, empty on it.
	Next, First string
	// Cluster is the cluster as this replica sees it; nil for a single
	// node.
	Cluster *model.ClusterStatus
}

func (s *Server) uiList(w http.ResponseWriter, r *http.Request) {
	q, err := parseStackQuery(r.URL.Query(), defaultPage)
	if err != nil {
		s.renderError(w, r, http.StatusBadRequest, "Bad request", err.Error())
		return
	}
	who := principal(r)
	every := s.stacks.list(s.api)
	all := s.readable(who, every)
	rows, matched, next := q.page(all)
	p := listPage{page: s.newPage(r, "Stacks"), Stacks: make([]stackItem, 0, len(rows)), All: len(all), Matched: matched,
		Hidden: len(every) - len(all), Health: q.health, Source: q.source, Q: q.q}
	p.Live, p.Section = true, sectionStacks
	for _, e := range rows {
		p.Stacks = append(p.Stacks, s.item(who, &e.view, e.row))
	}
	for _, src := range p.Config.Sources {
		p.Sources = append(p.Sources, src.Source)
	}
	link := func(after string) string {
		v := url.Values{}
		for k, val := range map[string]string{"health": q.health, "source": q.source, "q": q.q, "after": after} {
			if val != "" {
				v.Set(k, val)
			}
		}
		if q.limit != defaultPage {
			v.Set("limit", strconv.Itoa(q.limit))
		}
		return "/?" + v.Encode()
	}
	if next != "" {
		p.Next = link(next)
	}
	if q.after != "" {
		p.First = link("")
	}
	if cs, ok := s.api.ClusterStatus(); ok && p.DaemonRead {
		p.Cluster = &cs
	}
	s.render(w, http.StatusOK, "list.html", p)
}

// stackRow summarizes a stack for the list and a stack page's header.
type stackRow struct {
	Name    string
	Removed bool
	// Orphaned says why a stack whose source left is kept.
	Orphaned string
	// Health is Healthy, Progressing, Degraded, or Unknown.
	Health, HealthMessage string
	// Running names the update in flight, if any.
	Running string
	// Last is the last finished update, if any.
	Last *model.LastUpdate
	// Tracking is what the stack follows, whole and split for display.
	Tracking, Repo, Ref string
	// Applied is the last commit an update succeeded with; AppliedRef
	// links it, and LatestFailed is the commit the last update failed
	// with, when that is another.
	Applied      string
	AppliedRef   commitRef
	LatestFailed *commitRef
	// Drift is the last drift check's outcome; nil before any.
	Drift *spec.DriftStatus
	// Holder is the replica acting on the stack (cluster mode).
	Holder string
	// Retry is a failing stack's next attempt, while it has some left.
	Retry *model.Retry
}

func summarize(v model.StackView) stackRow {
	row := stackRow{Name: v.Name, Removed: v.Removed, Orphaned: v.Orphaned, Health: "Unknown", Last: v.Status.LastUpdate, Tracking: v.Tracking,
		Drift: v.Status.Drift, Holder: v.Holder, Retry: v.Status.Retry}
	if h := v.Status.Health; h != nil {
		row.Health, row.HealthMessage = h.Status, h.Message
	}
	if cu := v.Status.CurrentUpdate; cu != nil {
		row.Running = cu.Name
	}
	if lu := v.Status.LastUpdate; lu != nil {
		row.Applied = lu.LastSuccessfulCommit
		row.AppliedRef = refOfCommit(v.CommitURL, lu.LastSuccessfulCommit, v.AppliedCommit)
		if lu.State == model.UpdateFailed && lu.LastAttemptedCommit != "" && lu.LastAttemptedCommit != lu.LastSuccessfulCommit {
			latest := refOfCommit(v.CommitURL, lu.LastAttemptedCommit, v.LatestCommit)
			row.LatestFailed = &latest
		}
	}
	row.Repo, row.Ref = splitTracking(v.Tracking)
	return row
}

// commitRef is a commit as the UI links it: its hash, its page on the
// forge (empty when the repository is on none) and, when known, its
// subject, author and time.
type commitRef struct {
	SHA, URL string
	Info     *model.Commit
}

// refOfCommit is sha's commitRef, with info when it describes sha; url
// is the stack's CommitURL.
func refOfCommit(url, sha string, info *model.Commit) commitRef {
	r := commitRef{SHA: sha}
	if url != "" && isFullSHA(sha) {
		r.URL = strings.ReplaceAll(url, "{sha}", sha)
	}
	if info != nil && info.SHA == sha {
		r.Info = info
	}
	return r
}

// splitTracking splits "<repo>@<ref>" into a short repository name (no
// scheme, user or ".git") and the ref; "program <name>" is kept whole.
func splitTracking(t string) (repo, ref string) {
	i := strings.LastIndex(t, "@")
	if strings.HasPrefix(t, "program ") || i < 0 {
		return t, ""
	}
	repo, ref = t[:i], t[i+1:]
	_, rest, scheme := strings.Cut(repo, "://")
	if scheme {
		repo = rest
	}
	if j := strings.Index(repo, "@"); j >= 0 {
		repo = repo[j+1:]
		if !scheme { // git@host:path
			repo = strings.Replace(repo, ":", "/", 1)
		}
	}
	return strings.TrimSuffix(strings.TrimSuffix(repo, "/"), ".git"), ref
}

// stackPage is a stack's page at /stacks/{name}.
type stackPage struct {
	page
	Stack      stackItem
	View       model.StackView
	Spec       string
	Outputs    []output
	Updates    []model.Update
	UpdatesErr string
	Log        *logView
	Resources  resourcesView
	Preview    *model.StackPreview
	// Approve is the viewer's permission to decide on a plan.
	Approve permission
	// Override is the viewer's permission to override closed change
	// windows.
	Override permission
}

// output is one stack output, rendered for display.
type output struct {
	Name, Value string
	Secret      bool
}

// logView is the tail of the latest update's log.
type logView struct {
	ID, State string
	Text      string
	Truncated bool
	// Follow is the URL streaming the log while the update runs.
	Follow string
	// Raw is the URL of the whole log.
	Raw string
}

func (s *Server) uiStack(w http.ResponseWriter, r *http.Request) {
	v, err := s.api.Stack(r.PathValue("name"))
	if err != nil {
		s.renderAPIError(w, r, err)
		return
	}
	p := stackPage{page: s.newPage(r, v.Name), Stack: s.item(principal(r), &v, summarize(v)), View: v, Spec: specYAML(v.Spec),
		Outputs: outputs(v.Status.Outputs), Override: s.may(principal(r), access.ActionOverride, refOf(&v))}
	p.Live, p.Section = true, sectionStacks
	p.Updates, err = s.api.Updates(v.Name, 0, historyLimit)
	if err != nil {
		p.UpdatesErr = err.Error()
	}
	p.Log = s.latestLog(v, p.Updates)
	p.Resources = s.resourcesOf(v.Name, r.URL.Query().Get("q"))
	p.Preview = s.lastPreviewOf(v.Name)
	p.Approve = s.may(principal(r), access.ActionApprove, refOf(&v))
	s.render(w, http.StatusOK, "stack.html", p)
}

// healthBadge is what the "health" template shows: a health status
// (Healthy, Progressing, Degraded or Unknown) and its message.
type healthBadge struct {
	Health, HealthMessage string
}

// badgeOf is h's badge; an empty status is Unknown.
func badgeOf(h model.Health) healthBadge {
	if h.Status == "" {
		return healthBadge{Health: "Unknown", HealthMessage: h.Message}
	}
	return healthBadge{Health: h.Status, HealthMessage: h.Message}
}

// configBadge is the config's overall health badge: Unknown while the
// daemon reports none.
func configBadge(h *model.Health) healthBadge {
	if h == nil {
		return badgeOf(model.Health{})
	}
	return badgeOf(*h)
}

// configPage is the config's page at /config: its sources and its
// latest revisions.
type configPage struct {
	page
	// Reload is whether the viewer may reload (the guard's override).
	Reload       permission
	Health       healthBadge
	Sources      []sourceRow
	Revisions    []model.ConfigRevision
	RevisionsErr string
}

// sourceRow is a config source as the config page shows it.
type sourceRow struct {
	Source string
	// Git is set for a Git source; Ref is then the ref it follows, empty
	// for the repository's default branch.
	Git *spec.GitDir
	Ref string
	// Commit is the commit in force; Latest the one the ref points at,
	// set only when it differs from Commit.
	Commit, Latest      string
	LastPoll, AppliedAt time.Time
	Stacks              int
	Error               string
	Badge               healthBadge
}

func sourceRowOf(src model.SourceStatus) sourceRow {
	row := sourceRow{Source: src.Source, Git: src.Git, Commit: src.Commit, LastPoll: src.LastPoll,
		AppliedAt: src.AppliedAt, Stacks: src.Stacks, Error: src.Error, Badge: badgeOf(src.Health)}
	if src.Git != nil {
		row.Ref = src.Git.Ref
	}
	if src.LatestCommit != src.Commit {
		row.Latest = src.LatestCommit
	}
	return row
}

func (s *Server) uiConfig(w http.ResponseWriter, r *http.Request) {
	p := configPage{page: s.newPage(r, "Config")}
	p.Reload = s.may(principal(r), access.ActionReload, nil)
	p.Live, p.Section = true, sectionConfig
	p.Health = configBadge(p.Config.Health)
	p.Sources = make([]sourceRow, 0, len(p.Config.Sources))
	for _, src := range p.Config.Sources {
		p.Sources = append(p.Sources, sourceRowOf(src))
	}
	var err error
	if p.Revisions, err = s.api.ConfigRevisions(0, revisionLimit); err != nil {
		p.RevisionsErr = err.Error()
	}
	s.render(w, http.StatusOK, "config.html", p)
}

// latestLog is the log of the update in flight, else of the newest
// update in updates, or nil when there is none.
func (s *Server) latestLog(v model.StackView, updates []model.Update) *logView {
	switch {
	case v.Status.CurrentUpdate != nil:
		return s.updateLog(v.Status.CurrentUpdate.Name, model.UpdateRunning)
	case len(updates) > 0:
		return s.updateLog(updates[0].ID, updates[0].State)
	}
	return nil
}

// updateLog is the tail of update id's log, which is in state: the live
// log, to be followed, while the update runs.
func (s *Server) updateLog(id, state string) *logView {
	lv := &logView{ID: id, State: state}
	base := "/api/v1/updates/" + url.PathEscape(lv.ID) + "/log"
	lv.Raw = base
	data, live, err := s.api.Log(lv.ID)
	switch {
	case err != nil:
		lv.Text = "The log is unavailable: " + err.Error()
	case live != nil:
		lv.State, lv.Follow = model.UpdateRunning, base+"?follow=1"
		data, lv.Truncated = liveTail(live, logTail)
		lv.Text = string(data)
	default:
		data, lv.Truncated = tail(data, logTail)
		lv.Text = string(data)
	}
	return lv
}

// tail is the last n bytes of b at most, starting at a line, and whether
// that left something out.
func tail(b []byte, n int) ([]byte, bool) {
	if len(b) <= n {
		return b, false
	}
	b = b[len(b)-n:]
	if i := bytes.IndexByte(b, '\n'); i >= 0 {
		b = b[i+1:]
	}
	return b, true
}

// liveTail is tail of what l holds, without copying the rest.
func liveTail(l *livelog.Log, n int) ([]byte, bool) {
	_, end, _, _ := l.Since(1 << 62)
	data, _, _, _ := l.Since(max(end-int64(n)-1, 0))
	return tail(data, n)
}

// specYAML renders a (redacted) spec as YAML.
func specYAML(spec map[string]any) string {
	if spec == nil {
		return ""
	}
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(spec); err != nil {
		return "# cannot render the spec: " + err.Error()
	}
	return buf.String()
}

// outputs renders stack outputs by name: strings as they are, other
// values as indented JSON. The daemon has already replaced secret values
// with the string "[secret]".
func outputs(raw map[string]json.RawMessage) []output {
	out := make([]output, 0, len(raw))
	for name, v := range raw {
		o := output{Name: name, Value: string(v)}
		var str string
		var buf bytes.Buffer
		if json.Unmarshal(v, &str) == nil {
			o.Value = str
		} else if json.Indent(&buf, v, "", "  ") == nil {
			o.Value = buf.String()
		}
		o.Secret = o.Value == "[secret]"
		out = append(out, o)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// uiSync asks for a sync of the named stack, then shows its page. The
// guard has checked that the viewer may.
func (s *Server) uiSync(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if r.PostFormValue("overrideWindow") != "" {
		if _, status, err := s.overrideWindow(r, name, r.PostFormValue("reason")); err != nil {
			s.renderError(w, r, status, "Not overridden", err.Error())
			return
		}
		http.Redirect(w, r, stackPath(name), http.StatusSeeOther)
		return
	}
	token, err := s.api.Sync(name)
	if err != nil {
		s.renderAPIError(w, r, err)
		return
	}
	s.log.Info("sync requested", "stack", name, "request", token, "from", "ui")
	http.Redirect(w, r, stackPath(name), http.StatusSeeOther)
}

// errorPage is the page of a failed request.
type errorPage struct {
	page
	Status  int
	Message string
}

// renderAPIError shows the daemon's error: a 404 page for an unknown
// stack, else a 500 page.
func (s *Server) renderAPIError(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, daemon.ErrUnknownStack) {
		s.renderError(w, r, http.StatusNotFound, "Not found", fmt.Sprintf("There is no stack named %q.", r.PathValue("name")))
		return
	}
	s.renderError(w, r, http.StatusInternalServerError, "Error", err.Error())
}

func (s *Server) renderError(w http.ResponseWriter, r *http.Request, status int, title, msg string) {
	s.render(w, status, "error.html", errorPage{page: s.newPage(r, title), Status: status, Message: msg})
}

// render executes a page's template into a buffer, so that a failure
// yields a clean 500, and writes it with the UI's headers.
func (s *Server) render(w http.ResponseWriter, status int, name string, data any) {
	var buf bytes.Buffer
	if err := pages[name].ExecuteTemplate(&buf, "layout", data); err != nil {
		s.log.Error("cannot render page", "page", name, "err", err)
		http.Error(w, "cannot render the page", http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Security-Policy", uiCSP)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// pages maps each page's file to its template, parsed with the layout.
var pages = parsePages("list.html", "stack.html", "config.html", "previews.html", "preview.html", "audit.html", "error.html")

func parsePages(names ...string) map[string]*template.Template {
	m := make(map[string]*template.Template, len(names))
	for _, name := range names {
		m[name] = template.Must(template.New(name).Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/"+name))
	}
	return m
}

var funcs = template.FuncMap{
	"asset":       assetURL,
	"stackPath":   stackPath,
	"previewPath": previewPath,
	"counts":      counts,
	"took":        took,
	"short":       shortSHA,
	"short12":     shortCommit,
	"badge":       configBadge,
	"utc":         formatTime,
	"iso":         func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
	"age":         age,
	"duration":    duration,
	"changes":     ChangeCounts,
	"lower":       strings.ToLower,
	"list":        func(items ...string) []string { return items },
	"join":        strings.Join,
	"actor":       model.Principal.String,
	"shortType":   shortType,
	"commitRef":   refOfCommit,
}

func stackPath(name string) string { return "/stacks/" + url.PathEscape(name) }

// shortSHA abbreviates a commit hash to 7 characters; anything else is
// kept.
func shortSHA(s string) string {
	if isFullSHA(s) {
		return s[:7]
	}
	return s
}

// shortCommit abbreviates a full commit hash to 12 characters, as the
// config page shows commits; anything else is kept.
func shortCommit(s string) string {
	if isFullSHA(s) {
		return s[:12]
	}
	return s
}

// isFullSHA reports whether s is a whole commit hash (SHA-1 or SHA-256).
func isFullSHA(s string) bool {
	return len(s) >= 40 && strings.Trim(strings.ToLower(s), "0123456789abcdef") == ""
}

// formatTime is t in UTC, or "" for the zero time.
func formatTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(timeLayout)
}

// age is how long ago t was, coarsely: "12s ago", "5m ago", "3h ago",
// "2d ago"; for a time to come (a retry), "in 12s".
func age(t time.Time) string {
	d := time.Since(t)
	switch {
	case t.IsZero():
		return ""
	case d < -time.Second:
		return "in " + span(-d)
	case d < time.Second:
		return "just now"
	}
	return span(d) + " ago"
}

// span is d coarsely: 12s, 5m, 3h, 2d.
func span(d time.Duration) string {
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

// duration is how long an update took (or has run), rounded to seconds.
func duration(u model.Update) string {
	end := u.EndTime
	if end.IsZero() {
		end = time.Now()
	}
	if u.StartTime.IsZero() || end.Before(u.StartTime) {
		return ""
	}
	return end.Sub(u.StartTime).Round(time.Second).String()
}

// ChangeCounts lists resource counts by operation ("1 update, 3 same"),
// "same" last.
func ChangeCounts(m map[string]int) string {
	ops := make([]string, 0, len(m))
	for op := range m {
		if op != "same" {
			ops = append(ops, op)
		}
	}
	sort.Strings(ops)
	if _, ok := m["same"]; ok {
		ops = append(ops, "same")
	}
	parts := make([]string, len(ops))
	for i, op := range ops {
		parts[i] = fmt.Sprintf("%d %s", m[op], op)
	}
	return strings.Join(parts, ", ")
}

// asset is one embedded static file with its validator.
type asset struct {
	body    []byte
	ctype   string
	version string // a prefix of the body's SHA-256
}

// assets holds the files below static/, by name.
var assets = loadAssets()

func loadAssets() map[string]asset {
	m := map[string]asset{}
	entries, err := fs.ReadDir(staticFS, "static")
	if err != nil {
		panic(err)
	}
	for _, e := range entries {
		body, err := staticFS.ReadFile("static/" + e.Name())
		if err != nil {
			panic(err)
		}
		sum := sha256.Sum256(body)
		m[e.Name()] = asset{body: body, ctype: mime.TypeByExtension(path.Ext(e.Name())), version: hex.EncodeToString(sum[:6])}
	}
	return m
}

// assetURL is a static file's URL, versioned by its content so that it
// can be cached for good.
func assetURL(name string) (string, error) {
	a, ok := assets[name]
	if !ok {
		return "", fmt.Errorf("no static file %q", name)
	}
	return "/static/" + name + "?v=" + a.version, nil
}

// serveStatic serves an embedded file with an ETag; the versioned URLs
// the pages use are cached for a year, others revalidated.
func serveStatic(w http.ResponseWriter, r *http.Request) {
	a, ok := assets[strings.TrimPrefix(r.URL.Path, "/static/")]
	if !ok {
		http.NotFound(w, r)
		return
	}
	h := w.Header()
	h.Set("Content-Type", a.ctype)
	h.Set("ETag", `"`+a.version+`"`)
	h.Set("X-Content-Type-Options", "nosniff")
	if r.URL.Query().Get("v") == a.version {
		h.Set("Cache-Control", "public, max-age=31536000, immutable")
	} else {
		h.Set("Cache-Control", "no-cache")
	}
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(a.body))
}
