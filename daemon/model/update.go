package model

import (
	"errors"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Commit is what the UI shows of a commit: never its files.
type Commit struct {
	SHA string `json:"sha"`
	// Subject is the message's first line.
	Subject string    `json:"subject,omitempty"`
	Author  string    `json:"author,omitempty"`
	Time    time.Time `json:"time,omitzero"`
}

// StackPreview is the last "preview now" of a stack: what the next sync
// would do at the latest commit, as `pulumi preview --diff` said it. It
// is kept apart from the stack's status, history and resources, which a
// preview never changes.
type StackPreview struct {
	// Commit is the commit previewed (a Program's revision for a Program
	// stack), Time when the preview started, Duration how long it took.
	Commit   string        `json:"commit"`
	Time     time.Time     `json:"time"`
	Duration time.Duration `json:"duration"`
	// State is running, succeeded or failed (the Update states); Message
	// the error of a failed one.
	State   string         `json:"state"`
	Message string         `json:"message,omitempty"`
	Changes map[string]int `json:"changes,omitempty"`
	// Diff is the preview's output, scrubbed of every secret the daemon
	// knows, cut at previewnow.MaxDiff bytes.
	Diff string `json:"diff"`
}

// Update types. UpdateDrift is stackd's own: a refresh preview that never
// changes the state.
const (
	UpdateUp      = "up"
	UpdatePreview = "preview"
	UpdateRefresh = "refresh"
	UpdateDestroy = "destroy"
	UpdateDrift   = "drift"
)

// UpdateTypes are the update types, in the order the UI lists them.
var UpdateTypes = []string{UpdateUp, UpdatePreview, UpdateRefresh, UpdateDestroy, UpdateDrift}

// Update states. UpdateRunning is only ever seen on a record of an update
// in flight; at start, a record still running belongs to a process that
// died and is turned into UpdateAborted.
const (
	UpdateRunning   = "running"
	UpdateSucceeded = "succeeded"
	UpdateFailed    = "failed"
	UpdateAborted   = "aborted"
)

// Update is one entry of a stack's update history.
type Update struct {
	// ID is "<stack>-<seq>", unique across the store.
	ID    string `json:"id"`
	Stack string `json:"stack"`
	// Seq numbers a stack's updates from 1, in the order they started.
	Seq  uint64 `json:"seq"`
	Type string `json:"type"`
	// Reason is why the update ran, e.g. "New commit detected".
	Reason           string `json:"reason,omitempty"`
	Generation       int64  `json:"generation,omitempty"`
	ReconcileRequest string `json:"reconcileRequest,omitempty"`
	Commit           string `json:"commit,omitempty"`
	// CommitInfo is Commit's subject, author and time, when the checkout
	// could tell them.
	CommitInfo *Commit   `json:"commitInfo,omitempty"`
	StartTime  time.Time `json:"startTime"`
	EndTime    time.Time `json:"endTime,omitzero"`
	State      string    `json:"state"`
	Message    string    `json:"message,omitempty"`
	// Changes counts resources by operation (create, update, delete, same, …).
	Changes   map[string]int `json:"changes,omitempty"`
	Permalink string         `json:"permalink,omitempty"`
	// PullRequest is the number of the pull request a preview (type
	// UpdatePreview) previewed, at Commit; zero for other updates.
	PullRequest int `json:"pullRequest,omitempty"`
	// Node is the replica that ran the update (cluster mode).
	Node string `json:"node,omitempty"`
	// WindowOverride is the override of the change windows the update
	// ran under: who, why, when.
	WindowOverride *WindowOverride `json:"windowOverride,omitempty"`
	// ManualSync says that the update ran for a sync a person asked for,
	// which change windows with manualSync let through.
	ManualSync bool `json:"manualSync,omitempty"`
	// Checks is, for a drift check that absorbed the identical checks
	// before it (see Folds), how many checks the record stands for, itself
	// included; 0 or 1 means itself alone. Its ID, Seq, log and times are
	// those of the newest of them.
	Checks int `json:"checks,omitempty"`
	// FirstStartTime is, when Checks > 1, the StartTime of the oldest of
	// the checks the record stands for.
	FirstStartTime time.Time `json:"firstStartTime,omitzero"`
}

// CheckCount is how many identical drift checks u stands for: Checks,
// at least 1.
func (u Update) CheckCount() int { return max(u.Checks, 1) }

// Folds says whether next, being written, absorbs prev, the record of the
// same stack just before it: both are finished drift checks of no pull
// request with the same outcome (state, commit, generation, message and
// changes). A store that writes next then keeps Fold(prev, next) in its
// place and deletes prev and its log, so that unchanged checks take one
// record of the history, not one each.
func Folds(prev, next Update) bool {
	return prev.Type == UpdateDrift && next.Type == UpdateDrift &&
		prev.Stack == next.Stack && prev.Seq < next.Seq &&
		prev.PullRequest == 0 && next.PullRequest == 0 &&
		prev.State != UpdateRunning && next.State == prev.State &&
		prev.Commit == next.Commit && prev.Generation == next.Generation &&
		prev.Message == next.Message && maps.Equal(prev.Changes, next.Changes)
}

// Fold is next standing for prev's checks too (Folds(prev, next) must
// hold): its count is both counts, its FirstStartTime prev's first.
func Fold(prev, next Update) Update {
	next.Checks = prev.CheckCount() + next.CheckCount()
	next.FirstStartTime = prev.StartTime
	if !prev.FirstStartTime.IsZero() {
		next.FirstStartTime = prev.FirstStartTime
	}
	return next
}

// ErrNotFound is returned (wrapped) by a Store for a stack, update or
// metadata key that does not exist.
var ErrNotFound = errors.New("not found")

// UpdateID is the ID of a stack's update: "<stack>-<seq>".
func UpdateID(stack string, seq uint64) string {
	return fmt.Sprintf("%s-%d", stack, seq)
}

// ParseUpdateID splits an update ID into its stack (everything before the
// last '-') and seq (the decimal after it). A malformed ID names no
// update: the error wraps ErrNotFound.
func ParseUpdateID(id string) (string, uint64, error) {
	i := strings.LastIndexByte(id, '-')
	if i > 0 {
		seq, err := strconv.ParseUint(id[i+1:], 10, 64)
		if err == nil && seq > 0 && UpdateID(id[:i], seq) == id {
			return id[:i], seq, nil
		}
	}
	return "", 0, fmt.Errorf("malformed update id: %w", ErrNotFound)
}

// TruncateLog keeps the tail of log within limit bytes (fewer if the cut
// falls inside a UTF-8 character), after a line
// "[… N bytes truncated …]\n". Every Store keeps logs this way.
func TruncateLog(log []byte, limit int) []byte {
	if len(log) <= limit {
		return log
	}
	tail := log[len(log)-limit:]
	for i := 1; i < utf8.UTFMax && len(tail) > 0 && !utf8.RuneStart(tail[0]); i++ {
		tail = tail[1:]
	}
	head := fmt.Sprintf("[… %d bytes truncated …]\n", len(log)-len(tail))
	out := make([]byte, 0, len(head)+len(tail))
	return append(append(out, head...), tail...)
}

// ShortCommit is a commit's first 12 characters, as logs and messages
// show it; a shorter one whole.
func ShortCommit(c string) string { return c[:min(12, len(c))] }
