package web

import (
	"errors"
	"fmt"
	"net/http"
	"slices"

	"github.com/stackd/stackd/daemon"
	"github.com/stackd/stackd/daemon/access"
	"github.com/stackd/stackd/daemon/model"
	"github.com/stackd/stackd/daemon/review"
	"github.com/stackd/stackd/web/view"
)

// PreviewAPI runs previews of pull requests (package preview implements it).
type PreviewAPI interface {
	// PullRequest takes a verified pull-request event.
	PullRequest(ev review.Event) review.Accepted
	// PullRequests lists the open pull requests seen, newest first.
	PullRequests() []review.PullRequest
}

// pullRequests lists the open pull requests, none when previews are not
// configured. Neither the list nor any pull request's Previews is nil,
// so that they encode as [].
func (s *Server) pullRequests() []review.PullRequest {
	if s.opts.Previews == nil {
		return []review.PullRequest{}
	}
	prs := s.opts.Previews.PullRequests()
	if prs == nil {
		return []review.PullRequest{}
	}
	for i := range prs {
		if prs[i].Previews == nil {
			prs[i].Previews = []review.Preview{}
		}
	}
	return prs
}

// readablePRs keeps of prs what p may read: while reads need a role,
// the previews and removals of stacks p may read, and the pull requests
// left with any.
func (s *Server) readablePRs(p model.Principal, prs []review.PullRequest) []review.PullRequest {
	if s.openReads() || p.Kind == model.PrincipalAdmin {
		return prs
	}
	hidden := func(stack string) bool {
		ok, _ := s.permit(p, access.ActionRead, s.stackRef(stack))
		return !ok
	}
	out := []review.PullRequest{}
	for _, pr := range prs {
		pr.Previews = slices.DeleteFunc(slices.Clone(pr.Previews), func(pv review.Preview) bool { return hidden(pv.Stack) })
		pr.Removed = slices.DeleteFunc(slices.Clone(pr.Removed), hidden)
		if len(pr.Previews) > 0 || len(pr.Removed) > 0 {
			out = append(out, pr)
		}
	}
	return out
}

// listPreviews serves GET /api/v1/previews: {"pullRequests": [...]}, the
// open pull requests newest first with their previews (of the stacks the
// caller may read).
func (s *Server) listPreviews(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"pullRequests": s.readablePRs(principal(r), s.pullRequests())})
}

func (s *Server) uiPreviews(w http.ResponseWriter, r *http.Request) {
	p := view.PreviewsPage{Page: s.newPage(r, "Previews"), Configured: s.opts.Previews != nil,
		PullRequests: s.readablePRs(principal(r), s.pullRequests())}
	p.Live, p.Section = true, view.SectionPreviews
	s.render(w, http.StatusOK, "previews.html", p)
}

// uiPreview shows a preview of a pull request: its update's facts and
// log (followed while it runs). Any other update, or none, is a 404.
func (s *Server) uiPreview(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	u, err := s.api.Update(id)
	switch {
	case errors.Is(err, daemon.ErrUnknownUpdate) || (err == nil && !isPullRequestPreview(u)):
		s.renderError(w, r, http.StatusNotFound, "Not found", fmt.Sprintf("There is no preview of a pull request with the ID %q.", id))
		return
	case err != nil:
		s.renderError(w, r, http.StatusInternalServerError, "Error", err.Error())
		return
	}
	title := fmt.Sprintf("Preview of #%d on %s", u.PullRequest, u.Stack)
	p := view.PreviewPage{Page: s.newPage(r, title), Update: u, PR: s.pullRequestOf(id)}
	p.Section, p.Live = view.SectionPreviews, u.State == model.UpdateRunning
	p.Log = s.updateLog(u.ID, u.State)
	s.render(w, http.StatusOK, "preview.html", p)
}

// isPullRequestPreview reports whether u previewed a pull request.
func isPullRequestPreview(u model.Update) bool {
	return u.Type == model.UpdatePreview && u.PullRequest != 0
}

// pullRequestOf is the open pull request one of whose previews is the
// update id, or nil.
func (s *Server) pullRequestOf(id string) *review.PullRequest {
	for _, pr := range s.pullRequests() {
		for _, pv := range pr.Previews {
			if pv.Update == id {
				return &pr
			}
		}
	}
	return nil
}
