package forgetest

import (
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/stackd/stackd/daemon/review"
)

// githubDialect is GitHub Enterprise Server's REST API, as documented at
// docs.github.com/rest (pulls, commits/statuses, issues/comments).
func githubDialect() *dialect {
	pages := []string{"page", "per_page"}
	return &dialect{
		prefix:     "/api/v3",
		firstID:    1000000,
		maxComment: 65536,
		auth:       githubAuth,
		headers:    githubHeaders,
		errorBody: func(code int, msg string) any {
			return map[string]any{
				"message":           msg,
				"documentation_url": "https://docs.github.com/rest",
				"status":            strconv.Itoa(code),
			}
		},
		invalid:     http.StatusUnprocessableEntity,
		pageParam:   "page",
		sizeParam:   "per_page",
		defaultSize: 30,
		maxSize:     100,
		pageHeaders: func(c *call, page, size, total int) {
			if l := linkHeader(c, page, size, total); l != "" {
				c.w.Header().Set("Link", l)
			}
		},
		routes: []route{
			{method: "GET", path: "repos/{owner}/{repo}/pulls/{number}", serve: githubGetPull},
			{method: "GET", path: "repos/{owner}/{repo}/pulls/{number}/files", query: pages, serve: githubFiles},
			{method: "POST", path: "repos/{owner}/{repo}/statuses/{sha}", body: func() checker { return &githubStatus{} }, serve: githubSetStatus},
			{method: "GET", path: "repos/{owner}/{repo}/issues/{number}/comments", query: append([]string{"since"}, pages...), serve: githubListComments},
			{method: "POST", path: "repos/{owner}/{repo}/issues/{number}/comments", body: func() checker { return &commentBody{} }, serve: githubCreateComment},
			{method: "PATCH", path: "repos/{owner}/{repo}/issues/comments/{comment_id}", body: func() checker { return &commentBody{} }, serve: githubEditComment},
		},
	}
}

// githubAuth takes "Authorization: Bearer T" or "Authorization: token T".
func githubAuth(h http.Header) (string, bool, string) {
	if h.Get("Private-Token") != "" {
		return "", false, "PRIVATE-TOKEN is GitLab's header, GitHub takes Authorization"
	}
	a := h.Get("Authorization")
	if a == "" {
		return "", false, ""
	}
	scheme, cred, _ := strings.Cut(a, " ")
	switch strings.ToLower(scheme) {
	case "bearer", "token":
		return cred, true, ""
	}
	return "", false, fmt.Sprintf("Authorization scheme %q is neither Bearer nor token", scheme)
}

var apiVersionRE = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}$`)

// githubHeaders requires what GitHub documents for every request: a
// User-Agent, an Accept of GitHub's media type and a REST API version
// (go-github sends application/vnd.github.v3+json and 2022-11-28).
func githubHeaders(r *http.Request) []string {
	var p []string
	if r.Header.Get("User-Agent") == "" {
		p = append(p, "GitHub requires a User-Agent header")
	}
	if !strings.Contains(r.Header.Get("Accept"), "application/vnd.github") {
		p = append(p, fmt.Sprintf("Accept %q is not GitHub's media type application/vnd.github+json", r.Header.Get("Accept")))
	}
	if v := r.Header.Get("X-GitHub-Api-Version"); !apiVersionRE.MatchString(v) {
		p = append(p, fmt.Sprintf("X-GitHub-Api-Version %q is not a REST API version (YYYY-MM-DD)", v))
	}
	return p
}

// githubStatus is the body of POST /repos/{owner}/{repo}/statuses/{sha}.
type githubStatus struct {
	State       *string `json:"state"`
	TargetURL   *string `json:"target_url"`
	Description *string `json:"description"`
	Context     *string `json:"context"`
}

func (b *githubStatus) problems(*dialect) []string {
	return statusFields{
		state: b.State, context: b.Context, description: b.Description, targetURL: b.TargetURL,
		contextName: "context", states: []string{"error", "failure", "pending", "success"},
	}.problems()
}

func githubRepo(c *call) string { return c.params["owner"] + "/" + c.params["repo"] }

func githubFiles(s *Server, c *call) {
	n, ok := c.positive("number")
	if !ok {
		return
	}
	files := s.filesOf(prKey{githubRepo(c), int(n)})
	lo, hi, ok := c.page(len(files))
	if !ok {
		return
	}
	out := []map[string]any{}
	for _, f := range files[lo:hi] {
		m := map[string]any{
			"sha": blobSHA(f.path), "filename": f.path, "status": "modified",
			"additions": 1, "deletions": 1, "changes": 2, "patch": "@@ -1 +1 @@",
		}
		if f.from != "" {
			m["status"], m["previous_filename"] = "renamed", f.from
		}
		out = append(out, m)
	}
	writeJSON(c.w, http.StatusOK, out)
}

// githubGetPull answers a pull request that SetPullRequest or SetAuthor
// named, trimmed to its identity, state, head and author, or 404 as
// GitHub does for one it does not know.
func githubGetPull(s *Server, c *call) {
	n, ok := c.positive("number")
	if !ok {
		return
	}
	repo := githubRepo(c)
	st, author, ok := s.pullOf(prKey{repo, int(n)})
	if !ok {
		s.dialect.fail(c.w, http.StatusNotFound, "Not Found")
		return
	}
	out := map[string]any{
		"id": 2000 + n, "number": n, "state": openClosed(st), "merged": st.Merged,
		"html_url": fmt.Sprintf("http://%s/%s/pull/%d", c.r.Host, repo, n), "title": "Change things",
		"head": map[string]any{"ref": "feature", "sha": st.Head}, "base": map[string]any{"ref": "main"},
	}
	if author != nil {
		out["user"] = map[string]any{"login": author.Username, "id": author.ID, "type": "User"}
	}
	writeJSON(c.w, http.StatusOK, out)
}

// openClosed is the state of st as GitHub and Gitea spell it.
func openClosed(st PullRequest) string {
	if st.Closed {
		return "closed"
	}
	return "open"
}

func githubSetStatus(s *Server, c *call) {
	sha, ok := c.sha()
	if !ok {
		return
	}
	b := c.body.(*githubStatus)
	st := review.Status{Context: *b.Context, State: review.State(*b.State), Description: str(b.Description), TargetURL: str(b.TargetURL)}
	s.mu.Lock()
	s.setStatusLocked(githubRepo(c), sha, st, *b.State)
	s.nextID++
	id := s.nextID
	s.mu.Unlock()
	writeJSON(c.w, http.StatusCreated, map[string]any{
		"id": id, "node_id": "SC_" + strconv.FormatInt(id, 10), "state": st.State,
		"description": st.Description, "target_url": nullable(st.TargetURL), "context": st.Context,
		"created_at": now(), "updated_at": now(), "creator": githubUser(),
	})
}

func githubListComments(s *Server, c *call) {
	n, ok := c.positive("number")
	if !ok {
		return
	}
	s.mu.Lock()
	list := s.commentsOfLocked(prKey{githubRepo(c), int(n)})
	out := []map[string]any{}
	lo, hi, ok := c.page(len(list))
	if ok {
		for _, cm := range list[lo:hi] {
			out = append(out, githubComment(c, cm))
		}
	}
	s.mu.Unlock()
	if ok {
		writeJSON(c.w, http.StatusOK, out)
	}
}

func githubCreateComment(s *Server, c *call) {
	n, ok := c.positive("number")
	if !ok {
		return
	}
	s.mu.Lock()
	cm := s.addCommentLocked(prKey{githubRepo(c), int(n)}, *c.body.(*commentBody).Body)
	out := githubComment(c, cm)
	s.mu.Unlock()
	writeJSON(c.w, http.StatusCreated, out)
}

func githubEditComment(s *Server, c *call) {
	id, ok := c.positive("comment_id")
	if !ok {
		return
	}
	s.editComment(c, prKey{githubRepo(c), 0}, id, *c.body.(*commentBody).Body,
		func(cm *comment) map[string]any { return githubComment(c, cm) }, "Not Found")
}

// githubComment is an issue comment as GitHub answers it.
func githubComment(c *call, cm *comment) map[string]any {
	web := fmt.Sprintf("http://%s/%s/pull/%d#issuecomment-%d", c.r.Host, cm.pr.repo, cm.pr.number, cm.ID)
	return map[string]any{
		"id": cm.ID, "node_id": "IC_" + strconv.FormatInt(cm.ID, 10),
		"url":        fmt.Sprintf("http://%s/api/v3/repos/%s/issues/comments/%d", c.r.Host, cm.pr.repo, cm.ID),
		"html_url":   web,
		"issue_url":  fmt.Sprintf("http://%s/api/v3/repos/%s/issues/%d", c.r.Host, cm.pr.repo, cm.pr.number),
		"body":       cm.Body,
		"user":       githubUser(),
		"created_at": now(), "updated_at": now(),
		"author_association": "NONE",
	}
}

func githubUser() map[string]any {
	return map[string]any{"login": "stackd[bot]", "id": 1, "type": "Bot"}
}

// blobSHA is a stable fake blob SHA for path.
func blobSHA(path string) string {
	sum := sha1.Sum([]byte(path))
	return hex.EncodeToString(sum[:])
}

func now() string { return time.Now().UTC().Format(time.RFC3339) }

// nullable is s, or JSON null when empty.
func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}
