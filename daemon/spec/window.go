package spec

import (
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"
	"time"
)

// Kinds of change window, as Argo CD's sync windows: an active deny
// window closes the stacks it selects; where allow windows select a
// stack, it is closed whenever none of them is active.
const (
	WindowAllow = "allow"
	WindowDeny  = "deny"
)

// Changes a window may gate. Read-only operations (previews, drift
// checks, pull-request previews) are never gated.
const (
	// ChangeCommit is an up for a new commit, a spec change, a sync
	// request, a resync, or a retry of any of those.
	ChangeCommit = "commit"
	// ChangeDrift is an up that remediates drift (driftDetection.remediate).
	ChangeDrift = "drift"
	// ChangeDestroy is the destroy of a stack removed with destroyOnFinalize.
	ChangeDestroy = "destroy"
)

// WindowTimeLayout writes the times of windows for people, with the
// zone's abbreviation.
const WindowTimeLayout = "2006-01-02 15:04 MST"

// AllChanges is what a window gates when it names no changes.
var AllChanges = []string{ChangeCommit, ChangeDrift, ChangeDestroy}

// ChangeWindow is one entry of a compact document's changeWindows: a
// recurring period, from each time Schedule matches and for Duration,
// during which the changes it gates are allowed (kind allow) or held
// back (kind deny) for the stacks it selects.
type ChangeWindow struct {
	// Name is optional; messages name the window by it.
	Name string `yaml:"name"`
	// Kind is allow or deny.
	Kind string `yaml:"kind"`
	// Schedule is a 5-field cron expression in Argo CD's grammar (see
	// Cron), read in TimeZone: when each occurrence of the window starts.
	Schedule string `yaml:"schedule"`
	// Duration is how long each occurrence lasts.
	Duration Duration `yaml:"duration"`
	// TimeZone is an IANA time zone name ("Europe/Berlin"); UTC when
	// empty.
	TimeZone string `yaml:"timeZone"`
	// Stacks are globs of stack names (path.Match: "*", "?", "[a-z]").
	Stacks []string `yaml:"stacks"`
	// Labels must all be among a stack's metadata labels.
	Labels map[string]string `yaml:"labels"`
	// Changes are what the window gates: commit, drift, destroy (all
	// three when empty).
	Changes []string `yaml:"changes"`
	// ManualSync lets a sync that a person asks for (the API, the web
	// UI's Sync button, stackd sync) through the window while it holds
	// back what runs by itself, as Argo CD's manualSync does.
	ManualSync bool `yaml:"manualSync"`
	// SyncOverrun is Argo CD's field, accepted so that its windows load.
	// stackd never stops an update that runs when a window closes, which
	// is Argo CD's syncOverrun: true; false asks for what stackd does
	// not do, and is noted when loaded.
	SyncOverrun *bool `yaml:"syncOverrun"`
	// Description is for people, as Argo CD's: at most 255 characters.
	Description string `yaml:"description"`

	// Pos is where the window is written.
	Pos  Pos `yaml:"-"`
	cron *Cron
	loc  *time.Location
}

// Cron is the window's parsed schedule; nil until the window validated.
func (w *ChangeWindow) Cron() *Cron { return w.cron }

// Location is the window's time zone; nil until the window validated.
func (w *ChangeWindow) Location() *time.Location { return w.loc }

// String names the window for messages: `deny window "freeze"`, or
// where it is written when it has no name.
func (w *ChangeWindow) String() string {
	if w.Name != "" {
		return fmt.Sprintf("%s window %q", w.Kind, w.Name)
	}
	return fmt.Sprintf("%s window at %s", w.Kind, w.Pos)
}

// Selects says whether the window applies to a stack of that name and
// those labels: its name matches one of Stacks (when any is given) and
// it carries every label of Labels.
func (w *ChangeWindow) Selects(name string, labels map[string]string) bool {
	if len(w.Stacks) > 0 && !slices.ContainsFunc(w.Stacks, func(g string) bool {
		ok, _ := path.Match(g, name)
		return ok
	}) {
		return false
	}
	for k, v := range w.Labels {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// Gates says whether the window applies to change.
func (w *ChangeWindow) Gates(change string) bool {
	return len(w.Changes) == 0 || slices.Contains(w.Changes, change)
}

// cronProbe is a fixed moment to check that a schedule ever matches:
// Next searches five years, which holds every date of the calendar.
var cronProbe = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// addWindow validates one window of a compact document and adds it to
// the config; base is its path ("changeWindows[N]").
func (l *loader) addWindow(d *decoder, w ChangeWindow, base string) {
	errs := len(d.diags.Errors())
	at := func(field string) (Pos, string) {
		p := joinPath(base, field)
		n := nodeAt(d, p)
		return Pos{File: d.file, Line: n.Line, Col: n.Column}, p
	}
	fail := func(field, format string, args ...any) {
		pos, p := at(field)
		d.diags = append(d.diags, Diagnostic{Pos: pos, Path: p, Msg: fmt.Sprintf(format, args...)})
	}
	if w.Name != "" {
		if msg := nameProblem(w.Name, 253); msg != "" {
			fail("name", "%s", msg)
		}
	}
	switch w.Kind {
	case WindowAllow, WindowDeny:
	case "":
		fail("kind", "missing kind (allow or deny)")
	default:
		fail("kind", "unknown kind %q (allow or deny)", w.Kind)
	}
	if w.Schedule == "" {
		fail("schedule", "missing schedule (a 5-field cron expression: minute hour day-of-month month day-of-week)")
	} else if c, err := ParseCron(w.Schedule); err != nil {
		fail("schedule", "%v", err)
	} else if c.Next(cronProbe).IsZero() {
		fail("schedule", "never matches a date of the calendar")
	} else {
		w.cron = c
	}
	if w.Duration.Duration < time.Minute {
		fail("duration", "missing or shorter than 1m (write it like 30m or 8h)")
	}
	w.loc = time.UTC
	if w.TimeZone != "" {
		loc, err := time.LoadLocation(w.TimeZone)
		if err != nil || strings.HasPrefix(w.TimeZone, "/") || strings.EqualFold(w.TimeZone, "Local") {
			fail("timeZone", "unknown time zone %q (an IANA name such as Europe/Berlin or America/New_York)", w.TimeZone)
		}
		w.loc = loc
	}
	if len(w.Stacks) == 0 && len(w.Labels) == 0 {
		fail("", "a change window needs stacks or labels to select stacks (stacks: [\"*\"] selects every stack)")
	}
	for i, g := range w.Stacks {
		if _, err := path.Match(g, ""); err != nil || g == "" {
			fail(indexPath("stacks", i), "invalid glob %q", g)
		}
	}
	for i, c := range w.Changes {
		if !slices.Contains(AllChanges, c) {
			fail(indexPath("changes", i), "unknown change %q (commit, drift or destroy)", c)
		}
	}
	if len([]rune(w.Description)) > maxWindowDescription {
		fail("description", "longer than %d characters", maxWindowDescription)
	}
	if w.SyncOverrun != nil && !*w.SyncOverrun {
		pos, p := at("syncOverrun")
		d.diags = append(d.diags, Diagnostic{Pos: pos, Path: p, Note: true, Msg: "stackd never stops an update " +
			"that runs when a window closes (Argo CD's syncOverrun: true); it only holds back updates that have not started"})
	}
	if len(d.diags.Errors()) > errs {
		return
	}
	w.Pos, _ = at("")
	for _, o := range l.cfg.ChangeWindows {
		if o.sameAs(&w) {
			fail("", "the same window as the one at %s (kind, schedule, duration, time zone and selectors): Argo CD refuses it too", o.Pos)
			return
		}
	}
	l.cfg.ChangeWindows = append(l.cfg.ChangeWindows, &w)
}

// maxWindowDescription is Argo CD's limit of a window's description.
const maxWindowDescription = 255

// sameAs says whether w and o are the same window in all that decides
// when and to whom they apply: what Argo CD's duplicate check compares
// (it leaves out manualSync and the description), with stackd's
// selectors and changes for Argo CD's. The name is left out too.
func (w *ChangeWindow) sameAs(o *ChangeWindow) bool {
	return w.Kind == o.Kind && w.Schedule == o.Schedule && w.Duration == o.Duration &&
		w.loc.String() == o.loc.String() && slices.Equal(w.Stacks, o.Stacks) &&
		maps.Equal(w.Labels, o.Labels) && slices.Equal(w.Changes, o.Changes)
}
