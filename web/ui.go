package web

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"mime"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/stackd/stackd/daemon"
	"github.com/stackd/stackd/daemon/access"
	"github.com/stackd/stackd/daemon/model"
	"github.com/stackd/stackd/web/view"
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
	mux.HandleFunc("GET /stacksets", s.uiStackSets)
	mux.HandleFunc("GET /stacksets/{name}", s.uiStackSet)
	mux.Handle("POST /stacksets/{name}/resume",
		http.NewCrossOriginProtection().Handler(http.HandlerFunc(s.uiResumeStackSet)))
	mux.Handle("POST /stacksets/{name}/abort",
		http.NewCrossOriginProtection().Handler(http.HandlerFunc(s.uiAbortStackSet)))
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

// may is the permission of r's principal to take action on stack (nil:
// daemon-wide).
func (s *Server) may(r *http.Request, action string, stack *access.StackRef) view.Permission {
	p := principal(r)
	ok, why := s.allowed(p, action, stack)
	if ok {
		return view.Permission{Allowed: true}
	}
	perm := view.Permission{Reason: why, Hint: "needs a role with " + action + " on this stack"}
	switch {
	case s.opts.Access == nil:
		perm.Hint = "needs the API token"
		if stack != nil {
			perm.Reason += "; on the daemon's host: stackd " + action + " " + stack.Name
		}
	case p.Kind == model.PrincipalAnonymous && (s.opts.SignIn != nil || s.opts.TokenSignIn != nil):
		perm.Hint, perm.SignIn = "sign in to "+action, s.signInURL(returnPath(r))
	case stack == nil:
		perm.Hint = "needs a role with " + action + " on every stack"
	}
	return perm
}

func (s *Server) newPage(r *http.Request, title string) view.Page {
	p := principal(r)
	pg := view.Page{Title: title, Version: s.opts.Version, Stats: s.api.Stats(),
		Who: view.Viewer{Principal: p, Login: s.signInURL(returnPath(r))}}
	pg.Who.SignIn = pg.Who.Login != ""
	pg.StackSets = s.opts.StackSets != nil
	if _, bearer := bearerToken(r); !bearer && p.Kind != model.PrincipalAnonymous {
		c, err := r.Cookie(sessionCookie)
		pg.Who.Session = err == nil && c.Value != ""
	}
	if pg.DaemonRead, _ = s.allowed(p, access.ActionRead, nil); pg.DaemonRead {
		pg.Config = s.api.ConfigStatus()
	}
	return pg
}

// item is row with the permissions of r's principal on the stack ref.
func (s *Server) item(r *http.Request, ref *access.StackRef, row view.StackRow) view.StackItem {
	return view.StackItem{StackRow: row, Sync: s.may(r, access.ActionSync, ref)}
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
	p := view.ListPage{Page: s.newPage(r, "Stacks"), Stacks: make([]view.StackItem, 0, len(rows)), All: len(all), Matched: matched,
		Hidden: len(every) - len(all), Health: q.health, Source: q.source, Q: q.q}
	p.Live, p.Section = true, view.SectionStacks
	for _, e := range rows {
		ref := e.ref // e is shared by every request
		p.Stacks = append(p.Stacks, s.item(r, &ref, e.row))
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

func (s *Server) uiStack(w http.ResponseWriter, r *http.Request) {
	v, err := s.api.Stack(r.PathValue("name"))
	if err != nil {
		s.renderAPIError(w, r, err)
		return
	}
	p := view.StackPage{Page: s.newPage(r, v.Name), Stack: s.item(r, refOf(&v), view.Summarize(v)), View: v, Spec: view.SpecYAML(v.Spec),
		Outputs: view.Outputs(v.Status.Outputs), Override: s.may(r, access.ActionOverride, refOf(&v))}
	p.Live, p.Section = true, view.SectionStacks
	recent, err := s.api.Updates(v.Name, 0, historyLimit)
	if err != nil {
		p.UpdatesErr = err.Error()
	}
	if !s.historyOf(w, r, &p, recent) {
		return
	}
	p.Log = s.latestLog(v, recent)
	p.Resources = s.resourcesOf(v.Name, r.URL.Query().Get("q"))
	p.Preview = s.lastPreviewOf(v.Name)
	p.Approve = s.may(r, access.ActionApprove, refOf(&v))
	s.render(w, http.StatusOK, "stack.html", p)
}

func (s *Server) uiConfig(w http.ResponseWriter, r *http.Request) {
	p := view.ConfigPage{Page: s.newPage(r, "Config")}
	p.Reload = s.may(r, access.ActionReload, nil)
	p.Live, p.Section = true, view.SectionConfig
	p.Health = view.ConfigBadge(p.Config.Health)
	p.Sources = make([]view.SourceRow, 0, len(p.Config.Sources))
	for _, src := range p.Config.Sources {
		p.Sources = append(p.Sources, view.SourceRowOf(src))
	}
	var err error
	if p.Revisions, err = s.api.ConfigRevisions(0, revisionLimit); err != nil {
		p.RevisionsErr = err.Error()
	}
	s.render(w, http.StatusOK, "config.html", p)
}

// historyOf fills in the stack page's history: recent (the newest
// historyLimit updates), or, with ?history=<type>, the newest
// historyLimit of that type. An unknown type is answered with a 400
// page, and false.
func (s *Server) historyOf(w http.ResponseWriter, r *http.Request, p *view.StackPage, recent []model.Update) bool {
	typ := r.URL.Query().Get("history")
	types, err := updateTypes([]string{typ})
	if err != nil {
		s.renderError(w, r, http.StatusBadRequest, "Bad request", err.Error())
		return false
	}
	p.History, p.HistoryType = view.HistoryFilters(p.View.Name, typ), typ
	if types == nil || p.UpdatesErr != "" {
		p.Updates = recent
		return true
	}
	if p.Updates, err = s.updatesOf(p.View.Name, types, 0, historyLimit); err != nil {
		p.UpdatesErr = err.Error()
	}
	return true
}

// applyingTypes are the updates that change a stack, whose log the stack
// page shows rather than a newer drift check's or preview's.
var applyingTypes = map[string]bool{model.UpdateUp: true, model.UpdateDestroy: true, model.UpdateRefresh: true}

// latestLog is the log the stack page shows: the update in flight's;
// else the preview of a change a gate holds; else the newest update that
// changes the stack (an up, destroy or
// refresh); else the newest update's. recent are the stack's newest
// historyLimit updates, newest first. An update newer than the one shown
// (a drift check, a preview) is named in the log's Newer. Nil when the
// stack has no update.
func (s *Server) latestLog(v model.StackView, recent []model.Update) *view.Log {
	if cu := v.Status.CurrentUpdate; cu != nil {
		return s.updateLog(cu.Name, model.UpdateRunning)
	}
	if len(recent) == 0 {
		return nil
	}
	shown := s.heldPreview(v, recent)
	if shown == nil {
		shown = s.lastApplying(v.Name, recent)
	}
	if shown == nil {
		shown = &recent[0]
	}
	lv := s.updateLog(shown.ID, shown.State)
	lv.Type = shown.Type
	if newest := recent[0]; newest.Seq > shown.Seq {
		lv.Newer = &newest
	}
	return lv
}

// heldPreview is the preview of the change a gate holds (a plan awaiting
// approval, a change a policy denied): what the stack waits on, so the
// Log card shows it rather than the last up. Nil when no gate holds one,
// or the store cannot tell.
func (s *Server) heldPreview(v model.StackView, recent []model.Update) *model.Update {
	g := v.Status.Gate
	if g == nil || g.Update == "" {
		return nil
	}
	for i := range recent {
		if recent[i].ID == g.Update {
			return &recent[i]
		}
	}
	u, err := s.api.Update(g.Update)
	if err != nil {
		return nil
	}
	return &u
}

// lastApplying is the newest update of stack that changes it: from
// recent (its newest historyLimit updates), else from the store, further
// back. Nil when there is none, or the store cannot tell.
func (s *Server) lastApplying(stack string, recent []model.Update) *model.Update {
	for i := range recent {
		if applyingTypes[recent[i].Type] {
			return &recent[i]
		}
	}
	if len(recent) < historyLimit {
		return nil // recent is the whole history
	}
	older, err := s.updatesOf(stack, applyingTypes, recent[len(recent)-1].Seq, 1)
	if err != nil || len(older) == 0 {
		return nil
	}
	return &older[0]
}

// updateLog is the tail of update id's log, which is in state: the live
// log, to be followed, while the update runs.
func (s *Server) updateLog(id, state string) *view.Log {
	lv := &view.Log{ID: id, State: state}
	base := "/api/v1/updates/" + url.PathEscape(lv.ID) + "/log"
	lv.Raw = base
	data, live, err := s.api.Log(lv.ID)
	switch {
	case err != nil:
		lv.Text = "The log is unavailable: " + err.Error()
	case live != nil:
		lv.State, lv.Follow = model.UpdateRunning, base+"?follow=1"
		data, lv.Truncated = view.LiveTail(live, logTail)
		lv.Text = string(data)
	default:
		data, lv.Truncated = view.Tail(data, logTail)
		lv.Text = string(data)
	}
	return lv
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
		http.Redirect(w, r, view.StackPath(name), http.StatusSeeOther)
		return
	}
	token, err := s.api.Sync(name)
	if err != nil {
		s.renderAPIError(w, r, err)
		return
	}
	s.log.Info("sync requested", "stack", name, "request", token, "from", "ui")
	http.Redirect(w, r, view.StackPath(name), http.StatusSeeOther)
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
	s.render(w, status, "error.html", view.ErrorPage{Page: s.newPage(r, title), Status: status, Message: msg})
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
var pages = parsePages("list.html", "stack.html", "config.html", "previews.html", "preview.html", "audit.html", "error.html", "signin.html",
	"stacksets.html", "stackset.html")

func parsePages(names ...string) map[string]*template.Template {
	m := make(map[string]*template.Template, len(names))
	for _, name := range names {
		m[name] = template.Must(template.New(name).Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/"+name))
	}
	return m
}

var funcs = template.FuncMap{
	"asset":       assetURL,
	"stackPath":   view.StackPath,
	"previewPath": view.PreviewPath,
	"setPath":     view.StackSetPath,
	"ownerPath":   view.OwnerPath,
	"subjectPath": view.SubjectPath,
	"counts":      view.Counts,
	"took":        view.Took,
	"short":       view.ShortSHA,
	"short12":     view.ShortCommit,
	"badge":       view.ConfigBadge,
	"utc":         view.FormatTime,
	"iso":         func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
	"age":         view.Age,
	"duration":    view.Duration,
	"changes":     view.ChangeCounts,
	"lower":       strings.ToLower,
	"list":        func(items ...string) []string { return items },
	"join":        strings.Join,
	"actor":       model.Principal.String,
	"shortType":   view.ShortType,
	"commitRef":   view.RefOfCommit,
	"updateType":  view.UpdateType,
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
