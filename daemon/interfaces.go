package daemon

import (
	"context"
	"errors"

	"github.com/stackd/stackd/daemon/model"
)

// Fetcher resolves and checks out Git sources. gitwatch implements it.
// Its methods are safe for concurrent use, and every error it returns is
// free of credentials.
type Fetcher interface {
	// Resolve returns the full SHA that src.Ref points at, by ls-remote.
	// Calls for sources with the same Key within the fetcher's cache
	// period share one remote call.
	Resolve(ctx context.Context, src model.GitSource) (string, error)
	// Checkout makes dir hold the tree of commit and returns the project
	// directory (dir joined with src.RepoDir, checked to stay inside dir).
	// dir is replaced only by a complete checkout, never left half
	// written; a dir already at commit is reused.
	Checkout(ctx context.Context, src model.GitSource, commit, dir string) (string, error)
	// Forget drops what is cached for url, so that the next Resolve asks
	// the remote: a push webhook calls it.
	Forget(url string)
}

// ErrPlanStale is returned (wrapped) by a Runner for an up or a destroy
// constrained to a plan that no longer holds: what the plan was made
// against changed, or the engine found a step the plan does not allow.
var ErrPlanStale = errors.New("the saved plan no longer holds")

// PlanDiscarder is implemented by a Runner that saves plans: it deletes
// the plan id of stack name (rejected, expired or superseded). A plan
// that is already gone is no error.
type PlanDiscarder interface {
	DiscardPlan(name, id string) error
}

// ErrStackNotFound is returned (wrapped) by a Runner for an operation on
// a stack that must exist (Workspace.UseLocalStackOnly) and does not: a
// destroy of it has nothing to do.
var ErrStackNotFound = errors.New("the Pulumi stack does not exist")

// Runner runs Pulumi operations; runner implements it. Its methods are
// safe for concurrent use on different stacks; the daemon never runs two
// operations on one stack at once.
type Runner interface {
	// Run performs op. A failed operation returns an error whose message
	// is the engine's diagnostic (the program's error), free of
	// credentials and of the daemon's own secrets; the Result may still
	// hold the change summary.
	Run(ctx context.Context, op model.Operation) (model.Result, error)
	// Outputs reads ws's current outputs with secret values in clear, for
	// StackOutput references of other stacks.
	Outputs(ctx context.Context, ws model.Workspace) (map[string]any, error)
}

// CommitReader reads a commit of a checkout the Fetcher made, without a
// network call; gitwatch's Fetcher implements it.
type CommitReader interface {
	CommitInfo(dir, sha string) (model.Commit, error)
}
