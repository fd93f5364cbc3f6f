package forgetest

import (
	"cmp"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strconv"

	"github.com/stackd/stackd/daemon/review"
)

// gitlabDialect is GitLab's REST API v4, as documented at
// docs.gitlab.com/api (merge_requests diffs, commits statuses, notes).
// Projects are named by their URL-encoded full path (or numeric ID) in
// one path segment.
func gitlabDialect() *dialect {
	pages := []string{"page", "per_page"}
	return &dialect{
		prefix:     "/api/v4",
		firstID:    3000000,
		maxComment: 1000000,
		auth:       gitlabAuth,
		headers:    func(*http.Request) []string { return nil },
		errorBody: func(code int, msg string) any {
			return map[string]any{"message": msg}
		},
		invalid:     http.StatusBadRequest,
		pageParam:   "page",
		sizeParam:   "per_page",
		defaultSize: 20,
		maxSize:     100,
		pageHeaders: gitlabPageHeaders,
		routes: []route{
			{method: "GET", path: "projects/{id}/merge_requests/{iid}", query: []string{"render_html", "include_diverged_commits_count", "include_rebase_in_progress"}, serve: gitlabGetMR},
			{method: "GET", path: "projects/{id}/merge_requests/{iid}/diffs", query: append([]string{"unidiff"}, pages...), serve: gitlabDiffs},
			{method: "POST", path: "projects/{id}/statuses/{sha}", body: func() checker { return &gitlabStatus{} }, serve: gitlabSetStatus},
			{method: "GET", path: "projects/{id}/merge_requests/{iid}/notes", query: append([]string{"order_by", "sort"}, pages...), serve: gitlabListNotes},
			{method: "POST", path: "projects/{id}/merge_requests/{iid}/notes", body: func() checker { return &gitlabNewNote{} }, serve: gitlabCreateNote},
			{method: "PUT", path: "projects/{id}/merge_requests/{iid}/notes/{note_id}", body: func() checker { return &gitlabNoteEdit{} }, serve: gitlabEditNote},
		},
	}
}

// gitlabAuth takes "PRIVATE-TOKEN: T", the header of personal, group and
// project access tokens.
func gitlabAuth(h http.Header) (string, bool, string) {
	if h.Get("Authorization") != "" {
		return "", false, "access tokens go in PRIVATE-TOKEN, not Authorization"
	}
	if _, ok := h["Private-Token"]; !ok {
		return "", false, ""
	}
	return h.Get("Private-Token"), true, ""
}

func gitlabPageHeaders(c *call, page, size, total int) {
	h := c.w.Header()
	last := lastPage(size, total)
	next, prev := "", ""
	if page < last {
		next = strconv.Itoa(page + 1)
	}
	if page > 1 {
		prev = strconv.Itoa(page - 1)
	}
	h.Set("X-Page", strconv.Itoa(page))
	h.Set("X-Per-Page", strconv.Itoa(size))
	h.Set("X-Next-Page", next)
	h.Set("X-Prev-Page", prev)
	h.Set("X-Total", strconv.Itoa(total))
	h.Set("X-Total-Pages", strconv.Itoa(last))
	if l := linkHeader(c, page, size, total); l != "" {
		h.Set("Link", l)
	}
}

var projectIDRE = regexp.MustCompile(`^([0-9]+|[^/]+(/[^/]+)+)$`)

// project returns the project the path names, or answers 404.
func gitlabProject(c *call) (string, bool) {
	id := c.params["id"]
	if !projectIDRE.MatchString(id) {
		c.s.problem(c.r, "project %q is neither an ID nor a URL-encoded full path", id)
		c.s.dialect.fail(c.w, http.StatusNotFound, "404 Project Not Found")
		return "", false
	}
	return id, true
}

// gitlabMR returns the merge request the path names, or answers 404.
func gitlabMR(c *call) (prKey, bool) {
	project, ok := gitlabProject(c)
	if !ok {
		return prKey{}, false
	}
	iid, ok := c.positive("iid")
	return prKey{project, int(iid)}, ok
}

// gitlabStatus is the body of POST /projects/:id/statuses/:sha.
type gitlabStatus struct {
	State       *string  `json:"state"`
	Ref         *string  `json:"ref"`
	Name        *string  `json:"name"`
	Context     *string  `json:"context"`
	TargetURL   *string  `json:"target_url"`
	Description *string  `json:"description"`
	Coverage    *float64 `json:"coverage"`
	PipelineID  *int64   `json:"pipeline_id"`
}

func (b *gitlabStatus) name() *string { return cmp.Or(b.Name, b.Context) }

func (b *gitlabStatus) problems(*dialect) []string {
	return statusFields{
		state: b.State, context: b.name(), description: b.Description, targetURL: b.TargetURL,
		contextName: "name (or context)", states: []string{"pending", "running", "success", "failed", "canceled", "skipped"},
	}.problems()
}

// gitlabNewNote is the body of POST .../merge_requests/:iid/notes.
type gitlabNewNote struct {
	Body                    *string `json:"body"`
	CreatedAt               *string `json:"created_at"`
	Internal                *bool   `json:"internal"`
	MergeRequestDiffHeadSHA *string `json:"merge_request_diff_head_sha"`
}

func (b *gitlabNewNote) problems(d *dialect) []string { return bodyProblems(b.Body, d.maxComment) }

// gitlabNoteEdit is the body of PUT .../merge_requests/:iid/notes/:id.
type gitlabNoteEdit struct {
	Body         *string `json:"body"`
	Confidential *bool   `json:"confidential"`
}

func (b *gitlabNoteEdit) problems(d *dialect) []string { return bodyProblems(b.Body, d.maxComment) }

func gitlabDiffs(s *Server, c *call) {
	mr, ok := gitlabMR(c)
	if !ok {
		return
	}
	files := s.filesOf(mr)
	lo, hi, ok := c.page(len(files))
	if !ok {
		return
	}
	out := []map[string]any{}
	for _, f := range files[lo:hi] {
		old := f.path
		if f.from != "" {
			old = f.from
		}
		out = append(out, map[string]any{
			"old_path": old, "new_path": f.path, "a_mode": "100644", "b_mode": "100644",
			"diff": "@@ -1 +1 @@\n", "new_file": false, "renamed_file": f.from != "",
			"deleted_file": false, "generated_file": false,
		})
	}
	writeJSON(c.w, http.StatusOK, out)
}

// gitlabGetMR answers a merge request that SetPullRequest or SetAuthor
// named, trimmed to its identity, state, head commit (sha) and author,
// or 404 as GitLab does for one it does not know.
func gitlabGetMR(s *Server, c *call) {
	mr, ok := gitlabMR(c)
	if !ok {
		return
	}
	st, author, ok := s.pullOf(mr)
	if !ok {
		s.dialect.fail(c.w, http.StatusNotFound, "404 Not found")
		return
	}
	state := "opened"
	switch {
	case st.Merged:
		state = "merged"
	case st.Closed:
		state = "closed"
	}
	out := map[string]any{
		"id": 1000 + mr.number, "iid": mr.number, "project_id": 1, "state": state,
		"sha": nullable(st.Head), "source_branch": "feature", "target_branch": "main", "author": nil,
	}
	if author != nil {
		out["author"] = map[string]any{"id": author.ID, "username": author.Username, "name": author.Username,
			"state": "active", "locked": false, "avatar_url": nil, "web_url": "http://gitlab.example/" + author.Username}
	}
	writeJSON(c.w, http.StatusOK, out)
}

// gitlabStates maps GitLab's states to review's.
var gitlabStates = map[string]review.State{
	"pending": review.Pending, "success": review.Success, "failed": review.Failure, "canceled": review.Error,
}

// gitlabSetStatus refuses, as GitLab does, to set pending or running on
// a status that already is.
func gitlabSetStatus(s *Server, c *call) {
	project, ok := gitlabProject(c)
	if !ok {
		return
	}
	sha, ok := c.sha()
	if !ok {
		return
	}
	b := c.body.(*gitlabStatus)
	raw, name := *b.State, *b.name()
	st := review.Status{Context: name, State: cmp.Or(gitlabStates[raw], review.State(raw)), Description: str(b.Description), TargetURL: str(b.TargetURL)}
	s.mu.Lock()
	if last := s.lastStatusLocked(project, sha, name); last == raw && (raw == "pending" || raw == "running") {
		s.mu.Unlock()
		verb := map[string]string{"pending": "enqueue", "running": "run"}[raw]
		s.dialect.fail(c.w, http.StatusBadRequest, fmt.Sprintf("Cannot transition status via :%s from :%s", verb, raw))
		return
	}
	s.setStatusLocked(project, sha, st, raw)
	s.nextID++
	id := s.nextID
	s.mu.Unlock()
	writeJSON(c.w, http.StatusCreated, map[string]any{
		"id": id, "sha": sha, "ref": str(b.Ref), "status": raw, "name": name,
		"target_url": nullable(st.TargetURL), "description": nullable(st.Description),
		"created_at": now(), "started_at": nil, "finished_at": nil, "allow_failure": false,
		"coverage": b.Coverage, "author": gitlabUser(),
	})
}

func (s *Server) lastStatusLocked(repo, sha, name string) string {
	list := s.statuses[repo+"@"+sha]
	for i := len(list) - 1; i >= 0; i-- {
		if list[i].Context == name {
			return list[i].raw
		}
	}
	return ""
}

// gitlabListNotes orders notes as GitLab does: order_by created_at
// (default) or updated_at, sort desc (default) or asc.
func gitlabListNotes(s *Server, c *call) {
	mr, ok := gitlabMR(c)
	if !ok {
		return
	}
	q := c.r.URL.Query()
	orderBy, sort := cmp.Or(q.Get("order_by"), "created_at"), cmp.Or(q.Get("sort"), "desc")
	if (orderBy != "created_at" && orderBy != "updated_at") || (sort != "asc" && sort != "desc") {
		s.problem(c.r, "order_by %q / sort %q not documented", orderBy, sort)
	}
	s.mu.Lock()
	list := s.commentsOfLocked(mr)
	slices.SortStableFunc(list, func(a, b *comment) int {
		d := cmp.Compare(a.created, b.created)
		if orderBy == "updated_at" {
			d = cmp.Compare(a.updated, b.updated)
		}
		if sort == "desc" {
			d = -d
		}
		return d
	})
	out := []map[string]any{}
	lo, hi, ok := c.page(len(list))
	if ok {
		for _, cm := range list[lo:hi] {
			out = append(out, gitlabNote(cm))
		}
	}
	s.mu.Unlock()
	if ok {
		writeJSON(c.w, http.StatusOK, out)
	}
}

func gitlabCreateNote(s *Server, c *call) {
	mr, ok := gitlabMR(c)
	if !ok {
		return
	}
	s.mu.Lock()
	out := gitlabNote(s.addCommentLocked(mr, *c.body.(*gitlabNewNote).Body))
	s.mu.Unlock()
	writeJSON(c.w, http.StatusCreated, out)
}

func gitlabEditNote(s *Server, c *call) {
	mr, ok := gitlabMR(c)
	if !ok {
		return
	}
	id, ok := c.positive("note_id")
	if !ok {
		return
	}
	s.editComment(c, mr, id, *c.body.(*gitlabNoteEdit).Body, gitlabNote, "404 Not found")
}

// gitlabNote is a merge request note as GitLab answers it.
func gitlabNote(cm *comment) map[string]any {
	return map[string]any{
		"id": cm.ID, "type": nil, "body": cm.Body, "attachment": nil, "author": gitlabUser(),
		"created_at": now(), "updated_at": now(), "system": false,
		"noteable_id": 1, "noteable_type": "MergeRequest", "noteable_iid": cm.pr.number,
		"resolvable": false, "confidential": false, "internal": false,
	}
}

func gitlabUser() map[string]any {
	return map[string]any{"id": 1, "username": "stackd-bot", "name": "stackd", "state": "active"}
}
