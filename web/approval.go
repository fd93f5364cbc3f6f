package web

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/stackd/stackd/daemon"
	"github.com/stackd/stackd/daemon/model"
	"github.com/stackd/stackd/web/view"
)

// Approvals decide the plans that await approval; the daemon implements
// it. A server whose API does not answers 404 on those routes.
type Approvals interface {
	Approve(name, plan, who string) error
	Reject(name, plan, who, reason string) error
}

// planDecision is the body of POST /api/v1/stacks/{name}/approve and
// /reject, or the fields of the stack page's forms.
type planDecision struct {
	// Plan names the plan decided on, by ID or digest.
	Plan   string `json:"plan"`
	Reason string `json:"reason,omitempty"`
}

// readDecision reads a planDecision from a JSON body or a form.
func readDecision(r *http.Request) (planDecision, error) {
	var d planDecision
	if strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
		dec := json.NewDecoder(r.Body)
		dec.DisallowUnknownFields()
		if err := dec.Decode(&d); err != nil {
			return d, fmt.Errorf("read the request: %w", err)
		}
	} else {
		d.Plan, d.Reason = r.FormValue("plan"), r.FormValue("reason")
	}
	if d.Plan == "" {
		return d, errors.New("name the plan to decide on: its id or digest (plan)")
	}
	return d, nil
}

// decidePlan approves or rejects a plan for the guard's principal.
func (s *Server) decidePlan(r *http.Request, approve bool) (planDecision, error) {
	a, ok := s.api.(Approvals)
	if !ok {
		return planDecision{}, errNoApprovals
	}
	d, err := readDecision(r)
	if err != nil {
		return d, &badRequest{err}
	}
	name, who := r.PathValue("name"), principal(r).String()
	if approve {
		err = a.Approve(name, d.Plan, who)
	} else {
		err = a.Reject(name, d.Plan, who, d.Reason)
	}
	if err == nil {
		s.log.Info("plan decided", "stack", name, "plan", d.Plan, "approved", approve, "by", who)
	}
	return d, err
}

var errNoApprovals = errors.New("this daemon decides no plans")

// badRequest is a request that names no plan or cannot be read.
type badRequest struct{ err error }

func (e *badRequest) Error() string { return e.err.Error() }

// decisionStatus is the HTTP status of a failed decision.
func decisionStatus(err error) int {
	var bad *badRequest
	switch {
	case errors.As(err, &bad):
		return http.StatusBadRequest
	case errors.Is(err, daemon.ErrUnknownStack), errors.Is(err, errNoApprovals):
		return http.StatusNotFound
	case errors.Is(err, daemon.ErrNoPlan), errors.Is(err, daemon.ErrPlanMoved), errors.Is(err, daemon.ErrNotOwner):
		return http.StatusConflict
	}
	return http.StatusInternalServerError
}

func (s *Server) approveStack(w http.ResponseWriter, r *http.Request) { s.apiDecide(w, r, true) }
func (s *Server) rejectStack(w http.ResponseWriter, r *http.Request)  { s.apiDecide(w, r, false) }

// apiDecide answers an API approval or rejection: 200 with the plan, 409
// when no plan awaits approval, another one does, or another replica
// holds the stack.
func (s *Server) apiDecide(w http.ResponseWriter, r *http.Request, approve bool) {
	d, err := s.decidePlan(r, approve)
	if err != nil {
		writeError(w, decisionStatus(err), err.Error())
		return
	}
	state := model.GateApproved
	if !approve {
		state = model.GateRejected
	}
	writeJSON(w, http.StatusOK, map[string]string{"name": r.PathValue("name"), "plan": d.Plan, "state": state})
}

func (s *Server) uiApprove(w http.ResponseWriter, r *http.Request) { s.uiDecide(w, r, true) }
func (s *Server) uiReject(w http.ResponseWriter, r *http.Request)  { s.uiDecide(w, r, false) }

// uiDecide approves or rejects from the stack page's forms, then shows
// the page again.
func (s *Server) uiDecide(w http.ResponseWriter, r *http.Request, approve bool) {
	if _, err := s.decidePlan(r, approve); err != nil {
		s.renderError(w, r, decisionStatus(err), "Not decided", err.Error())
		return
	}
	http.Redirect(w, r, view.StackPath(r.PathValue("name")), http.StatusSeeOther)
}
