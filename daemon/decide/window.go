package decide

import (
	"strings"

	"github.com/stackd/stackd/daemon/model"
	"github.com/stackd/stackd/daemon/spec"
)

// ChangeOf is the change a decided run makes, for change windows: ""
// for a run that changes nothing (a preview). A remediation of drift is
// ChangeDrift only when it deploys what was deployed already: with a
// new commit or spec it is a ChangeCommit too, and counts as one.
func ChangeOf(last *model.LastUpdate, o Observation, dec Decision, remediating bool) string {
	switch {
	case dec.Type == model.UpdateDestroy:
		return spec.ChangeDestroy
	case dec.Type != model.UpdateUp:
		return ""
	case remediating && last != nil && (last.LastSuccessfulCommit == o.Commit || o.SkippedCommit == o.Commit) && last.Generation == o.Generation:
		return spec.ChangeDrift // a skipped commit counts as deployed
	}
	return spec.ChangeCommit
}

// WindowAction is what the change windows do with a decided run.
type WindowAction int

const (
	// WindowLets lets the run go.
	WindowLets WindowAction = iota
	// WindowHolds holds the run back until the windows open.
	WindowHolds
	// WindowChecksPaths lets the run go only as far as the check of the
	// new commit against spec.paths: a commit that changes no file of
	// the stack is skipped, as in an open window; one that does is held
	// back then.
	WindowChecksPaths
)

// WindowRule decides what the windows do with a run of change (ChangeOf;
// "" changes nothing) when their verdict is open, an override lets the
// run through when overridden, and unchecked says that only a new commit
// asks for the run (Decision.NewCommit), of a stack with a paths filter,
// and the commit is not known yet to change the stack's files. Only a
// change that the windows close and that is known to change the stack
// waits.
func WindowRule(change string, open, overridden, unchecked bool) WindowAction {
	switch {
	case change == "" || open || overridden:
		return WindowLets
	case change == spec.ChangeCommit && unchecked:
		return WindowChecksPaths
	}
	return WindowHolds
}

// manualMark ends the token of a sync that a person asked for, as it
// passes from the replica that took the request to the one that holds
// the stack; the stack's record keeps the token without it.
const manualMark = "+manual"

// ManualToken marks token as that of a sync a person asked for (the
// API, the web UI, stackd sync), which change windows with manualSync
// let through.
func ManualToken(token string) string { return token + manualMark }

// SplitManual is token without ManualToken's mark, and whether it had it.
func SplitManual(token string) (string, bool) { return strings.CutSuffix(token, manualMark) }
