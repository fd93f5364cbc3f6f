// Package view makes what the web UI's templates render out of what the
// daemon says: the pages' models (a stack's row and page, the config's,
// the previews', the audit trail's), the stack list's summaries that the
// API also serves, the resource tree and its picture, and the small
// formatters the templates call. It knows no HTTP: package web's
// handlers gather the data, fill these in and render them.
package view

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/stackd/stackd/daemon/livelog"
	"github.com/stackd/stackd/daemon/model"
	"github.com/stackd/stackd/daemon/spec"
)

// Permission says whether the page's viewer may take an action: the UI
// shows one it may not take disabled, with the reason, never hides it.
type Permission struct {
	Allowed bool
	// Reason is the whole refusal, shown on hover; Hint is its short
	// form, shown beside the disabled button. SignIn, when set, is the
	// page where the viewer signs in to take it, which Hint links to.
	Reason, Hint, SignIn string
}

// Viewer is who looks at a page, for the header.
type Viewer struct {
	model.Principal
	// SignIn says sign-in is set up; Login is then its URL, returning to
	// the page.
	SignIn bool
	Login  string
	// Session says the viewer is signed in with a session cookie (through
	// the OpenID provider or with a token), which Sign out deletes.
	Session bool
}

// Sections of the UI, which the header's navigation marks.
const (
	SectionStacks   = "stacks"
	SectionConfig   = "config"
	SectionPreviews = "previews"
	SectionAudit    = "audit"
)

// Page is what every page's layout needs.
type Page struct {
	Title string
	// Section is the navigation entry the page belongs to, if any.
	Section string
	// Version is stackd's version, if known.
	Version string
	Stats   model.Stats
	// Config is the config's status; zero unless DaemonRead.
	Config model.ConfigStatus
	// Who is the viewer; DaemonRead says they may read what is not any
	// one stack's (the config, the cluster).
	Who        Viewer
	DaemonRead bool
	// Live pages refresh themselves, by script or else by reloading.
	Live bool
	// StackSets says the daemon has StackSets: the navigation links
	// their list.
	StackSets bool
}

// StackItem is a stack's row with what the viewer may do to the stack.
type StackItem struct {
	StackRow
	Sync Permission
}

// ListPage is the stack list at /: a page of the stacks that pass the
// filters (?health=, ?source=, ?q=), after the name ?after=.
type ListPage struct {
	Page
	Stacks []StackItem
	// All counts every stack the viewer may read, Matched those that
	// pass the filters, Hidden those the viewer may not read.
	All, Matched, Hidden int
	// Health, Source and Q are the filters; Sources the config sources
	// to choose from.
	Health, Source, Q string
	Sources           []string
	// Next is the URL of the next page, empty on the last; First that of
	// the first, empty on it.
	Next, First string
	// Cluster is the cluster as this replica sees it; nil for a single
	// node.
	Cluster *model.ClusterStatus
}

// StackRow summarizes a stack for the list and a stack page's header.
type StackRow struct {
	Name    string
	Removed bool
	// Orphaned says why a stack whose source left is kept.
	Orphaned string
	// Health is Healthy, Progressing, Degraded, or Unknown.
	Health, HealthMessage string
	// Condition is the PKO condition behind Health and its reason,
	// "Stalled/UpdateFailed", as stackd status shows it; empty for a Ready
	// or a running stack.
	Condition string
	// Running names the update in flight, if any.
	Running string
	// Last is the last finished update, if any.
	Last *model.LastUpdate
	// Tracking is what the stack follows, whole and split for display.
	Tracking, Repo, Ref string
	// Applied is the last commit an update succeeded with; AppliedRef
	// links it, and LatestFailed is the commit the last update failed
	// with, when that is another.
	Applied      string
	AppliedRef   CommitRef
	LatestFailed *CommitRef
	// Drift is the last drift check's outcome; nil before any.
	Drift *spec.DriftStatus
	// Holder is the replica acting on the stack (cluster mode).
	Holder string
	// Owner is "StackSet/NAME" for a stack a StackSet generates.
	Owner string
	// Retry is a failing stack's next attempt, while it has some left.
	Retry *model.Retry
}

// Summarize is v's row.
func Summarize(v model.StackView) StackRow {
	row := StackRow{Name: v.Name, Removed: v.Removed, Orphaned: v.Orphaned, Health: "Unknown", Last: v.Status.LastUpdate, Tracking: v.Tracking,
		Drift: v.Status.Drift, Holder: v.Holder, Owner: v.Owner, Retry: v.Status.Retry}
	if h := v.Status.Health; h != nil {
		row.Health, row.HealthMessage = h.Status, h.Message
	}
	if c := Explaining(&v.Status); c != nil && c.Reason != model.ReasonStackProcessing && ConditionWord(c) != row.Health {
		row.Condition = ConditionWord(c) // not for a running stack, nor AwaitingApproval twice
	}
	if cu := v.Status.CurrentUpdate; cu != nil {
		row.Running = cu.Name
	}
	if lu := v.Status.LastUpdate; lu != nil {
		row.Applied = lu.LastSuccessfulCommit
		row.AppliedRef = RefOfCommit(v.CommitURL, lu.LastSuccessfulCommit, v.AppliedCommit)
		if lu.State == model.UpdateFailed && lu.LastAttemptedCommit != "" && lu.LastAttemptedCommit != lu.LastSuccessfulCommit {
			latest := RefOfCommit(v.CommitURL, lu.LastAttemptedCommit, v.LatestCommit)
			row.LatestFailed = &latest
		}
	}
	row.Repo, row.Ref = splitTracking(v.Tracking)
	return row
}

// CommitRef is a commit as the UI links it: its hash, its page on the
// forge (empty when the repository is on none) and, when known, its
// subject, author and time.
type CommitRef struct {
	SHA, URL string
	Info     *model.Commit
}

// RefOfCommit is sha's CommitRef, with info when it describes sha; url
// is the stack's CommitURL.
func RefOfCommit(url, sha string, info *model.Commit) CommitRef {
	r := CommitRef{SHA: sha}
	if url != "" && isFullSHA(sha) {
		r.URL = strings.ReplaceAll(url, "{sha}", sha)
	}
	if info != nil && info.SHA == sha {
		r.Info = info
	}
	return r
}

// splitTracking splits "<repo>@<ref>" into a short repository name (no
// scheme, user or ".git") and the ref; "program <name>" is kept whole.
func splitTracking(t string) (repo, ref string) {
	i := strings.LastIndex(t, "@")
	if strings.HasPrefix(t, "program ") || i < 0 {
		return t, ""
	}
	repo, ref = t[:i], t[i+1:]
	_, rest, scheme := strings.Cut(repo, "://")
	if scheme {
		repo = rest
	}
	if j := strings.Index(repo, "@"); j >= 0 {
		repo = repo[j+1:]
		if !scheme { // git@host:path
			repo = strings.Replace(repo, ":", "/", 1)
		}
	}
	return strings.TrimSuffix(strings.TrimSuffix(repo, "/"), ".git"), ref
}

// StackPage is a stack's page at /stacks/{name}.
type StackPage struct {
	Page
	Stack   StackItem
	View    model.StackView
	Spec    string
	Outputs []Output
	// Updates are the history the page lists: the newest updates, or
	// those of the type History selects.
	Updates    []model.Update
	UpdatesErr string
	// History are the history's choices; HistoryType the type chosen,
	// empty for all.
	History     []HistoryFilter
	HistoryType string
	Log         *Log
	Resources   Resources
	Preview     *model.StackPreview
	// Approve is the viewer's permission to decide on a plan.
	Approve Permission
	// Override is the viewer's permission to override closed change
	// windows.
	Override Permission
}

// Output is one stack output, rendered for display.
type Output struct {
	Name, Value string
	Secret      bool
}

// Log is the tail of an update's log: on a stack's page, of the update
// in flight, else of the last that changed the stack.
type Log struct {
	ID, State string
	// Type is the update's type, when known.
	Type      string
	Text      string
	Truncated bool
	// Follow is the URL streaming the log while the update runs.
	Follow string
	// Raw is the URL of the whole log.
	Raw string
	// Newer is the stack's newest update when it is newer than this one
	// (a drift check, a preview), for the card to point at.
	Newer *model.Update
}

// HistoryFilter is one choice of the stack page's history: all updates
// (an empty Type) or those of one type, linked as a plain GET.
type HistoryFilter struct {
	Label, Href string
	Current     bool
}

// HistoryFilters are the stack page's history choices, all and then each
// update type, current the chosen type ("" for all).
func HistoryFilters(stack, current string) []HistoryFilter {
	base := StackPath(stack)
	out := []HistoryFilter{{Label: "all", Href: base + "#history", Current: current == ""}}
	for _, t := range model.UpdateTypes {
		out = append(out, HistoryFilter{Label: t, Href: base + "?history=" + t + "#history", Current: current == t})
	}
	return out
}

// UpdateType is how the history names u's type: "drift ×N" for a drift
// check that stands for N identical ones.
func UpdateType(u model.Update) string {
	if n := u.CheckCount(); n > 1 {
		return fmt.Sprintf("%s ×%d", u.Type, n)
	}
	return u.Type
}

// HealthBadge is what the "health" template shows: a health status
// (Healthy, Progressing, Degraded or Unknown) and its message.
type HealthBadge struct {
	Health, HealthMessage string
}

// badgeOf is h's badge; an empty status is Unknown.
func badgeOf(h model.Health) HealthBadge {
	if h.Status == "" {
		return HealthBadge{Health: "Unknown", HealthMessage: h.Message}
	}
	return HealthBadge{Health: h.Status, HealthMessage: h.Message}
}

// ConfigBadge is the config's overall health badge: Unknown while the
// daemon reports none.
func ConfigBadge(h *model.Health) HealthBadge {
	if h == nil {
		return badgeOf(model.Health{})
	}
	return badgeOf(*h)
}

// ConfigPage is the config's page at /config: its sources and its
// latest revisions.
type ConfigPage struct {
	Page
	// Reload is whether the viewer may reload (the guard's override).
	Reload       Permission
	Health       HealthBadge
	Sources      []SourceRow
	Revisions    []model.ConfigRevision
	RevisionsErr string
}

// SourceRow is a config source as the config page shows it.
type SourceRow struct {
	Source string
	// Git is set for a Git source; Ref is then the ref it follows, empty
	// for the repository's default branch.
	Git *spec.GitDir
	Ref string
	// Commit is the commit in force; Latest the one the ref points at,
	// set only when it differs from Commit.
	Commit, Latest      string
	LastPoll, AppliedAt time.Time
	Stacks              int
	Error               string
	Badge               HealthBadge
}

// SourceRowOf is src's row.
func SourceRowOf(src model.SourceStatus) SourceRow {
	row := SourceRow{Source: src.Source, Git: src.Git, Commit: src.Commit, LastPoll: src.LastPoll,
		AppliedAt: src.AppliedAt, Stacks: src.Stacks, Error: src.Error, Badge: badgeOf(src.Health)}
	if src.Git != nil {
		row.Ref = src.Git.Ref
	}
	if src.LatestCommit != src.Commit {
		row.Latest = src.LatestCommit
	}
	return row
}

// Tail is the last n bytes of b at most, starting at a line, and whether
// that left something out.
func Tail(b []byte, n int) ([]byte, bool) {
	if len(b) <= n {
		return b, false
	}
	b = b[len(b)-n:]
	if i := bytes.IndexByte(b, '\n'); i >= 0 {
		b = b[i+1:]
	}
	return b, true
}

// LiveTail is Tail of what l holds, without copying the rest.
func LiveTail(l *livelog.Log, n int) ([]byte, bool) {
	_, end, _, _ := l.Since(1 << 62)
	data, _, _, _ := l.Since(max(end-int64(n)-1, 0))
	return Tail(data, n)
}

// SpecYAML renders a (redacted) spec as YAML.
func SpecYAML(spec map[string]any) string {
	if spec == nil {
		return ""
	}
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	if err := enc.Encode(spec); err != nil {
		return "# cannot render the spec: " + err.Error()
	}
	return buf.String()
}

// Outputs renders stack outputs by name: strings as they are, other
// values as indented JSON. The daemon has already replaced secret values
// with the string "[secret]".
func Outputs(raw map[string]json.RawMessage) []Output {
	out := make([]Output, 0, len(raw))
	for name, v := range raw {
		o := Output{Name: name, Value: string(v)}
		var str string
		var buf bytes.Buffer
		if json.Unmarshal(v, &str) == nil {
			o.Value = str
		} else if json.Indent(&buf, v, "", "  ") == nil {
			o.Value = buf.String()
		}
		o.Secret = o.Value == "[secret]"
		out = append(out, o)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// SignInPage is the token sign-in form at /auth/signin.
type SignInPage struct {
	Page
	// Return is the path of this server to return to; Form the form's
	// anti-forgery value; Error why the last attempt failed.
	Return, Form, Error string
	// Provider is the URL of the sign-in through the OpenID provider,
	// when there is one.
	Provider string
}

// ErrorPage is the page of a failed request.
type ErrorPage struct {
	Page
	Status  int
	Message string
}

// AuditPage is the audit trail's page at /audit.
type AuditPage struct {
	Page
	// Kept says whether the daemon keeps a trail at all.
	Kept                bool
	Stack, Actor, Since string
	Entries             []model.AuditEntry
	// Next is the URL of the next page, empty on the last.
	Next string
}
