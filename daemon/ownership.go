package daemon

import (
	"errors"

	"github.com/stackd/stackd/daemon/model"
)

// Ownership shares the stacks among stackd replicas (cluster mode). A
// replica acts only on the stacks it holds: it polls, runs, drift-checks,
// destroys and writes records for those, and shows the others as their
// holders recorded them. Without an Ownership the daemon holds every
// stack. cluster implements it on etcd.
//
// Its methods are safe for concurrent use and must not block: the daemon
// calls them with its lock held.
type Ownership interface {
	// SetStacks declares every stack the daemon knows (in the config, or
	// removed with work left). The replica claims its share of them and
	// gives up the ones no longer named.
	SetStacks(names []string)
	// Holds says whether this replica holds name now.
	Holds(name string) bool
	// Holder is the replica that holds name, empty when none does.
	Holder(name string) string
	// Release gives name up after a Handover event, once nothing runs on
	// it (or the handover grace ended and the operation was interrupted).
	// After a Lost event it says that the operation of that holding has
	// ended: until then the replica does not claim name again, so that a
	// late write of that operation can never pass a new holding's fence.
	Release(name string)
	// Events reports what changes for this replica (see OwnershipEvent).
	Events() <-chan model.OwnershipEvent
	// RequestSync passes a sync request for a stack held by another
	// replica to its holder.
	RequestSync(name, token string) error
	// Push passes a push event to every other replica, so that the
	// holders of the stacks tracking that branch poll it at once.
	Push(urls []string, branch string) error
	// Status is the cluster as this replica sees it.
	Status() model.ClusterStatus
}

// ErrNotOwner is returned (wrapped) by a cluster store for a write about
// a stack this replica does not hold: the write is refused, so that a
// replica that was cut off never overwrites what the new holder wrote.
var ErrNotOwner = errors.New("this replica does not hold the stack")

// allStacks holds every stack: the single-node mode.
type allStacks struct{}

func (allStacks) SetStacks([]string)                  {}
func (allStacks) Holds(string) bool                   { return true }
func (allStacks) Holder(string) string                { return "" }
func (allStacks) Release(string)                      {}
func (allStacks) Events() <-chan model.OwnershipEvent { return nil }
func (allStacks) RequestSync(string, string) error    { return nil }
func (allStacks) Push([]string, string) error         { return nil }
func (allStacks) Status() model.ClusterStatus         { return model.ClusterStatus{} }
