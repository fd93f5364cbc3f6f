package view

import (
	"fmt"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/stackd/stackd/daemon/model"
)

// The formatters the templates call (package web's template functions).

// timeLayout is how the UI shows times, always in UTC.
const timeLayout = "2006-01-02 15:04:05 UTC"

// StackPath is the URL path of the stack's page.
func StackPath(name string) string { return "/stacks/" + url.PathEscape(name) }

// ShortSHA abbreviates a commit hash to 7 characters; anything else is
// kept.
func ShortSHA(s string) string {
	if isFullSHA(s) {
		return s[:7]
	}
	return s
}

// ShortCommit abbreviates a full commit hash to 12 characters, as the
// config page shows commits; anything else is kept.
func ShortCommit(s string) string {
	if isFullSHA(s) {
		return s[:12]
	}
	return s
}

// isFullSHA reports whether s is a whole commit hash (SHA-1 or SHA-256).
func isFullSHA(s string) bool {
	return len(s) >= 40 && strings.Trim(strings.ToLower(s), "0123456789abcdef") == ""
}

// FormatTime is t in UTC, or "" for the zero time.
func FormatTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(timeLayout)
}

// Age is how long ago t was, coarsely: "12s ago", "5m ago", "3h ago",
// "2d ago"; for a time to come (a retry), "in 12s".
func Age(t time.Time) string {
	d := time.Since(t)
	switch {
	case t.IsZero():
		return ""
	case d < -time.Second:
		return "in " + span(-d)
	case d < time.Second:
		return "just now"
	}
	return span(d) + " ago"
}

// span is d coarsely: 12s, 5m, 3h, 2d.
func span(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

// Duration is how long an update took (or has run), rounded to seconds.
func Duration(u model.Update) string {
	end := u.EndTime
	if end.IsZero() {
		end = time.Now()
	}
	if u.StartTime.IsZero() || end.Before(u.StartTime) {
		return ""
	}
	return end.Sub(u.StartTime).Round(time.Second).String()
}

// ChangeCounts lists resource counts by operation ("1 update, 3 same"),
// "same" last.
func ChangeCounts(m map[string]int) string {
	ops := make([]string, 0, len(m))
	for op := range m {
		if op != "same" {
			ops = append(ops, op)
		}
	}
	sort.Strings(ops)
	if _, ok := m["same"]; ok {
		ops = append(ops, "same")
	}
	parts := make([]string, len(ops))
	for i, op := range ops {
		parts[i] = fmt.Sprintf("%d %s", m[op], op)
	}
	return strings.Join(parts, ", ")
}

// Clip cuts s to at most n bytes, dropping a rune cut in two.
func Clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "") + "…"
}

// PreviewPath is the URL path of the page of the preview whose update
// is id.
func PreviewPath(id string) string { return "/previews/" + url.PathEscape(id) }

// Counts is a preview's resource counts as "+create ~update -delete
// ±replace"; empty when there are none yet.
func Counts(m map[string]int) string {
	if m == nil {
		return ""
	}
	return fmt.Sprintf("+%d ~%d -%d ±%d", m["create"], m["update"], m["delete"], m["replace"])
}

// Took is how long a preview took, rounded to seconds; empty for none.
func Took(d time.Duration) string {
	switch {
	case d <= 0:
		return ""
	case d < time.Second:
		return "<1s"
	}
	return d.Round(time.Second).String()
}
