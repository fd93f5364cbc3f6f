package web

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/stackd/stackd/daemon"
	"github.com/stackd/stackd/daemon/access"
	"github.com/stackd/stackd/daemon/model"
)

// WindowOverrider is what an API may also implement: a sync that
// closed change windows do not hold back. *daemon.Daemon does.
type WindowOverrider interface {
	OverrideWindow(name string, by model.Principal, reason string) (string, error)
}

// syncBody is the optional JSON body of POST /api/v1/stacks/{name}/sync.
type syncBody struct {
	// OverrideWindow lets the sync through closed change windows, for a
	// caller with the override action on the stack; Reason, required with
	// it, is recorded in the audit trail and the update history.
	OverrideWindow bool   `json:"overrideWindow"`
	Reason         string `json:"reason"`
}

// decodeSyncBody reads a sync's body: none, or a syncBody.
func decodeSyncBody(r *http.Request) (syncBody, error) {
	var b syncBody
	if r.Body == nil {
		return b, nil
	}
	dec := json.NewDecoder(io.LimitReader(r.Body, maxBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&b); err != nil && !errors.Is(err, io.EOF) {
		return b, fmt.Errorf("the body of a sync is {\"overrideWindow\": true, \"reason\": \"…\"} or nothing: %w", err)
	}
	if b.Reason != "" && !b.OverrideWindow {
		return b, errors.New("a reason goes with overrideWindow: true")
	}
	return b, nil
}

// overrideWindow asks for a sync of name through closed change windows
// for the request's principal, who needs the override action on the
// stack. The audit record of the request says override, with the
// reason. It returns the sync's token, or the status and error to
// answer.
func (s *Server) overrideWindow(r *http.Request, name, reason string) (string, int, error) {
	noteAudit(r, access.ActionOverride, reason)
	o, ok := s.api.(WindowOverrider)
	if !ok {
		return "", http.StatusNotImplemented, errors.New("this daemon cannot override change windows")
	}
	if allowed, why := s.allowed(principal(r), access.ActionOverride, s.stackRef(name)); !allowed {
		return "", http.StatusForbidden, fmt.Errorf("overriding change windows: %s", why)
	}
	token, err := o.OverrideWindow(name, principal(r), reason)
	switch {
	case err == nil:
		s.log.Info("sync requested through closed change windows", "stack", name, "request", token, "reason", reason)
		return token, http.StatusAccepted, nil
	case errors.Is(err, daemon.ErrNoReason):
		return "", http.StatusBadRequest, err
	case errors.Is(err, daemon.ErrUnknownStack):
		return "", http.StatusNotFound, err
	case errors.Is(err, daemon.ErrNotOwner):
		return "", http.StatusConflict, err
	}
	return "", http.StatusInternalServerError, err
}
