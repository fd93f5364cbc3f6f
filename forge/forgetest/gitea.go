package forgetest

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/stackd/stackd/daemon/review"
)

// giteaDialect is Gitea's (and Forgejo's) REST API v1, as its swagger
// documents it (pulls files, statuses, issues comments).
func giteaDialect() *dialect {
	return &dialect{
		prefix:     "/api/v1",
		firstID:    5000,
		maxComment: 65536,
		auth:       giteaAuth,
		headers:    func(*http.Request) []string { return nil },
		errorBody: func(code int, msg string) any {
			return map[string]any{"message": msg, "url": "https://gitea.example/api/swagger"}
		},
		invalid:     http.StatusUnprocessableEntity,
		pageParam:   "page",
		sizeParam:   "limit",
		defaultSize: 30, // DEFAULT_PAGING_NUM
		maxSize:     50, // MAX_RESPONSE_ITEMS
		pageHeaders: func(c *call, page, size, total int) {
			c.w.Header().Set("X-Total-Count", strconv.Itoa(total))
			if l := linkHeader(c, page, size, total); l != "" {
				c.w.Header().Set("Link", l)
			}
		},
		routes: []route{
			{method: "GET", path: "version", serve: giteaVersion},
			{method: "GET", path: "repos/{owner}/{repo}/pulls/{index}", serve: giteaGetPull},
			{method: "GET", path: "repos/{owner}/{repo}/pulls/{index}/files", query: []string{"skip-to", "whitespace", "page", "limit"}, serve: giteaFiles},
			{method: "POST", path: "repos/{owner}/{repo}/statuses/{sha}", body: func() checker { return &giteaStatus{} }, serve: giteaSetStatus},
			// Gitea documents since and before only and answers every
			// comment at once; the SDK sends page and limit anyway.
			{method: "GET", path: "repos/{owner}/{repo}/issues/{index}/comments", query: []string{"since", "before", "page", "limit"}, serve: giteaListComments},
			{method: "POST", path: "repos/{owner}/{repo}/issues/{index}/comments", body: func() checker { return &commentBody{} }, serve: giteaCreateComment},
			{method: "PATCH", path: "repos/{owner}/{repo}/issues/comments/{id}", body: func() checker { return &commentBody{} }, serve: giteaEditComment},
		},
	}
}

// giteaAuth takes "Authorization: token T".
func giteaAuth(h http.Header) (string, bool, string) {
	if h.Get("Private-Token") != "" {
		return "", false, "PRIVATE-TOKEN is GitLab's header, Gitea takes Authorization: token"
	}
	a := h.Get("Authorization")
	if a == "" {
		return "", false, ""
	}
	scheme, cred, _ := strings.Cut(a, " ")
	if !strings.EqualFold(scheme, "token") {
		return "", false, fmt.Sprintf("Authorization scheme %q is not token", scheme)
	}
	return cred, true, ""
}

// giteaStatus is the body of POST /repos/{owner}/{repo}/statuses/{sha}
// (CreateStatusOption). The SDK always sends target_url, "" for none.
type giteaStatus struct {
	State       *string `json:"state"`
	TargetURL   *string `json:"target_url"`
	Description *string `json:"description"`
	Context     *string `json:"context"`
}

func (b *giteaStatus) problems(*dialect) []string {
	return statusFields{
		state: b.State, context: b.Context, description: b.Description, targetURL: b.TargetURL,
		contextName: "context", states: []string{"pending", "success", "error", "failure", "warning"},
		emptyTargetOK: true,
	}.problems()
}

func giteaRepo(c *call) string { return c.params["owner"] + "/" + c.params["repo"] }

func giteaVersion(_ *Server, c *call) {
	writeJSON(c.w, http.StatusOK, map[string]any{"version": "1.24.0"})
}

func giteaFiles(s *Server, c *call) {
	n, ok := c.positive("index")
	if !ok {
		return
	}
	files := s.filesOf(prKey{giteaRepo(c), int(n)})
	lo, hi, ok := c.page(len(files))
	if !ok {
		return
	}
	out := []map[string]any{}
	for _, f := range files[lo:hi] {
		m := map[string]any{
			"filename": f.path, "status": "changed", "additions": 1, "deletions": 1, "changes": 2,
			"html_url":     fmt.Sprintf("http://%s/%s/src/commit/0/%s", c.r.Host, giteaRepo(c), f.path),
			"contents_url": "", "raw_url": "",
		}
		if f.from != "" {
			m["status"], m["previous_filename"] = "renamed", f.from
		}
		out = append(out, m)
	}
	writeJSON(c.w, http.StatusOK, out)
}

// giteaGetPull answers a pull request that SetPullRequest or SetAuthor
// named, trimmed to its identity, state, head and poster, or 404 as
// Gitea does for one it does not know.
func giteaGetPull(s *Server, c *call) {
	n, ok := c.positive("index")
	if !ok {
		return
	}
	repo := giteaRepo(c)
	st, author, ok := s.pullOf(prKey{repo, int(n)})
	if !ok {
		s.dialect.fail(c.w, http.StatusNotFound, "The target couldn't be found.")
		return
	}
	out := map[string]any{
		"id": 3000 + n, "number": n, "state": openClosed(st), "merged": st.Merged, "title": "Change things",
		"html_url": fmt.Sprintf("http://%s/%s/pulls/%d", c.r.Host, repo, n),
		"head":     map[string]any{"label": "feature", "ref": "feature", "sha": st.Head},
		"base":     map[string]any{"label": "main", "ref": "main"},
	}
	if author != nil {
		out["user"] = map[string]any{"id": author.ID, "login": author.Username, "full_name": author.Username}
	}
	writeJSON(c.w, http.StatusOK, out)
}

func giteaSetStatus(s *Server, c *call) {
	sha, ok := c.sha()
	if !ok {
		return
	}
	b := c.body.(*giteaStatus)
	st := review.Status{Context: *b.Context, State: review.State(*b.State), Description: str(b.Description), TargetURL: str(b.TargetURL)}
	s.mu.Lock()
	s.setStatusLocked(giteaRepo(c), sha, st, *b.State)
	s.nextID++
	id := s.nextID
	s.mu.Unlock()
	writeJSON(c.w, http.StatusCreated, map[string]any{
		"id": id, "status": st.State, "target_url": st.TargetURL, "description": st.Description,
		"url": "", "context": st.Context, "creator": giteaUser(), "created_at": now(), "updated_at": now(),
	})
}

func giteaListComments(s *Server, c *call) {
	n, ok := c.positive("index")
	if !ok {
		return
	}
	s.mu.Lock()
	list := s.commentsOfLocked(prKey{giteaRepo(c), int(n)})
	out := []map[string]any{}
	for _, cm := range list {
		out = append(out, giteaComment(c, cm))
	}
	s.mu.Unlock()
	c.w.Header().Set("X-Total-Count", strconv.Itoa(len(out)))
	writeJSON(c.w, http.StatusOK, out)
}

func giteaCreateComment(s *Server, c *call) {
	n, ok := c.positive("index")
	if !ok {
		return
	}
	s.mu.Lock()
	out := giteaComment(c, s.addCommentLocked(prKey{giteaRepo(c), int(n)}, *c.body.(*commentBody).Body))
	s.mu.Unlock()
	writeJSON(c.w, http.StatusCreated, out)
}

func giteaEditComment(s *Server, c *call) {
	id, ok := c.positive("id")
	if !ok {
		return
	}
	s.editComment(c, prKey{giteaRepo(c), 0}, id, *c.body.(*commentBody).Body,
		func(cm *comment) map[string]any { return giteaComment(c, cm) }, "The target couldn't be found.")
}

// giteaComment is a comment as Gitea answers it.
func giteaComment(c *call, cm *comment) map[string]any {
	return map[string]any{
		"id":               cm.ID,
		"html_url":         fmt.Sprintf("http://%s/%s/pulls/%d#issuecomment-%d", c.r.Host, cm.pr.repo, cm.pr.number, cm.ID),
		"pull_request_url": fmt.Sprintf("http://%s/%s/pulls/%d", c.r.Host, cm.pr.repo, cm.pr.number),
		"issue_url":        "",
		"user":             giteaUser(),
		"body":             cm.Body,
		"assets":           []any{},
		"created_at":       now(), "updated_at": now(),
	}
}

func giteaUser() map[string]any {
	return map[string]any{"id": 1, "login": "stackd-bot", "full_name": "stackd"}
}
