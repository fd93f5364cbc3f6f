package model

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"time"

	"github.com/stackd/stackd/daemon/spec"
)

// GitSource is a repository to resolve and check out, with its resolved
// credentials.
type GitSource struct {
	// URL is projectRepo as written: https://, http://, ssh://, git://,
	// file:// or scp-like git@host:path. It never carries credentials.
	URL string
	// Ref is the branch or tag to resolve, short ("main", "v1.2") or full
	// ("refs/heads/main"); empty for a pinned commit.
	Ref string
	// RepoDir is the project's directory inside the repository.
	RepoDir string
	Shallow bool
	// Auth is nil for anonymous access.
	Auth *GitAuth
}

// GitAuth holds resolved Git credentials (see spec.GitAuth).
type GitAuth = spec.GitAuth

// Key identifies the source's URL together with its credentials without
// revealing them: sources with equal keys may share one ls-remote.
func (s GitSource) Key() string {
	h := sha256.New()
	h.Write([]byte(s.URL))
	if a := s.Auth; a != nil {
		for _, part := range a.Parts() {
			h.Write([]byte{0})
			h.Write(part)
		}
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// Workspace is one stack's Pulumi side: where its program is, which stack
// of which backend it is, and what config and environment it runs with.
// It carries resolved secrets: never log or store it.
type Workspace struct {
	// Name is stackd's name of the stack; it keys the runner's per-stack
	// state directory.
	Name string
	// Stack is the Pulumi stack name: "dev", "org/dev" or "org/project/dev".
	Stack string
	// ProjectDir holds Pulumi.yaml: a checkout (joined with repoDir) or the
	// directory a Program document was written to.
	ProjectDir string
	// WorkDir is the directory of the stack's program that its processes
	// may read and write in the sandbox: the whole checkout, of which
	// ProjectDir is the repoDir. Empty means ProjectDir.
	WorkDir string
	// Backend is spec.backend; empty means the runner's default backend.
	Backend string
	// Project is spec.project: the Pulumi project the program must name,
	// empty for any (see the runner's checkProject).
	Project string
	// SecretsProvider is used when the stack is created; empty means the
	// backend's default (passphrase on the default backend).
	SecretsProvider string
	// UseLocalStackOnly forbids creating the stack.
	UseLocalStackOnly bool
	// Env is added to the pulumi process's environment (envRefs). Values
	// may be secrets.
	Env map[string]string
	// SecretEnv names the variables of Env whose values are secrets (by
	// kind: Secret, FS, Literal; or by name): the runner hides those in
	// logs and outputs, and leaves plain values such as a region readable.
	SecretEnv []string
	// Environments are Pulumi ESC environments to import (spec.environment).
	Environments []string
	// Config is applied in order: config, then configRef, then secretsRef.
	Config []ConfigValue
	// KeepConfig uses the stack config the runner holds from earlier
	// operations instead of Config: a removed stack's destroy has no spec
	// left to take it from.
	KeepConfig bool
}

// ConfigValue is one stack config value.
type ConfigValue = spec.ConfigValue

// Operation is one Pulumi operation on a workspace.
type Operation struct {
	Workspace
	// Type is UpdateUp, UpdatePreview, UpdateRefresh or UpdateDestroy.
	Type string
	// Options from the spec and its updateTemplate.
	Refresh          bool
	Targets          []string
	TargetDependents bool
	Parallel         int
	Message          string
	ExpectNoChanges  bool
	Replace          []string
	ContinueOnError  bool
	// ReadOnly is a pull request's preview: the runner's state of the
	// stack is copied, never changed, and a stack that does not exist is
	// previewed on a scratch backend instead of being created.
	ReadOnly bool
	// Diff asks a preview for the resources' property diffs.
	Diff bool
	// PreviewOnly makes a destroy a preview of it (`pulumi destroy
	// --preview-only`): nothing changes, and the Result's Steps and
	// Changes are the deletes the destroy would make. It takes neither
	// Export nor Remove nor ContinueOnError.
	PreviewOnly bool
	// Identity asks for cloud credentials (spec.credentials), nil for
	// none: the runner decides the operation and scope claims.
	Identity *IdentityRequest
	// Export asks for the stack's resources from its state once the
	// operation ended (Result.Resources), whether it succeeded or not.
	Export bool
	// Remove deletes the stack itself after a successful destroy.
	Remove bool
	// BreakLock breaks a lock on the stack whoever holds it: the daemon
	// sets it only when the lock's holder is known to be gone (a replica
	// whose lease expired, after the handover grace).
	BreakLock bool
	// SavePlan asks a preview to save the plan it makes in the runner's
	// state of the stack (mode 0600): Result.Plan names it. Saving a plan
	// discards the stack's older plans, which it supersedes. A destroy
	// preview (PreviewOnly) saves no file: its plan binds the stack's
	// state and config as the preview saw them.
	SavePlan bool
	// Judged says that policies judge the preview's steps: the runner
	// then also returns them as policies see them (Result.PolicySteps).
	Judged bool
	// Plan constrains an up to a saved plan: the runner refuses (an error
	// that is ErrPlanStale) when the plan file, the stack's config and
	// secrets or its state changed since the plan was made, and the
	// engine stops at the first step the plan does not allow. The plan is
	// discarded once the up ran, whatever its outcome. A destroy with the
	// plan of a destroy preview runs only while the stack's state and
	// config are those the preview saw (`destroy` takes no plan file), and
	// is refused the same way otherwise.
	Plan *Plan
	// Timeout bounds the whole operation; zero means the runner's default.
	Timeout time.Duration
	// Log receives the operation's output while it runs; nil discards it.
	Log io.Writer
}

// Result is what a finished operation reports.
type Result struct {
	// Outputs are the stack's outputs after an up, as JSON values; secret
	// outputs are the JSON string "[secret]". Nil for other operations.
	Outputs map[string]json.RawMessage
	// Changes counts resources by operation (create, update, delete,
	// same, …) as the engine's summary reports them.
	Changes map[string]int
	// Permalink links to the update on backends that have one.
	Permalink string
	// Drift lists, for an UpdateDrift check, the resources whose real
	// state differs from the stack's state.
	Drift []spec.DriftedResource
	// Steps are, for a preview (also a destroy's, PreviewOnly), the steps
	// it plans that change something ("same" steps are left out), in the
	// engine's order.
	Steps []Step
	// PolicySteps are, for a preview that is Judged, its steps as
	// policies judge them: the values of secret inputs in clear where
	// Steps show "[secret]", and nothing scrubbed. A secret hides a value
	// from people, not from the rules. They live in memory only, for
	// Policies.Evaluate: never stored, served, logged or sent (hence
	// json:"-"); a verdict's messages, which may quote them, are scrubbed
	// of PolicySecrets before anything shows them.
	PolicySteps []Step `json:"-"`
	// PolicySecrets are the texts of the secret values PolicySteps show
	// in clear (their strings and numbers), to scrub from what policies
	// say. In memory only, as PolicySteps.
	PolicySecrets []string `json:"-"`
	// Plan is the plan a preview with SavePlan saved.
	Plan *Plan
	// Resources are the stack's resources exported from its state after
	// an operation that changes or checks it (up, refresh, destroy,
	// drift), when Exported; an export that failed leaves Exported false
	// and sets ExportFailed (the stack's resources then show an older
	// state).
	Resources    []Resource
	Exported     bool
	ExportFailed bool
}

// JudgedSteps are the steps of r that policies judge: PolicySteps, secret
// values in clear, when the runner made them; else Steps.
func (r Result) JudgedSteps() []Step {
	if r.PolicySteps != nil {
		return r.PolicySteps
	}
	return r.Steps
}
