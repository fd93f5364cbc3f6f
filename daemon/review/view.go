package review

import "time"

// Results of a preview.
const (
	Queued    = "queued"
	Running   = "running"
	Succeeded = "succeeded"
	Failed    = "failed"
	Cancelled = "cancelled"
)

// Accepted is what the webhook answers for a pull-request event: the
// stacks whose previews it started, or why it starts none.
type Accepted struct {
	PullRequest string   `json:"pullRequest"`
	Stacks      []string `json:"stacks"`
	Ignored     string   `json:"ignored,omitempty"`
}

// PullRequest is an open pull request and the previews of its newest
// head commit, as the API, the UI and the CLI show it.
type PullRequest struct {
	Key        string    `json:"key"`
	Forge      Kind      `json:"forge"`
	Repo       string    `json:"repo"`
	Number     int       `json:"number"`
	Title      string    `json:"title,omitempty"`
	Author     string    `json:"author,omitempty"`
	WebURL     string    `json:"webURL,omitempty"`
	BaseBranch string    `json:"baseBranch"`
	HeadSHA    string    `json:"headSHA"`
	Fork       bool      `json:"fork,omitempty"`
	UpdatedAt  time.Time `json:"updatedAt"`
	// Previews are the stacks the head commit changes; Removed the
	// stacks a change of the manifests would remove.
	Previews []Preview `json:"previews"`
	Removed  []string  `json:"removed,omitempty"`
	// Error is why nothing could be previewed (the changed files could
	// not be listed, the manifests do not load).
	Error string `json:"error,omitempty"`
	// ReviewStacks are the pull request's review stacks; ReviewRefused
	// says, a line each, why a template's review stack was not deployed.
	ReviewStacks  []ReviewStack `json:"reviewStacks,omitempty"`
	ReviewRefused []string      `json:"reviewRefused,omitempty"`
	// Closed marks a pull request that closed while review stacks of it
	// are not destroyed yet: it is listed until they are.
	Closed bool `json:"closed,omitempty"`
}

// ReviewStack is a review stack as the API, the UI and the comment show
// it: its last operation, how it ended, and its outputs, scrubbed.
type ReviewStack struct {
	Name        string `json:"name"`
	Template    string `json:"template"`
	PulumiStack string `json:"pulumiStack"`
	// Op is its last operation (create, update, destroy) and Result
	// how it ended: Running, Succeeded or Failed.
	Op     Op     `json:"op"`
	Result string `json:"result"`
	// Commit is the commit it was last deployed at.
	Commit string `json:"commit,omitempty"`
	// Outputs are its stack outputs as JSON texts, secrets as "[secret]".
	Outputs map[string]string `json:"outputs,omitempty"`
	Error   string            `json:"error,omitempty"`
	// LastActivity is the time of the newest event of its pull request;
	// it is destroyed at ExpiresAt, TTL later, unless another comes.
	LastActivity time.Time     `json:"lastActivity,omitzero"`
	TTL          time.Duration `json:"ttl,omitempty"`
	ExpiresAt    time.Time     `json:"expiresAt,omitzero"`
}

// Preview is one stack's preview of a pull request.
type Preview struct {
	Stack string `json:"stack"`
	// Update is the ID of the preview's record in the stack's history
	// (its log is the update's log); empty until it starts.
	Update string `json:"update,omitempty"`
	// Result is Queued, Running, Succeeded, Failed or Cancelled.
	Result string `json:"result"`
	// Changes counts resources by operation (create, update, delete,
	// replace, same).
	Changes  map[string]int `json:"changes,omitempty"`
	Duration time.Duration  `json:"duration,omitempty"`
	// Error is the program's or the engine's error, scrubbed.
	Error string `json:"error,omitempty"`
	// New marks a stack that the pull request's manifests add.
	New bool `json:"new,omitempty"`
	// Unresolved are the field paths of references that the pull
	// request's manifests add or change and the config in force does
	// not grant the stack: the preview ran without reading them.
	Unresolved []string `json:"unresolved,omitempty"`
	// Approval says why the stack will wait for approval once the pull
	// request is merged; empty when its change applies by itself.
	Approval string `json:"approval,omitempty"`
	// Denied and Warnings are the policies' messages on the preview's
	// steps: a denial fails the pull request's status.
	Denied   []Violation `json:"denied,omitempty"`
	Warnings []Violation `json:"warnings,omitempty"`
	// diff is the preview's output, scrubbed, for the comment.
	Diff string `json:"-"`
}

// Violation is one message of one policy (model.Violation, as the
// comment shows it).
type Violation struct {
	Policy  string `json:"policy"`
	Message string `json:"message"`
}

// Observer hears about each finished preview, for metrics.
type Observer interface {
	PreviewDone(result string, took time.Duration)
}

// Record is what stackd keeps of an open pull request, so that it is
// shown again and its previews resume after a restart, or on another
// replica: its newest event, its view, the ID of its comment, and the
// head commit whose round of previews ended.
type Record struct {
	Event   Event       `json:"event"`
	View    PullRequest `json:"view"`
	Comment int64       `json:"comment,omitempty"`
	// Done is the Event.WorkKey of the work that ended: the round of a
	// head commit (reported, or with nothing to preview), a closing, a
	// sweep. A record whose Done is not its Event's WorkKey has work to
	// run again. The record of a closed pull request (Event.Action
	// Closed) is kept until its review stacks are all destroyed.
	Done string `json:"done,omitempty"`
}

// Store keeps the records of open pull requests: the BoltDB store on one
// node, etcd in a cluster.
type Store interface {
	// PutPullRequest writes rec under rec.View.Key.
	PutPullRequest(rec Record) error
	// DeletePullRequest deletes the record of key; a missing one is no
	// error.
	DeletePullRequest(key string) error
	// PullRequests reads every record.
	PullRequests() ([]Record, error)
}

// Work tells the replica that holds a pull request's lease (cluster
// mode) what to do with it: the work of Event (its WorkKey: a round, a
// closing, a sweep; Record is the pull request's record when the lease
// was taken, nil for none), forget it because its event and record are
// gone (Closed), or stop acting on it because the lease is lost (Lost:
// another replica takes it over).
type Work struct {
	Key    string
	Event  Event
	Record *Record
	Closed bool
	Lost   bool
}
