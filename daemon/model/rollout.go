package model

import "time"

// Reasons of the Reconciling condition of a stack that a StackSet's
// rollout holds.
const (
	// ReasonRolloutWaiting: an earlier step has not yet succeeded on the
	// new revision, or the step's maxUpdate stacks are updating.
	ReasonRolloutWaiting = "RolloutWaiting"
	// ReasonRolloutHalted: a stack of the set failed on the new revision;
	// nothing more moves until a newer commit, a resume or an abort.
	ReasonRolloutHalted = "RolloutHalted"
	// ReasonRolloutAborted: the rollout of this revision was aborted; the
	// stack stays at its applied commit until a newer revision.
	ReasonRolloutAborted = "RolloutAborted"
)

// States of a rollout (RolloutStatus.State).
const (
	RolloutComplete    = "Complete"
	RolloutProgressing = "Progressing"
	RolloutHalted      = "Halted"
	RolloutAborted     = "Aborted"
)

// States of a stack in a rollout (RolloutStack.State).
const (
	MemberSucceeded = "Succeeded" // succeeded on its target
	MemberUpdating  = "Updating"  // an operation runs for it
	MemberWaiting   = "Waiting"   // held by the rollout
	MemberFailed    = "Failed"    // failed on its target
	MemberPending   = "Pending"   // not yet on its target, not held (about to run, or its target is not known)
)

// RolloutMember is what a rollout needs to know of one stack of a set.
type RolloutMember struct {
	Name   string
	Labels map[string]string
	// Commit and Generation are the stack's target: what it would deploy
	// now. Commit is empty while it is not known.
	Commit     string
	Generation int64
	// Request is the stack's reconcile request now: a failure under an
	// earlier request (before a resume) halts nothing.
	Request string
	// Last is the stack's last finished update (status.lastUpdate).
	Last *LastUpdate
	// SkippedCommit is a commit that changed nothing the stack deploys.
	SkippedCommit string
	// Running says an operation runs for it, here or on another replica.
	Running bool
}

// Done says whether m succeeded on its target.
func (m *RolloutMember) Done() bool {
	l := m.Last
	if m.Commit == "" || l == nil || l.Generation != m.Generation {
		return false
	}
	if l.State != UpdateSucceeded || l.Type != UpdateUp {
		return false
	}
	return l.LastSuccessfulCommit == m.Commit || m.SkippedCommit == m.Commit
}

// Failed says whether m's last update failed on its target under its
// current request.
func (m *RolloutMember) Failed() bool {
	l := m.Last
	return m.Commit != "" && l != nil && l.State == UpdateFailed && l.Generation == m.Generation &&
		l.LastAttemptedCommit == m.Commit && l.ReconcileRequest == m.Request
}

// RolloutStatus is a StackSet's rollout as it stands.
type RolloutStatus struct {
	Set   string `json:"set"`
	State string `json:"state"`
	// Step is the first step (1-based) not complete; 0 when complete.
	Step  int                 `json:"step"`
	Steps []RolloutStepStatus `json:"steps"`
	// HaltedBy names the stacks that failed on their target, for a halted
	// rollout.
	HaltedBy []string `json:"haltedBy,omitempty"`
	// Message says in a sentence where the rollout stands.
	Message string `json:"message,omitempty"`
}

// RolloutStepStatus is one step of a rollout. The last step, when the
// strategy's steps do not select every stack, holds the rest.
type RolloutStepStatus struct {
	Selector string `json:"selector"`
	// MaxUpdate is the step's limit resolved to a count; 0 is no limit.
	MaxUpdate int            `json:"maxUpdate,omitempty"`
	Stacks    []RolloutStack `json:"stacks"`
}

// RolloutStack is one stack's place in a rollout.
type RolloutStack struct {
	Name   string `json:"name"`
	State  string `json:"state"`
	Commit string `json:"commit,omitempty"` // its target
	// AppliedCommit is the commit of its last successful up.
	AppliedCommit string `json:"appliedCommit,omitempty"`
}

// StackSetView is a StackSet as the API shows it: its generators' output,
// its stacks and its rollout.
type StackSetView struct {
	Name   string `json:"name"`
	Source string `json:"source,omitempty"`
	// Generators say what each generator yielded when last evaluated.
	Generators []GeneratorStatus `json:"generators"`
	// Stacks are the names of the stacks the set generates, sorted.
	Stacks []string `json:"stacks"`
	// Rollout is nil for a set without a rollingSync strategy.
	Rollout *RolloutStatus `json:"rollout,omitempty"`
}

// GeneratorStatus is what one generator of a set yielded.
type GeneratorStatus struct {
	// Path is the generator's path in the config ("spec.generators[0]").
	Path string `json:"path"`
	// Kind is list, git directories, git files, matrix or merge.
	Kind string `json:"kind"`
	// Repository and Commit are a git generator's, free of credentials.
	Repository string `json:"repository,omitempty"`
	Commit     string `json:"commit,omitempty"`
	// Items is how many parameter sets it yielded; Origins what yielded
	// them ("envs/dev"), in order.
	Items   int      `json:"items"`
	Origins []string `json:"origins,omitempty"`
	// Error is why the last evaluation failed; the set then keeps the
	// output of the last one that succeeded, from LastSuccess.
	Error       string    `json:"error,omitempty"`
	LastSuccess time.Time `json:"lastSuccess,omitzero"`
}
