package model

import (
	"fmt"
	"strings"
	"time"

	"github.com/stackd/stackd/daemon/spec"
)

// ConfigStatus is the outcome of the last config (re)load.
type ConfigStatus struct {
	Successful  bool      `json:"successful"`
	LastSuccess time.Time `json:"lastSuccess,omitzero"`
	LastAttempt time.Time `json:"lastAttempt,omitzero"`
	// Error says why the last attempt failed: the config's problems, one
	// per line, each naming file:line:column.
	Error string `json:"error,omitempty"`
	// Health is the config's as a whole: the worst of its sources'.
	Health *Health `json:"health,omitempty"`
	// Sources are the --config values, in order.
	Sources []SourceStatus `json:"sources,omitempty"`
	// Paused says that no operation starts until resumed (stackd pause).
	Paused bool `json:"paused,omitempty"`
	// Removes is how many stacks the last config refused by the
	// mass-removal guard removes: a reload allowing that many removals
	// (stackd reload --allow-removal N) applies it once. Zero otherwise.
	Removes int `json:"removes,omitempty"`
	// Policies is the state of the policies (--policy); nil without.
	Policies *PolicyStatus `json:"policies,omitempty"`
	// Orphaned are the stacks kept although they left the config, because
	// their config source is no longer configured: a reload allowing their
	// removal (stackd reload --allow-removal N) removes them.
	Orphaned []string `json:"orphaned,omitempty"`
	// Stopping says that stackd is stopping: no operation starts, and it
	// waits for those in WaitingFor ("<stack> (<update>)") to end.
	Stopping   bool     `json:"stopping,omitempty"`
	WaitingFor []string `json:"waitingFor,omitempty"`
}

// PolicyStatus is the outcome of the last load of the policies.
type PolicyStatus struct {
	// Source is the --policy value, free of credentials.
	Source string `json:"source"`
	// Commit is the commit of a Git source whose policies are in force.
	Commit string `json:"commit,omitempty"`
	// Policies are the names of the policies in force.
	Policies    []string  `json:"policies"`
	Successful  bool      `json:"successful"`
	LastSuccess time.Time `json:"lastSuccess,omitzero"`
	LastAttempt time.Time `json:"lastAttempt,omitzero"`
	// Error says why the last load failed, each problem naming
	// file:line:column; the policies loaded before stay in force (none:
	// every change is denied).
	Error string `json:"error,omitempty"`
}

// SourceStatus is the state of one config source.
type SourceStatus struct {
	// Source is the --config value, free of credentials.
	Source string `json:"source"`
	// Git is set for a Git source.
	Git *spec.GitDir `json:"git,omitempty"`
	// Commit is the commit whose manifests are in force (Git sources).
	Commit string `json:"commit,omitempty"`
	// LatestCommit is what Git.Ref pointed at when last polled. It differs
	// from Commit while it is being applied, or when it could not be.
	LatestCommit string `json:"latestCommit,omitempty"`
	// LastPoll is when the Git ref was last resolved.
	LastPoll time.Time `json:"lastPoll,omitzero"`
	// AppliedAt is when the source's content in force was applied.
	AppliedAt time.Time `json:"appliedAt,omitzero"`
	// Error says why the source's latest content is not in force: it
	// cannot be fetched, or the config it makes is not valid.
	Error string `json:"error,omitempty"`
	// Stacks counts the stacks the source defines.
	Stacks int `json:"stacks"`
	// Health is Degraded when Error is set, else the worst health of the
	// source's stacks (Progressing while a new commit is applied).
	Health Health `json:"health"`
}

// ConfigRevision is one attempt to apply a new config: what the sources
// were, whether it was applied, and which stacks it added, changed or
// removed.
type ConfigRevision struct {
	// Seq numbers revisions, from 1; the store assigns it.
	Seq  uint64    `json:"seq"`
	Time time.Time `json:"time"`
	// Trigger is what read the config: "start", "git" (a new commit),
	// "watch" (a file changed) or "reload" (SIGHUP or the API).
	Trigger string           `json:"trigger"`
	Sources []RevisionSource `json:"sources"`
	Applied bool             `json:"applied"`
	// Error says why the revision was not applied.
	Error   string   `json:"error,omitempty"`
	Added   []string `json:"added,omitempty"`
	Changed []string `json:"changed,omitempty"`
	Removed []string `json:"removed,omitempty"`
	// AllowedRemoval is the removals an operator allowed this reload
	// (stackd reload --allow-removal N), past the mass-removal guard.
	AllowedRemoval int `json:"allowedRemoval,omitempty"`
}

// RevisionSource is one source of a revision, and its commit when it is
// a Git source.
type RevisionSource struct {
	Source string `json:"source"`
	Commit string `json:"commit,omitempty"`
}

// PushResult is what a push webhook woke: the stacks and config sources
// that track the pushed branch.
type PushResult struct {
	Stacks  []string `json:"stacks"`
	Sources []string `json:"sources,omitempty"`
}

// Stats are the scheduler's gauges.
type Stats struct {
	// Running counts operations in flight.
	Running int
	// Queued counts stacks that want to run but wait for a worker, a
	// prerequisite or a sync wave.
	Queued int
	// Paused is set while no operation may start (Pause).
	Paused bool
	// AwaitingApproval counts the stacks this replica acts on whose plan
	// awaits approval.
	AwaitingApproval int
}

// ProblemSummary is the first of a list of problems, one a line (a
// source's Error: the causes come first), after their count when there
// are several: "3 problems: x.yaml:4:5: spec.brnach: unknown field …".
func ProblemSummary(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) < 2 {
		return lines[0]
	}
	return fmt.Sprintf("%d problems: %s", len(lines), lines[0])
}
