package forgetest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/stackd/stackd/daemon/review"
)

// dialect is what one forge's API looks like.
type dialect struct {
	prefix  string // API path prefix
	firstID int64  // comment IDs start after it
	routes  []route
	// maxComment is the longest comment body, in characters.
	maxComment int
	// auth extracts the credential from h: present false when there is
	// none; problem set when it is in the wrong header or scheme.
	auth func(h http.Header) (cred string, present bool, problem string)
	// headers returns what is wrong with r's other headers.
	headers func(r *http.Request) []string
	// errorBody is the JSON of an error answer.
	errorBody func(code int, msg string) any
	// invalid is the code of an answer to a body that breaks the API.
	invalid int
	// Pagination: query parameter names, page size default and cap, and
	// the headers that tell the pages.
	pageParam, sizeParam string
	defaultSize, maxSize int
	pageHeaders          func(c *call, page, size, total int)
}

// route is one documented endpoint.
type route struct {
	method string
	// path follows the prefix; "{name}" matches one segment.
	path string
	// query lists the parameters the endpoint documents.
	query []string
	// body returns a value to decode the JSON body into; nil when the
	// endpoint takes none.
	body  func() checker
	serve func(s *Server, c *call)
}

// checker is a decoded request body that checks its own fields.
type checker interface {
	problems(d *dialect) []string
}

// call is one request being served.
type call struct {
	s      *Server
	w      http.ResponseWriter
	r      *http.Request
	params map[string]string
	body   checker
}

var dialects = map[review.Kind]*dialect{
	review.GitHub: githubDialect(),
	review.GitLab: gitlabDialect(),
	review.Gitea:  giteaDialect(),
}

func (d *dialect) fail(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, d.errorBody(code, msg))
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// serveAPI records a request, checks it and serves it.
func (s *Server) serveAPI(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		s.problem(r, "reading body: %v", err)
	}
	rec := &recorder{ResponseWriter: w, status: http.StatusOK}
	i := s.record(r, body)
	s.handle(rec, r, body)
	s.mu.Lock()
	s.requests[i].Status = rec.status
	s.notifyLocked()
	s.mu.Unlock()
}

func (s *Server) record(r *http.Request, body []byte) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = append(s.requests, Request{
		Method: r.Method, Path: r.URL.EscapedPath(), Query: r.URL.RawQuery,
		Header: r.Header.Clone(), Body: string(body),
	})
	s.notifyLocked()
	return len(s.requests) - 1
}

func (s *Server) handle(w http.ResponseWriter, r *http.Request, body []byte) {
	rt, params := s.dialect.match(r)
	if rt == nil {
		s.problem(r, "undocumented endpoint for %s", s.kind)
		s.dialect.fail(w, http.StatusNotFound, "Not Found")
		return
	}
	s.checkHeaders(r, rt)
	if code := s.takeFailure(); code != 0 {
		s.failNow(w, code)
		return
	}
	if !s.authorize(w, r) {
		return
	}
	c := &call{s: s, w: w, r: r, params: params}
	if s.decode(c, rt, body) {
		rt.serve(s, c)
	}
}

// match finds the route of r.
func (d *dialect) match(r *http.Request) (*route, map[string]string) {
	rest, ok := strings.CutPrefix(r.URL.EscapedPath(), d.prefix+"/")
	if !ok {
		return nil, nil
	}
	segs := strings.Split(rest, "/")
	for i := range d.routes {
		rt := &d.routes[i]
		if rt.method != r.Method {
			continue
		}
		if params, ok := matchPath(rt.path, segs); ok {
			return rt, params
		}
	}
	return nil, nil
}

func matchPath(pattern string, segs []string) (map[string]string, bool) {
	pat := strings.Split(pattern, "/")
	if len(pat) != len(segs) {
		return nil, false
	}
	params := map[string]string{}
	for i, p := range pat {
		seg, err := url.PathUnescape(segs[i])
		if err != nil || seg == "" {
			return nil, false
		}
		if name, ok := strings.CutPrefix(p, "{"); ok {
			params[strings.TrimSuffix(name, "}")] = seg
		} else if p != seg {
			return nil, false
		}
	}
	return params, true
}

// checkHeaders checks the query parameters and the headers other than
// the credential.
func (s *Server) checkHeaders(r *http.Request, rt *route) {
	for k, vs := range r.URL.Query() {
		if !slices.Contains(rt.query, k) {
			s.problem(r, "undocumented query parameter %q", k)
		}
		for _, v := range vs {
			if s.token != "" && strings.Contains(v, s.token) {
				s.problem(r, "the token is in the URL")
			}
		}
	}
	for _, p := range s.dialect.headers(r) {
		s.problem(r, "%s", p)
	}
}

// takeFailure returns the code to fail this request with, 0 for none.
func (s *Server) takeFailure() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failN <= 0 {
		return 0
	}
	s.failN--
	return s.failCode
}

func (s *Server) failNow(w http.ResponseWriter, code int) {
	msg := http.StatusText(code)
	switch code {
	case http.StatusTooManyRequests:
		w.Header().Set("Retry-After", "0")
	case http.StatusForbidden:
		w.Header().Set("Retry-After", "0")
		msg = "You have exceeded a secondary rate limit. Please wait a few minutes before you try again."
	}
	s.dialect.fail(w, code, msg)
}

// authorize checks the credential; it answers 401 and returns false when
// the request may not go on.
func (s *Server) authorize(w http.ResponseWriter, r *http.Request) bool {
	cred, present, bad := s.dialect.auth(r.Header)
	if bad != "" {
		s.problem(r, "%s", bad)
		s.dialect.fail(w, http.StatusUnauthorized, "401 Unauthorized")
		return false
	}
	switch {
	case present && s.token != "" && cred == s.token:
		return true
	case !present && s.token == "" && r.Method == http.MethodGet:
		return true
	case !present && s.token == "":
		// Anonymous writes fail on every forge; not the client's fault.
		s.dialect.fail(w, http.StatusUnauthorized, "401 Unauthorized: this needs a token")
		return false
	}
	s.mu.Lock()
	expected := s.badAuthOK
	s.mu.Unlock()
	if !expected {
		s.problem(r, "credential missing or not the token (present: %v)", present)
	}
	s.dialect.fail(w, http.StatusUnauthorized, "Bad credentials: "+cred)
	return false
}

// decode reads the JSON body into the route's type and checks it; it
// answers and returns false when the body breaks the API.
func (s *Server) decode(c *call, rt *route, body []byte) bool {
	if rt.body == nil {
		if len(body) > 0 {
			s.problem(c.r, "endpoint takes no body, got %d bytes", len(body))
		}
		return true
	}
	if mt, _, err := mime.ParseMediaType(c.r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		s.problem(c.r, "Content-Type %q is not application/json", c.r.Header.Get("Content-Type"))
	}
	v := rt.body()
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil && dec.More() {
		err = fmt.Errorf("data after the JSON object")
	}
	probs := v.problems(s.dialect)
	if err != nil {
		probs = append([]string{"body: " + err.Error()}, probs...)
	}
	for _, p := range probs {
		s.problem(c.r, "%s", p)
	}
	if len(probs) > 0 {
		s.dialect.fail(c.w, s.dialect.invalid, "Validation Failed: "+strings.Join(probs, "; "))
		return false
	}
	c.body = v
	return true
}

// positive returns path parameter name as a positive integer, or answers
// 404 and returns false.
func (c *call) positive(name string) (int64, bool) {
	n, err := strconv.ParseInt(c.params[name], 10, 64)
	if err != nil || n <= 0 {
		c.s.problem(c.r, "%s %q is not a positive integer", name, c.params[name])
		c.s.dialect.fail(c.w, http.StatusNotFound, "Not Found")
		return 0, false
	}
	return n, true
}

var shaRE = regexp.MustCompile(`^[0-9a-fA-F]{4,64}$`)

// sha returns the commit SHA of the path, or answers 422 and returns
// false.
func (c *call) sha() (string, bool) {
	sha := c.params["sha"]
	if !shaRE.MatchString(sha) {
		c.s.problem(c.r, "sha %q is not a hex commit SHA", sha)
		c.s.dialect.fail(c.w, c.s.dialect.invalid, "No commit found for SHA: "+sha)
		return "", false
	}
	return sha, true
}

// page reads the pagination parameters, writes the pagination headers
// for total items and returns the bounds of the page asked.
func (c *call) page(total int) (lo, hi int, ok bool) {
	d := c.s.dialect
	page, ok1 := c.queryInt(d.pageParam, 1, 1)
	size, ok2 := c.queryInt(d.sizeParam, d.defaultSize, 0)
	if !ok1 || !ok2 {
		d.fail(c.w, http.StatusBadRequest, "invalid pagination parameters")
		return 0, 0, false
	}
	if size == 0 {
		size = d.defaultSize
	}
	size = min(size, d.maxSize)
	d.pageHeaders(c, page, size, total)
	lo = min((page-1)*size, total)
	return lo, min(lo+size, total), true
}

// queryInt reads an integer query parameter of at least least, def when
// absent.
func (c *call) queryInt(name string, def, least int) (int, bool) {
	v := c.r.URL.Query().Get(name)
	if v == "" {
		return def, true
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < least {
		c.s.problem(c.r, "query parameter %s=%q is not an integer >= %d", name, v, least)
		return 0, false
	}
	return n, true
}

// lastPage is the number of the last page of total items.
func lastPage(size, total int) int {
	return max(1, (total+size-1)/size)
}

// linkHeader is an RFC 8288 Link header to the first, previous, next and
// last pages, as GitHub, GitLab and Gitea send it.
func linkHeader(c *call, page, size, total int) string {
	last := lastPage(size, total)
	link := func(p int, rel string) string {
		q := c.r.URL.Query()
		q.Set(c.s.dialect.pageParam, strconv.Itoa(p))
		q.Set(c.s.dialect.sizeParam, strconv.Itoa(size))
		u := url.URL{Scheme: "http", Host: c.r.Host, Path: c.r.URL.Path, RawPath: c.r.URL.RawPath, RawQuery: q.Encode()}
		return fmt.Sprintf("<%s>; rel=%q", u.String(), rel)
	}
	var links []string
	if page < last {
		links = append(links, link(page+1, "next"), link(last, "last"))
	}
	if page > 1 {
		links = append(links, link(1, "first"), link(page-1, "prev"))
	}
	return strings.Join(links, ", ")
}

// statusFields are the fields of a commit status body, as pointers to
// tell absent from empty.
type statusFields struct {
	state, context, description, targetURL *string
	contextName                            string   // the field's name
	states                                 []string // the forge's enum
	emptyTargetOK                          bool     // target_url "" means none
}

func (f statusFields) problems() []string {
	var p []string
	switch {
	case f.state == nil:
		p = append(p, "state is required")
	case !slices.Contains(f.states, *f.state):
		p = append(p, fmt.Sprintf("state %q is not one of %v", *f.state, f.states))
	}
	if f.context == nil || *f.context == "" {
		p = append(p, f.contextName+" must be a non-empty string")
	}
	if f.description != nil && utf8.RuneCountInString(*f.description) > 140 {
		p = append(p, fmt.Sprintf("description has %d characters, more than 140", utf8.RuneCountInString(*f.description)))
	}
	if f.targetURL != nil {
		p = append(p, targetURLProblems(*f.targetURL, f.emptyTargetOK)...)
	}
	return p
}

func targetURLProblems(raw string, emptyOK bool) []string {
	if raw == "" {
		if emptyOK {
			return nil
		}
		return []string{"target_url is empty: omit it instead"}
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return []string{fmt.Sprintf("target_url %q is not an absolute http(s) URL", raw)}
	}
	return nil
}

// commentBody is {"body": ...}, the body of a comment to create or edit
// on GitHub and Gitea.
type commentBody struct {
	Body *string `json:"body"`
}

func (b *commentBody) problems(d *dialect) []string { return bodyProblems(b.Body, d.maxComment) }

func bodyProblems(body *string, limit int) []string {
	switch {
	case body == nil || *body == "":
		return []string{"body must be a non-empty string"}
	case utf8.RuneCountInString(*body) > limit:
		return []string{fmt.Sprintf("body has %d characters, more than %d", utf8.RuneCountInString(*body), limit)}
	}
	return nil
}

// setStatusLocked stores a status; state is review's word for raw.
func (s *Server) setStatusLocked(repo, sha string, st review.Status, raw string) {
	key := repo + "@" + sha
	s.statuses[key] = append(s.statuses[key], status{Status: st, raw: raw})
	s.notifyLocked()
}

// editLocked replaces a comment's body.
func (s *Server) editLocked(c *comment, body string) {
	s.seq++
	c.Body, c.Edits, c.updated = body, c.Edits+1, s.seq
	s.notifyLocked()
}

// commentsOfLocked returns the comments of pr, oldest first.
func (s *Server) commentsOfLocked(pr prKey) []*comment {
	var out []*comment
	for _, c := range s.comments {
		if c.pr == pr {
			out = append(out, c)
		}
	}
	return out
}

func (s *Server) filesOf(pr prKey) []change {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.files[pr]
}

func str(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// recorder keeps the status code answered.
type recorder struct {
	http.ResponseWriter
	status int
}

func (r *recorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}

// editComment edits comment id of pr (number 0: any pull request of the
// repository) to body and answers it as render shapes it, or the
// dialect's 404 with notFound.
func (s *Server) editComment(c *call, pr prKey, id int64, body string, render func(*comment) map[string]any, notFound string) {
	s.mu.Lock()
	cm := s.findCommentLocked(pr.repo, pr.number, id)
	var out map[string]any
	if cm != nil {
		s.editLocked(cm, body)
		out = render(cm)
	}
	s.mu.Unlock()
	if cm == nil {
		s.dialect.fail(c.w, http.StatusNotFound, notFound)
		return
	}
	writeJSON(c.w, http.StatusOK, out)
}
