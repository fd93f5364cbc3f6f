package window

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stackd/stackd/daemon/spec"
)

// win writes one window as a changeWindows item: "deny|0 22 * * *|8h|UTC",
// optionally followed by more YAML fields ("stacks: [app]").
func win(def string, more ...string) string {
	f := strings.Split(def, "|")
	var b strings.Builder
	fmt.Fprintf(&b, "- kind: %s\n  schedule: %q\n  duration: %s\n  timeZone: %s\n", f[0], f[1], f[2], f[3])
	if len(more) == 0 {
		more = []string{`stacks: ["*"]`}
	}
	for _, m := range more {
		b.WriteString("  " + m + "\n")
	}
	return b.String()
}

// parse loads windows through the config loader, as the daemon gets them.
func parse(t *testing.T, items ...string) []*spec.ChangeWindow {
	t.Helper()
	if len(items) == 0 {
		return nil
	}
	cfg, _, err := spec.Parse("windows.yaml", []byte("changeWindows:\n"+strings.Join(items, "")))
	if err != nil {
		t.Fatal(err)
	}
	return cfg.ChangeWindows
}

func at(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

func TestCheck(t *testing.T) {
	app := Stack{Name: "app", Labels: map[string]string{"env": "prod"}}
	nightly := win("deny|0 22 * * *|8h|UTC")
	office := win("allow|0 9 * * 1-5|8h|UTC")
	cases := []struct {
		name    string
		windows []string
		stack   Stack
		change  string
		now     string
		open    bool
		next    string // when closed; "" for none within the horizon
	}{
		{"no windows", nil, app, spec.ChangeCommit, "2026-01-06T12:00:00Z", true, ""},
		{"deny before it starts", []string{nightly}, app, spec.ChangeCommit, "2026-01-06T21:59:59Z", true, ""},
		{"deny from its first minute", []string{nightly}, app, spec.ChangeCommit, "2026-01-06T22:00:00Z", false, "2026-01-07T06:00:00Z"},
		{"deny across midnight", []string{nightly}, app, spec.ChangeCommit, "2026-01-07T03:00:00Z", false, "2026-01-07T06:00:00Z"},
		{"deny ends exclusive", []string{nightly}, app, spec.ChangeCommit, "2026-01-07T06:00:00Z", true, ""},
		{"allow active", []string{office}, app, spec.ChangeCommit, "2026-01-06T10:00:00Z", true, ""},
		{"allow inactive after hours", []string{office}, app, spec.ChangeCommit, "2026-01-06T17:00:00Z", false, "2026-01-07T09:00:00Z"},
		{"allow inactive on the weekend", []string{office}, app, spec.ChangeCommit, "2026-01-10T10:00:00Z", false, "2026-01-12T09:00:00Z"},
		{"deny inside allow", []string{office, win("deny|0 12 * * *|1h|UTC")}, app, spec.ChangeCommit, "2026-01-06T12:30:00Z", false, "2026-01-06T13:00:00Z"},
		{"allow around a finished deny", []string{office, win("deny|0 12 * * *|1h|UTC")}, app, spec.ChangeCommit, "2026-01-06T16:59:00Z", true, ""},
		{"deny outlasting the allow", []string{office, win("deny|0 16 * * *|3h|UTC")}, app, spec.ChangeCommit, "2026-01-06T16:30:00Z", false, "2026-01-07T09:00:00Z"},
		{"deny outlasting friday's allow", []string{office, win("deny|0 16 * * *|3h|UTC")}, app, spec.ChangeCommit, "2026-01-09T16:30:00Z", false, "2026-01-12T09:00:00Z"},
		{"two allows, the later one", []string{office, win("allow|0 20 * * *|1h|UTC")}, app, spec.ChangeCommit, "2026-01-06T18:00:00Z", false, "2026-01-06T20:00:00Z"},
		{"back-to-back denies", []string{nightly, win("deny|0 6 * * *|2h|UTC")}, app, spec.ChangeCommit, "2026-01-06T23:00:00Z", false, "2026-01-07T08:00:00Z"},
		{"overlapping starts of one deny", []string{win("deny|0 * * * *|90m|UTC")}, app, spec.ChangeCommit, "2026-01-06T10:45:00Z", false, ""},
		{"a deny always active", []string{win("deny|* * * * *|1h|UTC")}, app, spec.ChangeCommit, "2026-01-06T10:00:00Z", false, ""},

		// Time zones: 09:00 in New York is 14:00 UTC in winter, 13:00 in summer.
		{"zone before its start", []string{win("deny|0 9 * * *|1h|America/New_York")}, app, spec.ChangeCommit, "2026-01-06T13:30:00Z", true, ""},
		{"zone in winter", []string{win("deny|0 9 * * *|1h|America/New_York")}, app, spec.ChangeCommit, "2026-01-06T14:30:00Z", false, "2026-01-06T15:00:00Z"},
		{"zone in summer", []string{win("deny|0 9 * * *|1h|America/New_York")}, app, spec.ChangeCommit, "2026-07-06T13:30:00Z", false, "2026-07-06T14:00:00Z"},
		{"zone's weekday, not UTC's", []string{win("allow|0 18 * * 5|4h|Asia/Tokyo")}, app, spec.ChangeCommit, "2026-01-09T10:00:00Z", true, ""},

		// Europe/Berlin moves from 02:00 CET to 03:00 CEST on 2026-03-29
		// and back from 03:00 CEST to 02:00 CET on 2026-10-25.
		{"DST: a start before the gap", []string{win("deny|30 2 * * *|1h|Europe/Berlin")}, app, spec.ChangeCommit, "2026-03-28T01:45:00Z", false, "2026-03-28T02:30:00Z"},
		{"DST: a start in the gap is skipped", []string{win("deny|30 2 * * *|1h|Europe/Berlin")}, app, spec.ChangeCommit, "2026-03-29T01:45:00Z", true, ""},
		{"DST: a duration is elapsed time", []string{win("allow|0 1 * * *|4h|Europe/Berlin")}, app, spec.ChangeCommit, "2026-03-29T03:30:00Z", true, ""},
		{"DST: and ends after it", []string{win("allow|0 1 * * *|4h|Europe/Berlin")}, app, spec.ChangeCommit, "2026-03-29T04:00:00Z", false, "2026-03-29T23:00:00Z"},
		{"DST: a start in the repeated hour, first time", []string{win("deny|30 2 * * *|30m|Europe/Berlin")}, app, spec.ChangeCommit, "2026-10-25T00:45:00Z", false, "2026-10-25T01:00:00Z"},
		{"DST: between the two", []string{win("deny|30 2 * * *|30m|Europe/Berlin")}, app, spec.ChangeCommit, "2026-10-25T01:10:00Z", true, ""},
		{"DST: a start in the repeated hour, second time", []string{win("deny|30 2 * * *|30m|Europe/Berlin")}, app, spec.ChangeCommit, "2026-10-25T01:45:00Z", false, "2026-10-25T02:00:00Z"},

		// Selectors and changes.
		{"glob selects", []string{win("deny|0 22 * * *|8h|UTC", `stacks: ["a*", "web"]`)}, app, spec.ChangeCommit, "2026-01-06T23:00:00Z", false, "2026-01-07T06:00:00Z"},
		{"glob does not select", []string{win("deny|0 22 * * *|8h|UTC", `stacks: ["prod-*"]`)}, app, spec.ChangeCommit, "2026-01-06T23:00:00Z", true, ""},
		{"labels select", []string{win("deny|0 22 * * *|8h|UTC", `labels: {env: prod}`)}, app, spec.ChangeCommit, "2026-01-06T23:00:00Z", false, "2026-01-07T06:00:00Z"},
		{"labels do not select", []string{win("deny|0 22 * * *|8h|UTC", `labels: {env: dev}`)}, app, spec.ChangeCommit, "2026-01-06T23:00:00Z", true, ""},
		{"glob and labels must both", []string{win("deny|0 22 * * *|8h|UTC", `stacks: [web]`, `labels: {env: prod}`)}, app, spec.ChangeCommit, "2026-01-06T23:00:00Z", true, ""},
		{"an unselected allow does not close", []string{win("allow|0 9 * * *|1h|UTC", `stacks: [web]`)}, app, spec.ChangeCommit, "2026-01-06T23:00:00Z", true, ""},
		{"changes: commits by default", []string{nightly}, app, spec.ChangeDestroy, "2026-01-06T23:00:00Z", false, "2026-01-07T06:00:00Z"},
		{"changes: destroys only, a commit", []string{win("deny|0 22 * * *|8h|UTC", `stacks: ["*"]`, `changes: [destroy]`)}, app, spec.ChangeCommit, "2026-01-06T23:00:00Z", true, ""},
		{"changes: destroys only, a destroy", []string{win("deny|0 22 * * *|8h|UTC", `stacks: ["*"]`, `changes: [destroy]`)}, app, spec.ChangeDestroy, "2026-01-06T23:00:00Z", false, "2026-01-07T06:00:00Z"},
		{"changes: drift allowed any time", []string{office, win("allow|* * * * *|1m|UTC", `stacks: ["*"]`, `changes: [drift]`)}, app, spec.ChangeDrift, "2026-01-10T10:00:00Z", true, ""},
		{"changes: the allow of another change does not apply", []string{office, win("allow|* * * * *|1m|UTC", `stacks: ["*"]`, `changes: [drift]`)}, app, spec.ChangeCommit, "2026-01-10T10:00:00Z", false, "2026-01-12T09:00:00Z"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v := Check(parse(t, c.windows...), c.stack, c.change, at(c.now))
			if v.Open != c.open {
				t.Fatalf("open = %v, want %v (closing: %v)", v.Open, c.open, v.Closing)
			}
			if c.open {
				if !v.NextOpen.IsZero() || len(v.Closing) > 0 {
					t.Fatalf("an open verdict with %v, %v", v.NextOpen, v.Closing)
				}
				return
			}
			if len(v.Closing) == 0 {
				t.Fatal("closed by no window")
			}
			var want time.Time
			if c.next != "" {
				want = at(c.next)
			}
			if !v.NextOpen.Equal(want) {
				t.Fatalf("next open %v, want %v", v.NextOpen.UTC(), want)
			}
			if !want.IsZero() && !Check(parse(t, c.windows...), c.stack, c.change, want).Open {
				t.Fatalf("not open at the next open time %v", want)
			}
		})
	}
}

// TestCheckClosingNamesTheWindows: a closed verdict names the deny
// windows active, or, with none, the allow windows.
func TestCheckClosingNamesTheWindows(t *testing.T) {
	ws := parse(t, win("allow|0 9 * * *|1h|UTC", `name: office`, `stacks: ["*"]`),
		win("deny|0 22 * * *|8h|UTC", `name: nightly`, `stacks: ["*"]`),
		win("deny|0 23 * * *|1h|UTC", `name: late`, `stacks: ["*"]`))
	v := Check(ws, Stack{Name: "app"}, spec.ChangeCommit, at("2026-01-06T23:30:00Z"))
	if len(v.Closing) != 2 || v.Closing[0].Name != "nightly" || v.Closing[1].Name != "late" {
		t.Fatalf("closing = %v", v.Closing)
	}
	if got := v.Closing[0].String(); got != `deny window "nightly"` {
		t.Fatalf("String = %q", got)
	}
	v = Check(ws, Stack{Name: "app"}, spec.ChangeCommit, at("2026-01-06T12:00:00Z"))
	if len(v.Closing) != 1 || v.Closing[0].Name != "office" {
		t.Fatalf("closing = %v", v.Closing)
	}
	if want := at("2026-01-07T09:00:00Z"); !v.NextOpen.Equal(want) {
		t.Fatalf("next open %v, want %v", v.NextOpen, want)
	}
}

// BenchmarkCheck prints what one decision costs with a realistic set
// of windows, closed, so that the next open time is searched for.
func BenchmarkCheck(b *testing.B) {
	cfg, _, err := spec.Parse("w.yaml", []byte("changeWindows:\n"+
		win("allow|0 9 * * 1-5|8h|Europe/Berlin")+win("deny|0 12 * * *|1h|Europe/Berlin")+
		win("deny|0 0 24 12 *|192h|Europe/Berlin")))
	if err != nil {
		b.Fatal(err)
	}
	now := at("2026-12-24T10:00:00Z")
	for b.Loop() {
		if v := Check(cfg.ChangeWindows, Stack{Name: "app"}, spec.ChangeCommit, now); v.Open {
			b.Fatal("open")
		}
	}
}

// TestWorkedExample checks what docs/change-control.md says of its
// example, on the example itself.
func TestWorkedExample(t *testing.T) {
	data, err := os.ReadFile("../../docs/change-control.md")
	if err != nil {
		t.Fatal(err)
	}
	_, after, _ := strings.Cut(string(data), "### A worked example of windows")
	_, block, _ := strings.Cut(after, "```yaml\n")
	block, _, _ = strings.Cut(block, "```")
	cfg, _, err := spec.Parse("example.yaml", []byte(block))
	if err != nil {
		t.Fatal(err)
	}
	s := cfg.Stack("prod-network")
	if s == nil || len(cfg.ChangeWindows) != 2 {
		t.Fatalf("the example's stacks and windows: %+v", cfg)
	}
	prod := Stack{Name: s.Name, Labels: s.Labels}
	berlin, _ := time.LoadLocation("Europe/Berlin")
	local := func(s string) time.Time {
		t, err := time.ParseInLocation("2006-01-02 15:04", s, berlin)
		if err != nil {
			panic(err)
		}
		return t
	}
	cases := []struct {
		change, now, next string // next "" when open
	}{
		{spec.ChangeCommit, "2026-11-24 19:00", "2026-11-25 09:00"}, // Tuesday evening
		{spec.ChangeCommit, "2026-11-27 15:00", ""},                 // Friday, before the freeze
		{spec.ChangeCommit, "2026-11-27 16:30", "2026-11-30 09:00"}, // Friday, in the freeze
		{spec.ChangeDrift, "2026-11-28 11:00", "2026-11-30 08:00"},  // Saturday
		{spec.ChangeDrift, "2026-11-25 23:00", ""},                  // a weeknight
	}
	for _, c := range cases {
		v := Check(cfg.ChangeWindows, prod, c.change, local(c.now))
		if c.next == "" {
			if !v.Open {
				t.Errorf("%s at %s: closed by %v", c.change, c.now, v.Closing)
			}
			continue
		}
		if v.Open || !v.NextOpen.Equal(local(c.next)) {
			t.Errorf("%s at %s: open %v, next open %v, want %s", c.change, c.now, v.Open, v.NextOpen.In(berlin), c.next)
		}
	}
}
