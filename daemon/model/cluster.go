package model

import "time"

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
