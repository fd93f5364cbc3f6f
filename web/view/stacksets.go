package view

import (
	"net/url"
	"strings"

	"github.com/stackd/stackd/daemon/model"
)

// SectionStackSets is the navigation entry of the StackSets' pages.
const SectionStackSets = "stacksets"

// ownerKind prefixes the owner of a stack a StackSet generates
// (model.StackView.Owner).
const ownerKind = "StackSet/"

// OwnerOfSet is the owner of the stacks set generates: "StackSet/NAME".
func OwnerOfSet(set string) string { return ownerKind + set }

// SetOfOwner is the StackSet an owner names, and whether it names one.
func SetOfOwner(owner string) (string, bool) {
	name, ok := strings.CutPrefix(owner, ownerKind)
	return name, ok && name != ""
}

// StackSetPath is the path of a StackSet's page.
func StackSetPath(name string) string { return "/stacksets/" + url.PathEscape(name) }

// OwnerPath is the page of an owner: its StackSet's; empty for an owner
// that is not a StackSet.
func OwnerPath(owner string) string {
	if name, ok := SetOfOwner(owner); ok {
		return StackSetPath(name)
	}
	return ""
}

// SubjectPath is the page of what an audit entry acted on: a StackSet
// ("StackSet/NAME") or a stack.
func SubjectPath(subject string) string {
	if p := OwnerPath(subject); p != "" {
		return p
	}
	return StackPath(subject)
}

// StackSetsPage is the list of StackSets at /stacksets.
type StackSetsPage struct {
	Page
	Sets []StackSetRow
	// Hidden counts the sets the viewer may not read.
	Hidden int
}

// StackSetRow is a StackSet in the list.
type StackSetRow struct {
	Name   string
	Stacks int
	// State is the rollout's state, empty for a set without one; Step is
	// the first step not complete (0 when complete), of Steps.
	State       string
	Step, Steps int
	Message     string
	// Failing counts the generators whose last evaluation failed.
	Failing int
}

// StackSetRowOf is v's row.
func StackSetRowOf(v model.StackSetView) StackSetRow {
	row := StackSetRow{Name: v.Name, Stacks: len(v.Stacks)}
	for _, g := range v.Generators {
		if g.Error != "" {
			row.Failing++
		}
	}
	if ro := v.Rollout; ro != nil {
		row.State, row.Step, row.Steps, row.Message = ro.State, ro.Step, len(ro.Steps), ro.Message
	}
	return row
}

// StackSetPage is a StackSet's page at /stacksets/{name}: its
// generators' output, its stacks and its rollout.
type StackSetPage struct {
	Page
	Set model.StackSetView
	Row StackSetRow
	// Steps are the rollout's steps, numbered; nil without a rollout.
	Steps []RolloutStep
	// Resume and Abort are the viewer's permissions to act on the
	// rollout; CanResume and CanAbort whether its state takes the action
	// (a halted or aborted rollout resumes; a halted or progressing one
	// aborts).
	Resume, Abort       Permission
	CanResume, CanAbort bool
}

// RolloutStep is a step of a rollout as the set's page shows it.
type RolloutStep struct {
	model.RolloutStepStatus
	// Number is the step's, from 1; Current says it is the first step
	// not complete.
	Number  int
	Current bool
}

// NewStackSetPage is the page of v, with the viewer's permissions to
// resume and abort its rollout.
func NewStackSetPage(pg Page, v model.StackSetView, resume, abort Permission) StackSetPage {
	p := StackSetPage{Page: pg, Set: v, Row: StackSetRowOf(v), Resume: resume, Abort: abort}
	ro := v.Rollout
	if ro == nil {
		return p
	}
	p.CanResume = ro.State == model.RolloutHalted || ro.State == model.RolloutAborted
	p.CanAbort = ro.State == model.RolloutHalted || ro.State == model.RolloutProgressing
	p.Steps = make([]RolloutStep, len(ro.Steps))
	for i, st := range ro.Steps {
		p.Steps[i] = RolloutStep{RolloutStepStatus: st, Number: i + 1, Current: i+1 == ro.Step}
	}
	return p
}
