package review

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/stackd/stackd/daemon/spec"
)

// Marker is the hidden line that makes a comment stackd's comment of its
// pull request: the one edited on every push.
const Marker = "<!-- stackd:preview -->"

// Report is what one comment says of a pull request's head commit.
type Report struct {
	Commit   string
	Previews []Preview
	Removed  []string
	// Error is why nothing was previewed, when nothing was.
	Error string
	// LinkOf is the address of a preview's page in stackd's UI; nil or
	// "" for none.
	LinkOf func(p Preview) string
	// Waits are the stacks whose change would wait for change windows if
	// the pull request merged now.
	Waits []WindowWait
	// ReviewStacks and ReviewRefused are the pull request's review
	// stacks and why any was not deployed.
	ReviewStacks  []ReviewStack
	ReviewRefused []string
	// Destroying names the removed stacks whose resources the merge
	// destroys (destroyOnFinalize), each with what may hold the destroy
	// back ("" for nothing).
	Destroying map[string]string
}

// WindowWait says that a stack's change would wait for change windows,
// and until when.
type WindowWait struct {
	Stack string
	// Windows name the windows that hold it back.
	Windows []string
	// Until is when they open, in the first window's time zone; zero
	// when none opens within a year.
	Until time.Time
}

// Comment renders r as Markdown within limit bytes: a summary table, then
// per stack a collapsed section with its diff and its error. Diffs are
// cut to fit, longest first, each cut saying so and linking to the
// full log.
func Comment(r Report, limit int) string {
	head, parts := r.head(), make([]string, len(r.Previews))
	diffs := make([]string, len(r.Previews))
	for i, p := range r.Previews {
		diffs[i] = p.Diff
	}
	for {
		size := len(head)
		for i, p := range r.Previews {
			parts[i] = r.section(p, diffs[i])
			size += len(parts[i])
		}
		if size <= limit || !cutLongest(diffs, size-limit) {
			break
		}
	}
	out := head + strings.Join(parts, "")
	if len(out) > limit { // only the table is left: cut it as text
		out = truncate(out, limit-len(truncatedNote)) + truncatedNote
	}
	return out
}

const truncatedNote = "\n\n… (cut to the forge's comment size)\n"

// head is the marker, the title and the summary table.
func (r Report) head() string {
	var b strings.Builder
	b.WriteString(Marker + "\n### stackd preview")
	if r.Commit != "" {
		fmt.Fprintf(&b, " of `%.12s`", r.Commit)
	}
	b.WriteString("\n\n")
	if r.Error != "" {
		b.WriteString("Nothing was previewed:\n\n" + fence(r.Error) + "\n")
	}
	if len(r.Previews) > 0 {
		b.WriteString("| Stack | + create | ~ update | - delete | ± replace | Duration | Result |\n")
		b.WriteString("|---|---:|---:|---:|---:|---:|---|\n")
		for _, p := range r.Previews {
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s |\n", r.stackCell(p),
				count(p, "create"), count(p, "update"), count(p, "delete"), count(p, "replace"),
				duration(p.Duration), p.resultText())
		}
	}
	for _, p := range r.Previews {
		violations(&b, "Policies deny the change of `"+p.Stack+"`; it will not be applied", p.Denied)
		violations(&b, "Policy warnings for `"+p.Stack+"`", p.Warnings)
	}
	for _, p := range r.Previews {
		if p.Approval != "" {
			fmt.Fprintf(&b, "\nAfter merge, `%s` waits for approval: %s.\n", p.Stack, p.Approval)
		}
	}
	for _, name := range r.Removed {
		hold, destroys := r.Destroying[name]
		switch {
		case !destroys:
			fmt.Fprintf(&b, "\nMerging removes stack `%s` from the config; its resources stay (no `destroyOnFinalize`).\n", name)
		case hold == "":
			fmt.Fprintf(&b, "\nMerging removes stack `%s` from the config and **destroys its resources** (`destroyOnFinalize`).\n", name)
		default:
			fmt.Fprintf(&b, "\nMerging removes stack `%s` from the config and **destroys its resources** (`destroyOnFinalize`) %s.\n", name, hold)
		}
	}
	for _, w := range r.Waits {
		until := " (no window opens within a year)"
		if !w.Until.IsZero() {
			until = " until " + w.Until.Format(spec.WindowTimeLayout)
		}
		fmt.Fprintf(&b, "\nMerged now, `%s` waits for change windows%s: %s.\n", w.Stack, until, strings.Join(w.Windows, ", "))
	}
	r.reviewStacks(&b)
	return b.String()
}

// reviewStacks writes the review stacks' table, their outputs and the
// refused ones.
func (r Report) reviewStacks(b *strings.Builder) {
	if len(r.ReviewStacks) > 0 {
		b.WriteString("\n#### Review stacks\n\n| Review stack | Commit | Result | Outputs |\n|---|---|---|---|\n")
	}
	for _, rs := range r.ReviewStacks {
		var outs []string
		for _, k := range slices.Sorted(maps.Keys(rs.Outputs)) {
			outs = append(outs, "`"+k+"`: `"+strings.ReplaceAll(rs.Outputs[k], "`", "'")+"`")
		}
		result := reviewResult(rs)
		if rs.Error != "" {
			result += ": " + strings.ReplaceAll(FirstLine(rs.Error), "|", "\\|")
		}
		fmt.Fprintf(b, "| `%s` | `%.12s` | %s | %s |\n", rs.Name, rs.Commit, result, strings.ReplaceAll(strings.Join(outs, "<br>"), "|", "\\|"))
	}
	for _, line := range r.ReviewRefused {
		b.WriteString("\n" + line + "\n")
	}
}

// reviewResult says what became of a review stack's last operation.
func reviewResult(rs ReviewStack) string {
	switch {
	case rs.Result == Running && rs.Op == Destroy:
		return "⏳ destroying"
	case rs.Result == Running:
		return "⏳ deploying"
	case rs.Result == Failed:
		return "❌ " + string(rs.Op) + " failed"
	case rs.Op == Destroy:
		return "🗑️ destroyed"
	}
	return "✅ deployed"
}

// FirstLine is the first line of s, trimmed.
func FirstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return s
}

func (r Report) stackCell(p Preview) string {
	name := "`" + p.Stack + "`"
	if p.New {
		name += " (new)"
	}
	if link := r.link(p); link != "" {
		name = "[" + name + "](" + link + ")"
	}
	return name
}

func (r Report) link(p Preview) string {
	if r.LinkOf == nil {
		return ""
	}
	return r.LinkOf(p)
}

// violations writes title and a list of vs, if any.
func violations(b *strings.Builder, title string, vs []Violation) {
	if len(vs) == 0 {
		return
	}
	b.WriteString("\n**" + title + ":**\n\n")
	for _, v := range vs {
		msg := strings.Join(strings.Fields(v.Message), " ")
		fmt.Fprintf(b, "- `%s`: %s\n", strings.ReplaceAll(v.Policy, "`", "'"), msg)
	}
}

// resultText is p's result in the table; a denial shows as such.
func (p Preview) resultText() string {
	if len(p.Denied) > 0 && p.Result == Succeeded {
		return "🚫 denied by policy"
	}
	return resultText(p.Result)
}

// section is p's collapsed details: its diff, cut to diff, and its error.
func (r Report) section(p Preview, diff string) string {
	if p.Diff == "" && p.Error == "" && len(p.Unresolved) == 0 {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\n<details><summary>%s: %s</summary>\n\n", p.Stack, p.resultText())
	if len(p.Unresolved) > 0 {
		b.WriteString("**Not resolved in a preview** (the config in force does not grant them to this stack; a placeholder stands in): ")
		for i, path := range p.Unresolved {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString("`" + strings.ReplaceAll(path, "`", "'") + "`")
		}
		b.WriteString("\n\n")
	}
	if p.Error != "" {
		b.WriteString("**Error**\n\n" + fence(p.Error) + "\n")
	}
	if diff != "" {
		b.WriteString(fence(diff) + "\n")
	}
	if len(diff) < len(p.Diff) {
		b.WriteString("The diff is cut here")
		if link := r.link(p); link != "" {
			b.WriteString(": [full log](" + link + ")")
		}
		b.WriteString(".\n")
	}
	b.WriteString("</details>\n")
	return b.String()
}

// cutLongest shortens the longest of diffs by at least excess bytes (and
// a margin for the note it adds). It reports false when nothing is left
// to cut.
func cutLongest(diffs []string, excess int) bool {
	longest := -1
	for i, d := range diffs {
		if d != "" && (longest < 0 || len(d) > len(diffs[longest])) {
			longest = i
		}
	}
	if longest < 0 {
		return false
	}
	keep := len(diffs[longest]) - excess - 200
	if keep < 200 {
		keep = 0
	}
	diffs[longest] = truncate(diffs[longest], keep)
	if keep > 0 {
		diffs[longest] += "\n…"
	}
	return true
}

// truncate cuts s to at most n bytes on a UTF-8 boundary.
func truncate(s string, n int) string {
	if n <= 0 {
		return ""
	}
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// fence puts text in a code block whose fence is longer than any run of
// backticks in it, so that nothing in text ends the block early.
func fence(text string) string {
	run, longest := 0, 0
	for _, c := range text {
		if c == '`' {
			run++
			longest = max(longest, run)
		} else {
			run = 0
		}
	}
	f := strings.Repeat("`", max(3, longest+1))
	return f + "\n" + strings.TrimRight(text, "\n") + "\n" + f
}

func count(p Preview, op string) string {
	if p.Result == Queued || p.Result == Running {
		return ""
	}
	return fmt.Sprint(p.Changes[op])
}

func duration(d time.Duration) string {
	if d <= 0 {
		return ""
	}
	return d.Round(100 * time.Millisecond).String()
}

func resultText(result string) string {
	switch result {
	case Succeeded:
		return "✅ succeeded"
	case Failed:
		return "❌ failed"
	case Cancelled:
		return "cancelled"
	}
	return "⏳ " + result
}
