package model

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/stackd/stackd/daemon/spec"
)

// Condition types of a stack's status, as in PKO's StackStatus.
const (
	ConditionReady       = "Ready"
	ConditionReconciling = "Reconciling"
	ConditionStalled     = "Stalled"
	// ConditionAwaitingApproval is stackd's own: a plan waits for a
	// person's approval.
	ConditionAwaitingApproval = "AwaitingApproval"
)

// Condition reasons, PKO's strings.
const (
	ReasonProcessingCompleted      = "ProcessingCompleted"
	ReasonNotReadyInProgress       = "NotReadyInProgress"
	ReasonNotReadyStalled          = "NotReadyStalled"
	ReasonStackProcessing          = "StackProcessing"
	ReasonRetryingAfterFailure     = "RetryingAfterFailure"
	ReasonPreviewFailed            = "PreviewFailed"
	ReasonPrerequisiteNotSatisfied = "PrerequisiteNotSatisfied"
	ReasonSpecInvalid              = "SpecInvalid"
	ReasonSourceUnavailable        = "SourceUnavailable"
	ReasonUpdateFailed             = "UpdateFailed"
	ReasonWorkspaceFailed          = "WorkspaceFailed"
	// ReasonChangeWindowClosed is stackd's own: a change waits for a
	// change window to open.
	ReasonChangeWindowClosed = "ChangeWindowClosed"
	// stackd's own: change control.
	ReasonAwaitingApproval = "AwaitingApproval"
	ReasonPolicyDenied     = "PolicyDenied"
	ReasonPlanRejected     = "PlanRejected"
	ReasonPlanExpired      = "PlanExpired"
	ReasonPlanStale        = "PlanStale"
)

// Argo CD health statuses.
const (
	HealthHealthy     = "Healthy"
	HealthProgressing = "Progressing"
	HealthDegraded    = "Degraded"
	// HealthAwaitingApproval is stackd's own: nothing is wrong, a person
	// has to decide.
	HealthAwaitingApproval = "AwaitingApproval"
)

// StackRecord is what stackd keeps about one stack between restarts: its
// identity, the generation counter that plays the role of Kubernetes'
// metadata.generation, and its PKO-shaped status.
type StackRecord struct {
	Name string `json:"name"`
	// Generation increases by one each time SpecHash changes.
	Generation int64 `json:"generation"`
	// SpecHash is the content hash of the normalised spec last seen.
	SpecHash string `json:"specHash"`
	// Removed is set when the stack left the config but still has work to
	// do (a destroy); the record is deleted once that work succeeded.
	Removed bool `json:"removed,omitempty"`
	// Source is the config source that defined the stack (a --config
	// value), so that a stack whose source is no longer configured is told
	// from one a change of its source removed.
	Source string `json:"source,omitempty"`
	// Orphaned says why a stack is kept although it left the config: its
	// source is no longer configured. Nothing runs for it, and it is not
	// removed (nor destroyed) until an operator confirms the removal.
	Orphaned string `json:"orphaned,omitempty"`
	// SyncRequest is the token of the last sync requested through the API
	// (or by a dependent stack); with the reconcile-request annotation it
	// makes the stack's reconcile request.
	SyncRequest string `json:"syncRequest,omitempty"`
	// Destroy is what a destroy needs once the stack left the config; set
	// only for stacks with destroyOnFinalize. It holds no secret.
	Destroy *DestroySpec `json:"destroy,omitempty"`
	// LastSuccess is when an update of the stack last succeeded.
	LastSuccess time.Time `json:"lastSuccess,omitzero"`
	// PathsHash digests the files of spec.paths at the last successful up:
	// a new commit with the same digest changes nothing the stack deploys.
	PathsHash string `json:"pathsHash,omitempty"`
	// WindowOverride, when set, lets the next update run while a change
	// window is closed; that update records it and clears it.
	WindowOverride *WindowOverride `json:"windowOverride,omitempty"`
	// ManualSync says that a sync a person asked for (the API, the web
	// UI, stackd sync) waits to run: change windows with manualSync let
	// it through. The update that runs next clears it.
	ManualSync bool `json:"manualSync,omitempty"`
	// AppliedCommit is the commit of the last successful up, and
	// LatestCommit that of the last update, as the checkout described
	// them.
	AppliedCommit *Commit     `json:"appliedCommit,omitempty"`
	LatestCommit  *Commit     `json:"latestCommit,omitempty"`
	Status        StackStatus `json:"status"`
}

// DestroySpec keeps what destroying a removed stack takes: its Pulumi
// identity, the project it was last run from, and its environment
// references except literal values (which may be secrets and are not
// stored); and what change control needs to judge the destroy after a
// restart, when the stack's last spec is no longer known: its approval
// and its labels.
type DestroySpec struct {
	Stack           string                      `json:"stack"`
	Backend         string                      `json:"backend,omitempty"`
	SecretsProvider string                      `json:"secretsProvider,omitempty"`
	ProjectDir      string                      `json:"projectDir"`
	EnvRefs         map[string]spec.ResourceRef `json:"envRefs,omitempty"`
	ConfigDir       string                      `json:"configDir,omitempty"`
	Remove          bool                        `json:"remove,omitempty"`
	Approval        *spec.Approval              `json:"approval,omitempty"`
	Labels          map[string]string           `json:"labels,omitempty"`
	// Credentials and Repository are what the destroy's cloud token
	// needs (spec.credentials, projectRepo).
	Credentials *spec.Credentials `json:"credentials,omitempty"`
	Repository  string            `json:"repository,omitempty"`
}

// StackStatus mirrors PKO's StackStatus JSON field for field, plus health
// and drift.
type StackStatus struct {
	ObservedGeneration       int64                      `json:"observedGeneration,omitempty"`
	ObservedReconcileRequest string                     `json:"observedReconcileRequest,omitempty"`
	Conditions               []Condition                `json:"conditions,omitempty"`
	Outputs                  map[string]json.RawMessage `json:"outputs,omitempty"`
	CurrentUpdate            *CurrentUpdate             `json:"currentUpdate,omitempty"`
	LastUpdate               *LastUpdate                `json:"lastUpdate,omitempty"`
	Health                   *Health                    `json:"health,omitempty"`
	// Drift is stackd's own: the outcome of the last drift check. Drift is
	// an axis of its own: it does not make a stack un-Ready.
	Drift *spec.DriftStatus `json:"drift,omitempty"`
	// SkippedCommit is stackd's own: the newest commit seen that changed
	// no file of spec.paths, so that nothing ran for it.
	SkippedCommit *SkippedCommit `json:"skippedCommit,omitempty"`
	// ChangeWindow is stackd's own: set while a change waits for a change
	// window, with the time it may run.
	ChangeWindow *ChangeWindowStatus `json:"changeWindow,omitempty"`
	// Gate is stackd's own: an update that change control holds (a plan
	// that awaits approval, or a change the policies denied).
	Gate *Gate `json:"gate,omitempty"`
	// Retry is stackd's own: a failing stack's next attempt while it has
	// attempts left (PKO's conditions say Reconciling with
	// RetryingAfterFailure); nil otherwise, and while an update runs.
	Retry *Retry `json:"retry,omitempty"`
}

// Retry is when a failing stack tries again: its Attempt-th attempt of
// the Of it makes before it stalls.
type Retry struct {
	Attempt int64     `json:"attempt"`
	Of      int64     `json:"of"`
	At      time.Time `json:"at"`
}

// String is "failing, retry 2 of 3 at <time>", the time in UTC.
func (r *Retry) String() string {
	return fmt.Sprintf("failing, retry %d of %d at %s", r.Attempt, r.Of, r.At.UTC().Format(time.RFC3339))
}

// SkippedCommit is a commit that was seen and not deployed, and why.
type SkippedCommit struct {
	Commit string    `json:"commit"`
	Reason string    `json:"reason"`
	Time   time.Time `json:"time"`
}

// Condition is a Kubernetes-style status condition.
type Condition struct {
	Type               string    `json:"type"`
	Status             string    `json:"status"` // "True" or "False"
	Reason             string    `json:"reason,omitempty"`
	Message            string    `json:"message,omitempty"`
	ObservedGeneration int64     `json:"observedGeneration,omitempty"`
	LastTransitionTime time.Time `json:"lastTransitionTime"`
}

// CurrentUpdate names the update in flight.
type CurrentUpdate struct {
	Generation       int64  `json:"generation,omitempty"`
	ReconcileRequest string `json:"reconcileRequest,omitempty"`
	Name             string `json:"name,omitempty"`
	Commit           string `json:"commit,omitempty"`
}

// LastUpdate is the outcome of the last finished update, PKO's
// StackUpdateState.
type LastUpdate struct {
	Generation           int64     `json:"generation,omitempty"`
	ReconcileRequest     string    `json:"reconcileRequest,omitempty"`
	Name                 string    `json:"name,omitempty"`
	Type                 string    `json:"type,omitempty"`
	State                string    `json:"state,omitempty"`
	Message              string    `json:"message,omitempty"`
	LastAttemptedCommit  string    `json:"lastAttemptedCommit,omitempty"`
	LastSuccessfulCommit string    `json:"lastSuccessfulCommit,omitempty"`
	Permalink            string    `json:"permalink,omitempty"`
	LastResyncTime       time.Time `json:"lastResyncTime"`
	Failures             int64     `json:"failures,omitempty"`
}

// Health is the Argo CD health of a stack: Healthy, Progressing or
// Degraded, with the message of the condition that decided it.
type Health struct {
	Status  string `json:"status"`
	Message string `json:"message,omitempty"`
}

// Clone returns a deep copy of s, safe to hand out while s changes.
func (s StackStatus) Clone() StackStatus {
	c := s
	c.Conditions = append([]Condition(nil), s.Conditions...)
	if s.Outputs != nil {
		c.Outputs = make(map[string]json.RawMessage, len(s.Outputs))
		for k, v := range s.Outputs {
			c.Outputs[k] = append(json.RawMessage(nil), v...)
		}
	}
	if s.CurrentUpdate != nil {
		cu := *s.CurrentUpdate
		c.CurrentUpdate = &cu
	}
	if s.LastUpdate != nil {
		lu := *s.LastUpdate
		c.LastUpdate = &lu
	}
	if s.Health != nil {
		h := *s.Health
		c.Health = &h
	}
	c.Drift = s.Drift.Clone()
	if s.ChangeWindow != nil {
		cw := *s.ChangeWindow
		cw.Windows = append([]string(nil), s.ChangeWindow.Windows...)
		c.ChangeWindow = &cw
	}
	c.Gate = s.Gate.Clone()
	if s.Retry != nil {
		r := *s.Retry
		c.Retry = &r
	}
	return c
}

// Condition returns the condition of type typ, or nil.
func (s *StackStatus) Condition(typ string) *Condition {
	for i := range s.Conditions {
		if s.Conditions[i].Type == typ {
			return &s.Conditions[i]
		}
	}
	return nil
}
