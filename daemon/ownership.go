package daemon

import (
	"errors"
	"time"
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
	Events() <-chan OwnershipEvent
	// RequestSync passes a sync request for a stack held by another
	// replica to its holder.
	RequestSync(name, token string) error
	// Push passes a push event to every other replica, so that the
	// holders of the stacks tracking that branch poll it at once.
	Push(urls []string, branch string) error
	// Status is the cluster as this replica sees it.
	Status() ClusterStatus
}

// Kinds of OwnershipEvent.
const (
	// OwnerGained: this replica now holds Stack. Since is when the key
	// was free: the previous holder released it or its lease expired.
	OwnerGained = "gained"
	// OwnerLost: this replica no longer holds Stack (its session ended, or
	// the key was taken away): it stops acting on it at once.
	OwnerLost = "lost"
	// OwnerHandover: another replica should hold Stack; release it once
	// no operation runs on it, within the handover grace.
	OwnerHandover = "handover"
	// OwnerRecord: the holder of Stack wrote Record; Record is nil when
	// it deleted the stack.
	OwnerRecord = "record"
	// OwnerSync: another replica received a sync request (Token) for
	// Stack, held here.
	OwnerSync = "sync"
	// OwnerPush: another replica received a push to Branch of URLs.
	OwnerPush = "push"
)

// OwnershipEvent is a change that concerns this replica.
type OwnershipEvent struct {
	Kind   string
	Stack  string
	Since  time.Time
	Record *StackRecord
	Token  string
	URLs   []string
	Branch string
}

// ErrNotOwner is returned (wrapped) by a cluster store for a write about
// a stack this replica does not hold: the write is refused, so that a
// replica that was cut off never overwrites what the new holder wrote.
var ErrNotOwner = errors.New("this replica does not hold the stack")

// ClusterStatus is the cluster as one replica sees it.
type ClusterStatus struct {
	// Node is this replica's name.
	Node string `json:"node"`
	// Session says whether this replica holds a session now; without
	// one it acts on no stack.
	Session bool `json:"session"`
	// Leader is the member that records config revisions.
	Leader  string          `json:"leader,omitempty"`
	Members []ClusterMember `json:"members"`
	// Moves counts the stacks this replica gained or gave up; SessionsLost
	// how many times its session ended.
	Moves        uint64 `json:"moves"`
	SessionsLost uint64 `json:"sessionsLost"`
	// LeaseTTL is the session lease's time to live.
	LeaseTTL Duration `json:"leaseTTL"`
}

// ClusterMember is one live replica.
type ClusterMember struct {
	Name string `json:"name"`
	// URL is the replica's API, as --advertise-url gives it.
	URL     string    `json:"url,omitempty"`
	Started time.Time `json:"started"`
	// Stacks is how many stacks it holds.
	Stacks int `json:"stacks"`
}

// Duration is a time.Duration that reads as text in JSON ("15s").
type Duration time.Duration

// MarshalText is d as time.Duration prints it.
func (d Duration) MarshalText() ([]byte, error) { return []byte(time.Duration(d).String()), nil }

// UnmarshalText reads what MarshalText writes.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	*d = Duration(v)
	return err
}

// allStacks holds every stack: the single-node mode.
type allStacks struct{}

func (allStacks) SetStacks([]string)               {}
func (allStacks) Holds(string) bool                { return true }
func (allStacks) Holder(string) string             { return "" }
func (allStacks) Release(string)                   {}
func (allStacks) Events() <-chan OwnershipEvent    { return nil }
func (allStacks) RequestSync(string, string) error { return nil }
func (allStacks) Push([]string, string) error      { return nil }
func (allStacks) Status() ClusterStatus            { return ClusterStatus{} }
