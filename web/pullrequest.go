package web

import (
	"net/http"

	"github.com/stackd/stackd/web/forgehook"
)

// pullRequest handles a verified pull-request (merge-request) event: it
// is parsed into a review.Event and handed to Options.Previews, and the
// answer is 202 with the review.Accepted (Stacks never null). An action
// that needs no preview (edited, labeled, …) and any event while
// previews are not configured are acknowledged as ignored (202); a
// payload that lacks what a preview needs is a 400.
func (s *Server) pullRequest(w http.ResponseWriter, hook forgehook.Hook, body []byte) {
	if s.opts.Previews == nil {
		writeJSON(w, http.StatusAccepted, map[string]string{"ignored": "pull-request previews are not configured (--forge)"})
		return
	}
	ev, ignored, err := forgehook.ParsePullRequest(hook.Forge, body)
	if answeredPayload(w, ignored, err) {
		return
	}
	res := s.opts.Previews.PullRequest(ev)
	if res.Stacks == nil {
		res.Stacks = []string{}
	}
	s.log.Info("pull-request webhook", "forge", hook.Forge, "repo", ev.Repo, "number", ev.Number,
		"action", string(ev.Action), "stacks", res.Stacks)
	writeJSON(w, http.StatusAccepted, res)
}
