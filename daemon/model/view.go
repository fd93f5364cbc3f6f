package model

import "time"

// StackView is a stack as the API shows it: its spec with secrets
// redacted, and its PKO-shaped status.
type StackView struct {
	Name string `json:"name"`
	// Spec is nil for a stack that left the config.
	Spec    map[string]any `json:"spec,omitempty"`
	Status  StackStatus    `json:"status"`
	Removed bool           `json:"removed,omitempty"`
	// Orphaned says why a stack that left the config is kept: its config
	// source is no longer configured (StackRecord.Orphaned).
	Orphaned string `json:"orphaned,omitempty"`
	// ExternalLink is the stack's external-link annotation.
	ExternalLink string `json:"externalLink,omitempty"`
	// Labels are the stack's metadata labels.
	Labels map[string]string `json:"labels,omitempty"`
	// LastSuccess is when an update last succeeded.
	LastSuccess time.Time `json:"lastSuccess,omitzero"`
	// Tracking is the branch, commit or Program the stack follows.
	Tracking string `json:"tracking,omitempty"`
	// Source is the config source that defines the stack (a --config
	// value); empty once the stack left the config.
	Source string `json:"source,omitempty"`
	// Holder is the replica that acts on the stack (cluster mode).
	Holder string `json:"holder,omitempty"`
	// Owner is "StackSet/NAME" for a stack a StackSet generates.
	Owner string `json:"owner,omitempty"`
	// AppliedCommit and LatestCommit describe the commits of the last
	// successful up and of the last update; CommitURL, when the
	// repository is on a forge, is the link to a commit with "{sha}" in
	// place of its hash.
	AppliedCommit *Commit `json:"appliedCommit,omitempty"`
	LatestCommit  *Commit `json:"latestCommit,omitempty"`
	CommitURL     string  `json:"commitURL,omitempty"`
}

// StackVersion says when a stack's view last changed: Version grows with
// every change of its record or spec (and differs between a stack and a
// later one of the same name); Holder is its holder now (cluster mode).
type StackVersion struct {
	Name    string
	Version uint64
	Holder  string
}
