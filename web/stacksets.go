package web

import (
	"errors"
	"fmt"
	"net/http"
	"slices"

	"github.com/stackd/stackd/daemon"
	"github.com/stackd/stackd/daemon/access"
	"github.com/stackd/stackd/daemon/model"
	"github.com/stackd/stackd/web/view"
)

// StackSets is what the API and the UI need of StackSets: the stacks a
// set generates from its template and the rollout that moves them to a
// new revision in steps. cmd wires it (Options.StackSets). Every method
// returns data the caller owns.
type StackSets interface {
	// StackSets lists every set, sorted by name.
	StackSets() []model.StackSetView
	// StackSet is the set of that name; an error wrapping
	// model.ErrNotFound when there is none.
	StackSet(name string) (model.StackSetView, error)
	// ResumeRollout lets the set's halted or aborted rollout go on, and
	// AbortRollout stops its rollout: by asked for it. An error wraps
	// model.ErrNotFound for an unknown set, ErrRolloutState when the
	// rollout is in no state to take the action (the set has none, or
	// nothing to resume).
	ResumeRollout(name string, by model.Principal) error
	AbortRollout(name string, by model.Principal) error
}

// ErrRolloutState is wrapped by StackSets.ResumeRollout and AbortRollout
// when the set's rollout cannot take the action now: the API answers 409.
var ErrRolloutState = errors.New("the rollout cannot take that action now")

// errNoStackSets answers every StackSet route of a server without
// Options.StackSets: 404.
var errNoStackSets = fmt.Errorf("this daemon has no stack sets: %w", model.ErrNotFound)

// Access to StackSets. A set is the stacks it generates: a principal
// may take an action on a set (read it; resume or abort its rollout,
// which need sync) when its roles allow that action on every one of the
// set's stacks. A set that generates no stack, or one the daemon does not
// know, is read as the stack list is (by any identified caller, or with
// read daemon-wide) and acted on with the action daemon-wide. Reads
// open to everyone (no ReadRequiresToken) open the sets too. What a set
// shows lists only the stacks the principal may read, which for a set
// it may read is all of them but a stack that is in its rollout and not
// (or no longer) among its stacks.

// mayOnSet says whether p may take action on a set that generates
// stacks, whose refs ref gives; when not, why.
func (s *Server) mayOnSet(p model.Principal, action string, stacks []string, ref func(string) *access.StackRef) (bool, string) {
	if action == access.ActionRead && s.openReads() {
		return true, ""
	}
	if len(stacks) == 0 {
		if action == access.ActionRead && p.Kind != model.PrincipalAnonymous {
			return true, ""
		}
		return s.permit(p, action, nil)
	}
	for _, name := range stacks {
		if ok, why := s.permit(p, action, ref(name)); !ok {
			return false, why
		}
	}
	return true, ""
}

// setStacks are the stacks the set name generates; none for an unknown
// set, or without Options.StackSets.
func (s *Server) setStacks(name string) []string {
	if s.opts.StackSets == nil {
		return nil
	}
	v, err := s.opts.StackSets.StackSet(name)
	if err != nil {
		return nil
	}
	return v.Stacks
}

// stackRefs gives the StackRef of a stack by name from the stack list as
// last rendered (one lookup for many sets), a name alone for a stack it
// does not hold.
func (s *Server) stackRefs() func(string) *access.StackRef {
	if s.opts.Access == nil {
		return func(name string) *access.StackRef { return &access.StackRef{Name: name} }
	}
	refs := map[string]access.StackRef{}
	for _, e := range s.stacks.list(s.api) {
		refs[e.ref.Name] = e.ref
	}
	return func(name string) *access.StackRef {
		if ref, ok := refs[name]; ok {
			return &ref
		}
		return &access.StackRef{Name: name}
	}
}

// readableSet is v as p may see it, and whether p may see it at all.
func (s *Server) readableSet(p model.Principal, v model.StackSetView, ref func(string) *access.StackRef) (model.StackSetView, bool) {
	v = withEmptyLists(v)
	if s.openReads() || p.Kind == model.PrincipalAdmin {
		return v, true
	}
	if ok, _ := s.mayOnSet(p, access.ActionRead, v.Stacks, ref); !ok {
		return v, false
	}
	hidden := func(name string) bool {
		ok, _ := s.permit(p, access.ActionRead, ref(name))
		return !ok
	}
	return filterSet(v, hidden), true
}

// filterSet is a copy of v without the stacks hidden says to leave out.
func filterSet(v model.StackSetView, hidden func(string) bool) model.StackSetView {
	v.Stacks = slices.DeleteFunc(slices.Clone(v.Stacks), hidden)
	if v.Rollout == nil {
		return v
	}
	ro := *v.Rollout
	ro.HaltedBy = slices.DeleteFunc(slices.Clone(ro.HaltedBy), hidden)
	ro.Steps = slices.Clone(ro.Steps)
	for i := range ro.Steps {
		ro.Steps[i].Stacks = slices.DeleteFunc(slices.Clone(ro.Steps[i].Stacks), func(m model.RolloutStack) bool { return hidden(m.Name) })
	}
	v.Rollout = &ro
	return v
}

// withEmptyLists is v with its lists that are nil empty, so that they
// encode as [].
func withEmptyLists(v model.StackSetView) model.StackSetView {
	if v.Generators == nil {
		v.Generators = []model.GeneratorStatus{}
	}
	if v.Stacks == nil {
		v.Stacks = []string{}
	}
	if ro := v.Rollout; ro != nil && (ro.Steps == nil || slices.ContainsFunc(ro.Steps, func(st model.RolloutStepStatus) bool { return st.Stacks == nil })) {
		c := *ro
		c.Steps = slices.Clone(ro.Steps)
		if c.Steps == nil {
			c.Steps = []model.RolloutStepStatus{}
		}
		for i := range c.Steps {
			if c.Steps[i].Stacks == nil {
				c.Steps[i].Stacks = []model.RolloutStack{}
			}
		}
		v.Rollout = &c
	}
	return v
}

// visibleSets are the sets p may read, as p may see them, and how many
// it may not.
func (s *Server) visibleSets(p model.Principal) (sets []model.StackSetView, hidden int) {
	all := s.opts.StackSets.StackSets()
	ref := func(name string) *access.StackRef { return &access.StackRef{Name: name} }
	if !s.openReads() && p.Kind != model.PrincipalAdmin {
		ref = s.stackRefs()
	}
	sets = make([]model.StackSetView, 0, len(all))
	for _, v := range all {
		if v, ok := s.readableSet(p, v, ref); ok {
			sets = append(sets, v)
		}
	}
	return sets, len(all) - len(sets)
}

// listStackSets serves GET /api/v1/stacksets: {"stackSets": [...]}, the
// sets the caller may read, by name.
func (s *Server) listStackSets(w http.ResponseWriter, r *http.Request) {
	if s.opts.StackSets == nil {
		writeAPIError(w, errNoStackSets)
		return
	}
	sets, _ := s.visibleSets(principal(r))
	writeJSON(w, http.StatusOK, map[string]any{"stackSets": sets})
}

// getStackSet serves GET /api/v1/stacksets/{name}: the set's
// model.StackSetView. The guard has checked that the caller may read it.
func (s *Server) getStackSet(w http.ResponseWriter, r *http.Request) {
	v, err := s.stackSet(r)
	if errors.Is(err, errSetHidden) {
		writeError(w, http.StatusForbidden, err.Error())
		return
	}
	if err != nil {
		writeAPIError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, v)
}

// stackSet is the set r's path names, as r's principal may see it; an
// error wrapping errSetHidden when it may not see it (the guard checked
// that it may, but the set may have changed since).
func (s *Server) stackSet(r *http.Request) (model.StackSetView, error) {
	if s.opts.StackSets == nil {
		return model.StackSetView{}, errNoStackSets
	}
	name := r.PathValue("name")
	v, err := s.opts.StackSets.StackSet(name)
	if err != nil {
		return v, fmt.Errorf("stack set %q: %w", name, err)
	}
	v, ok := s.readableSet(principal(r), v, s.stackRef)
	if !ok {
		return model.StackSetView{}, fmt.Errorf("stack set %q: %w", name, errSetHidden)
	}
	return v, nil
}

// errSetHidden is a set the principal may not read: 403.
var errSetHidden = errors.New("your roles do not let you read every stack of the set")

// rolloutAction is resume or abort.
type rolloutAction string

const (
	rolloutResume rolloutAction = "resume"
	rolloutAbort  rolloutAction = "abort"
)

// actOnRollout resumes or aborts the rollout of the set r's path names,
// for r's principal. The guard has checked that it may sync every stack
// of the set, and records the request in the audit trail.
func (s *Server) actOnRollout(r *http.Request, act rolloutAction) error {
	if s.opts.StackSets == nil {
		return errNoStackSets
	}
	name, by := r.PathValue("name"), principal(r)
	do := s.opts.StackSets.ResumeRollout
	if act == rolloutAbort {
		do = s.opts.StackSets.AbortRollout
	}
	if err := do(name, by); err != nil {
		return fmt.Errorf("%s the rollout of stack set %q: %w", act, name, err)
	}
	s.log.Info("rollout "+string(act)+" requested", "stackSet", name, "by", by.String())
	return nil
}

// rolloutStatus is the HTTP status of a failed resume or abort.
func rolloutStatus(err error) int {
	switch {
	case errors.Is(err, model.ErrNotFound):
		return http.StatusNotFound
	case errors.Is(err, ErrRolloutState), errors.Is(err, daemon.ErrNotOwner):
		return http.StatusConflict
	}
	return http.StatusInternalServerError
}

func (s *Server) resumeStackSet(w http.ResponseWriter, r *http.Request) {
	s.apiRollout(w, r, rolloutResume)
}

func (s *Server) abortStackSet(w http.ResponseWriter, r *http.Request) {
	s.apiRollout(w, r, rolloutAbort)
}

// apiRollout answers POST /api/v1/stacksets/{name}/resume and /abort:
// 200 with {"name", "action", "rollout"} (the rollout as it stands
// after the action, absent when the set has none), 404 for an unknown
// set, 409 when the rollout cannot take the action.
func (s *Server) apiRollout(w http.ResponseWriter, r *http.Request, act rolloutAction) {
	if err := s.actOnRollout(r, act); err != nil {
		writeError(w, rolloutStatus(err), err.Error())
		return
	}
	out := map[string]any{"name": r.PathValue("name"), "action": string(act)}
	if v, err := s.stackSet(r); err == nil && v.Rollout != nil {
		out["rollout"] = v.Rollout
	}
	writeJSON(w, http.StatusOK, out)
}

// uiStackSets shows the list of sets at /stacksets.
func (s *Server) uiStackSets(w http.ResponseWriter, r *http.Request) {
	if s.opts.StackSets == nil {
		s.renderError(w, r, http.StatusNotFound, "Not found", "This daemon has no stack sets.")
		return
	}
	p := view.StackSetsPage{Page: s.newPage(r, "Stack sets")}
	p.Live, p.Section = true, view.SectionStackSets
	sets, hidden := s.visibleSets(principal(r))
	p.Hidden, p.Sets = hidden, make([]view.StackSetRow, len(sets))
	for i, v := range sets {
		p.Sets[i] = view.StackSetRowOf(v)
	}
	s.render(w, http.StatusOK, "stacksets.html", p)
}

// uiStackSet shows a set's page at /stacksets/{name}.
func (s *Server) uiStackSet(w http.ResponseWriter, r *http.Request) {
	v, err := s.stackSet(r)
	if err != nil {
		s.renderSetError(w, r, err)
		return
	}
	perm := s.maySet(r, access.ActionSync, v.Stacks)
	p := view.NewStackSetPage(s.newPage(r, v.Name), v, perm, perm)
	p.Live, p.Section = true, view.SectionStackSets
	s.render(w, http.StatusOK, "stackset.html", p)
}

// maySet is the permission of r's principal to take action on a set
// that generates stacks, as the set's page shows it.
func (s *Server) maySet(r *http.Request, action string, stacks []string) view.Permission {
	p := principal(r)
	if ok, why := s.mayOnSet(p, action, stacks, s.stackRef); !ok {
		perm := view.Permission{Reason: why, Hint: "needs a role with " + action + " on every stack of the set"}
		switch {
		case s.opts.Access == nil:
			perm.Hint = "needs the API token"
		case p.Kind == model.PrincipalAnonymous && (s.opts.SignIn != nil || s.opts.TokenSignIn != nil):
			perm.Hint, perm.SignIn = "sign in to "+action, s.signInURL(returnPath(r))
		}
		return perm
	}
	return view.Permission{Allowed: true}
}

func (s *Server) uiResumeStackSet(w http.ResponseWriter, r *http.Request) {
	s.uiRollout(w, r, rolloutResume)
}

func (s *Server) uiAbortStackSet(w http.ResponseWriter, r *http.Request) {
	s.uiRollout(w, r, rolloutAbort)
}

// uiRollout resumes or aborts from the set page's forms, then shows the
// page again.
func (s *Server) uiRollout(w http.ResponseWriter, r *http.Request, act rolloutAction) {
	if err := s.actOnRollout(r, act); err != nil {
		title := "Not resumed"
		if act == rolloutAbort {
			title = "Not aborted"
		}
		s.renderError(w, r, rolloutStatus(err), title, err.Error())
		return
	}
	http.Redirect(w, r, view.StackSetPath(r.PathValue("name")), http.StatusSeeOther)
}

// renderSetError shows a failure to read a set: a 404 page for an
// unknown set, else a 500 page.
func (s *Server) renderSetError(w http.ResponseWriter, r *http.Request, err error) {
	if errors.Is(err, model.ErrNotFound) {
		s.renderError(w, r, http.StatusNotFound, "Not found", fmt.Sprintf("There is no stack set named %q.", r.PathValue("name")))
		return
	}
	if errors.Is(err, errSetHidden) {
		s.renderError(w, r, http.StatusForbidden, "Not allowed", err.Error())
		return
	}
	s.renderError(w, r, http.StatusInternalServerError, "Error", err.Error())
}
