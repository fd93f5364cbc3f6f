package window

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stackd/stackd/daemon/spec"
)

// Argo CD's own tests of its sync windows, ported to change windows:
// pkg/apis/application/v1alpha1/types_test.go of Argo CD v3.6 (v2.13's
// are a subset), each case named by its Argo CD test and subtest. Argo
// CD's tests run at hours of the day the test runs on; these run at the
// same hours of a winter and a summer day. An Argo CD window selects by
// applications, namespaces or clusters; here the cases that select by
// application select by stacks, and the others (which do not select in
// the test) select every stack.
//
// Ported: 91 cases, which all agree (each on both days where it has a
// time).
//   - TestSyncWindows_Active: 14 (all)
//   - TestSyncWindows_InactiveAllows: 16 (all)
//   - TestSyncWindow_Active: 13 (all)
//   - TestSyncWindows_CanSync: 27 (all)
//   - TestSyncWindows_Matches and _Matches_AND_Operator: 3 of 12 each
//   - TestAppProjectSpec_AddWindow: 6 of 8; TestSyncWindow_Validate: 4
//   - TestAppProject_ValidateSyncWindowList: 3 of 4
//   - TestSyncWindows_SyncOverrun: 1 of 22 (a sync not yet started)
//   - TestAppProjectSpecWindowWithDescription: 1
//
// A case whose window or duration Argo CD refuses when a sync is
// decided (a 7 as day of the week, "3a") is refused when stackd loads
// the config: both refuse it, stackd earlier and with file:line:column.
//
// Not mapped, and why:
//   - TestSyncWindows_Matches and _Matches_AND_Operator, the 9 cases each
//     that select by namespace or cluster: a stack has neither (labels
//     take their place), and stackd always ANDs stacks and labels.
//   - TestAppProjectSpec_AddWindow WorkingNamespace and
//     WorkeringDescription: a window that selects by cluster only.
//   - TestAppProject_ValidateSyncWindowList HasNilSyncWindow: a nil window
//     in a Go list; YAML has no such item.
//   - TestSyncWindows_SyncOverrun, the other 21 cases (a sync already
//     running, or the helpers denyAllowsOverrun and
//     inactiveAllowsAllowOverrun), and controller/sync_test.go
//     TestSyncWindowDeniesSync (2 cases): Argo CD holds a running sync
//     between its steps when a window closes; stackd never stops or holds
//     a running Pulumi update (the engine cannot stop safely half way),
//     which is syncOverrun: true for every window. The windows only
//     decide whether an update starts.
//   - TestSyncWindows_HasWindows (2), _hasDeny (3), _hasAllow (3),
//     TestSyncWindow_Update (7), TestAppProjectSpec_DeleteWindow (2),
//     TestSyncWindow_Hash (6): helpers of Argo CD's Go API and CLI, not
//     behaviour a window's user sees; hasDeny's and hasAllow's effect is
//     in the CanSync cases.
//
// Where Argo CD and stackd differ on purpose (see
// TestArgoCDDifferences): at the exact instant a window starts Argo CD
// finds it not yet active, stackd active; on a day the clocks go
// forward, Argo CD reads schedules with the zone's offset of the moment
// it decides and counts durations on the wall clock, stackd reads each
// start on that day's wall clock, skips a start that does not exist that
// day and counts durations in elapsed time.

// argoDays are the days at whose hours Argo CD's cases run: a winter and
// a summer Wednesday (New York at UTC-5 and UTC-4).
var argoDays = []time.Time{
	time.Date(2026, 1, 7, 0, 0, 0, 0, time.UTC),
	time.Date(2026, 7, 8, 0, 0, 0, 0, time.UTC),
}

// argoWindow writes an Argo CD window as a change window selecting
// every stack: kind, schedule, duration and time zone ("" for UTC).
func argoWindow(kind, schedule, duration, zone string, more ...string) string {
	if zone == "" {
		zone = "UTC"
	}
	return win(strings.Join([]string{kind, schedule, duration, zone}, "|"), more...)
}

// utcM4 is the fixed zone of Argo CD's "-NonUTC" cases.
var utcM4 = time.FixedZone("UTC-4", -4*60*60)

// TestArgoCDActiveWindows ports TestSyncWindows_Active,
// TestSyncWindows_InactiveAllows and TestSyncWindow_Active: which windows
// are active (or, for inactiveAllows, which allow windows are not) at an
// hour of the day, read in zone.
func TestArgoCDActiveWindows(t *testing.T) {
	allow := func(s, d, z string) string { return argoWindow("allow", s, d, z) }
	deny := func(s, d, z string) string { return argoWindow("deny", s, d, z) }
	cases := []struct {
		argo           string
		windows        []string
		hour           int
		zone           *time.Location
		inactiveAllows bool
		want           []int
	}{
		{"TestSyncWindows_Active/MatchFirst", []string{allow("* 10 * * *", "2h", ""), allow("* 14 * * *", "2h", "")}, 11, time.UTC, false, []int{0}},
		{"TestSyncWindows_Active/MatchSecond", []string{allow("* 10 * * *", "2h", ""), allow("* 14 * * *", "2h", "")}, 15, time.UTC, false, []int{1}},
		{"TestSyncWindows_Active/MatchBoth", []string{allow("* 10 * * *", "3h", ""), allow("* 11 * * *", "3h", "")}, 12, time.UTC, false, []int{0, 1}},
		{"TestSyncWindows_Active/MatchNone", []string{allow("* 10 * * *", "2h", ""), allow("* 14 * * *", "2h", "")}, 17, time.UTC, false, nil},
		{"TestSyncWindows_Active/MatchFirst-NonUTC", []string{allow("* 10 * * *", "2h", ""), allow("* 14 * * *", "2h", "")}, 11 - 4, utcM4, false, []int{0}},
		{"TestSyncWindows_Active/MatchSecond-NonUTC", []string{allow("* 10 * * *", "2h", ""), allow("* 14 * * *", "2h", "")}, 15 - 4, utcM4, false, []int{1}},
		{"TestSyncWindows_Active/MatchNone-NonUTC", []string{allow("* 10 * * *", "2h", ""), allow("* 14 * * *", "2h", "")}, 17 - 4, utcM4, false, nil},
		{"TestSyncWindows_Active/MatchFirst-TimeZoneSpecified", []string{allow("* 10 * * *", "2h", "America/New_York"), allow("* 14 * * *", "2h", "America/New_York")}, 16, time.UTC, false, []int{0}},
		{"TestSyncWindows_Active/MatchSecond-TimeZoneSpecified", []string{allow("* 10 * * *", "2h", "America/New_York"), allow("* 14 * * *", "2h", "America/New_York")}, 20, time.UTC, false, []int{1}},
		{"TestSyncWindows_Active/MatchNone-TimeZoneSpecified", []string{allow("* 10 * * *", "2h", "America/New_York"), allow("* 14 * * *", "2h", "America/New_York")}, 22, time.UTC, false, nil},
		{"TestSyncWindows_Active/MatchFirst-PositiveTimeZoneSpecified", []string{allow("* 8 * * *", "2h", "Asia/Dhaka"), allow("* 12 * * *", "2h", "Asia/Dhaka")}, 3, time.UTC, false, []int{0}},
		{"TestSyncWindows_Active/WithTestProject", []string{allow("* * * * *", "1h", "")}, 12, time.UTC, false, []int{0}},

		{"TestSyncWindows_InactiveAllows/MatchFirst", []string{allow("* 10 * * *", "2h", ""), allow("* 5 * * *", "2h", "")}, 6, time.UTC, true, []int{0}},
		{"TestSyncWindows_InactiveAllows/MatchSecond", []string{allow("* 10 * * *", "2h", ""), allow("* 14 * * *", "2h", "")}, 11, time.UTC, true, []int{1}},
		{"TestSyncWindows_InactiveAllows/MatchBoth", []string{allow("* 10 * * *", "2h", ""), allow("* 14 * * *", "2h", "")}, 17, time.UTC, true, []int{0, 1}},
		{"TestSyncWindows_InactiveAllows/MatchNone", []string{allow("* 10 * * *", "4h", ""), allow("* 11 * * *", "4h", "")}, 12, time.UTC, true, nil},
		{"TestSyncWindows_InactiveAllows/MatchFirst-NonUTC", []string{allow("* 10 * * *", "2h", ""), allow("* 5 * * *", "2h", "")}, 6 - 4, utcM4, true, []int{0}},
		{"TestSyncWindows_InactiveAllows/MatchSecond-NonUTC", []string{allow("* 10 * * *", "2h", ""), allow("* 14 * * *", "2h", "")}, 11 - 4, utcM4, true, []int{1}},
		{"TestSyncWindows_InactiveAllows/MatchBoth-NonUTC", []string{allow("* 10 * * *", "2h", ""), allow("* 14 * * *", "2h", "")}, 17 - 4, utcM4, true, []int{0, 1}},
		{"TestSyncWindows_InactiveAllows/MatchNone-NonUTC", []string{allow("* 10 * * *", "4h", ""), allow("* 11 * * *", "4h", "")}, 12 - 4, utcM4, true, nil},
		{"TestSyncWindows_InactiveAllows/MatchFirst-TimeZoneSpecified", []string{allow("* 10 * * *", "2h", "America/New_York"), allow("* 5 * * *", "2h", "America/New_York")}, 11, time.UTC, true, []int{0}},
		{"TestSyncWindows_InactiveAllows/MatchSecond-TimeZoneSpecified", []string{allow("* 10 * * *", "2h", "America/New_York"), allow("* 14 * * *", "2h", "America/New_York")}, 16, time.UTC, true, []int{1}},
		{"TestSyncWindows_InactiveAllows/MatchBoth-TimeZoneSpecified", []string{allow("* 10 * * *", "2h", "America/New_York"), allow("* 14 * * *", "2h", "America/New_York")}, 6, time.UTC, true, []int{0, 1}},
		{"TestSyncWindows_InactiveAllows/MatchNone-TimeZoneSpecified", []string{allow("* 10 * * *", "4h", ""), allow("* 11 * * *", "4h", "")}, 12, time.UTC, true, nil},
		{"TestSyncWindows_InactiveAllows/MatchFirst-PositiveTimeZoneSpecified", []string{allow("* 8 * * *", "2h", "Asia/Dhaka"), allow("* 12 * * *", "2h", "Asia/Dhaka")}, 7, time.UTC, true, []int{0}},
		{"TestSyncWindows_InactiveAllows/WithTestProject", []string{allow("0 0 1 1 1", "1h", "")}, 12, time.UTC, true, []int{0}},

		{"TestSyncWindow_Active/ActiveWindow", []string{allow("* * * * *", "1h", "")}, 9, time.UTC, false, []int{0}},
		{"TestSyncWindow_Active/Allow-active", []string{allow("* 10 * * *", "2h", "")}, 11, time.UTC, false, []int{0}},
		{"TestSyncWindow_Active/Allow-inactive", []string{allow("* 10 * * *", "2h", "")}, 13, time.UTC, false, nil},
		{"TestSyncWindow_Active/Deny-active", []string{deny("* 10 * * *", "2h", "")}, 11, time.UTC, false, []int{0}},
		{"TestSyncWindow_Active/Deny-inactive", []string{deny("* 10 * * *", "2h", "")}, 13, time.UTC, false, nil},
		{"TestSyncWindow_Active/Allow-active-NonUTC", []string{allow("* 10 * * *", "2h", "")}, 11 - 4, utcM4, false, []int{0}},
		{"TestSyncWindow_Active/Allow-inactive-NonUTC", []string{allow("* 10 * * *", "2h", "")}, 13 - 4, utcM4, false, nil},
		{"TestSyncWindow_Active/Deny-active-NonUTC", []string{deny("* 10 * * *", "2h", "")}, 11 - 4, utcM4, false, []int{0}},
		{"TestSyncWindow_Active/Deny-inactive-NonUTC", []string{deny("* 10 * * *", "2h", "")}, 13 - 4, utcM4, false, nil},
	}
	for _, c := range cases {
		for _, day := range argoDays {
			now := time.Date(day.Year(), day.Month(), day.Day(), c.hour, 0, 0, 0, c.zone)
			t.Run(c.argo+"/"+day.Format("Jan"), func(t *testing.T) {
				var got []int
				for i, w := range parse(t, c.windows...) {
					if Active(w, now) != c.inactiveAllows && (!c.inactiveAllows || w.Kind == spec.WindowAllow) {
						got = append(got, i)
					}
				}
				if fmt.Sprint(got) != fmt.Sprint(c.want) {
					t.Fatalf("at %v: %v, want %v", now, got, c.want)
				}
			})
		}
	}
}

// TestArgoCDCanSync ports TestSyncWindows_CanSync and the case of
// TestSyncWindows_SyncOverrun of a sync not yet started: whether a sync,
// manual or automatic, may run. An active window starts every minute
// for an hour; an inactive one starts ten hours from now, as in Argo CD's
// builder. Argo CD's test adds windows alike but for manualSync, which
// its config validation (and stackd's) refuses as duplicates: here they
// differ by a minute of duration, which changes nothing at noon.
func TestArgoCDCanSync(t *testing.T) {
	window := func(kind string, active, manual bool, n int, more ...string) string {
		schedule := "0 22 * * *" // noon + 10h
		if active {
			schedule = "* * * * *"
		}
		return argoWindow(kind, schedule, fmt.Sprintf("%dm", 60+n), "", append([]string{`stacks: ["*"]`, fmt.Sprintf("manualSync: %v", manual)}, more...)...)
	}
	activeAllow := func(m bool) string { return window("allow", true, m, 0) }
	inactiveAllow := func(m bool, n int) string { return window("allow", false, m, n) }
	activeDeny := func(m bool, n int) string { return window("deny", true, m, n) }
	inactiveDeny := func(m bool) string { return window("deny", false, m, 0) }
	cases := []struct {
		argo    string
		windows []string
		manual  bool
		want    bool
	}{
		{"will allow manual sync if inactive-deny-window set with manual true", []string{inactiveDeny(true)}, true, true},
		{"will allow manual sync if inactive-deny-window set with manual false", []string{inactiveDeny(false)}, true, true},
		{"will deny manual sync if one inactive-allow-windows set with manual false", []string{inactiveAllow(true, 0), inactiveAllow(false, 1)}, true, false},
		{"will allow manual sync if on active-allow-window set with manual true", []string{activeAllow(true)}, true, true},
		{"will allow manual sync if on active-allow-window set with manual false", []string{activeAllow(false)}, true, true},
		{"will allow auto sync if on active-allow-window", []string{activeAllow(false)}, false, true},
		{"will allow manual sync active-allow and inactive-deny", []string{activeAllow(false), inactiveDeny(false)}, true, true},
		{"will allow auto sync active-allow and inactive-deny", []string{activeAllow(false), inactiveDeny(false)}, false, true},
		{"will deny manual sync inactive-allow", []string{inactiveAllow(false, 0)}, true, false},
		{"will deny auto sync inactive-allow", []string{inactiveAllow(false, 0)}, false, false},
		{"will allow manual sync inactive-allow with ManualSync enabled", []string{inactiveAllow(true, 0)}, true, true},
		{"will deny auto sync inactive-allow with ManualSync enabled", []string{inactiveAllow(true, 0)}, false, false},
		{"will deny manual sync with inactive-allow and inactive-deny", []string{inactiveAllow(false, 0), inactiveDeny(false)}, true, false},
		{"will deny auto sync with inactive-allow and inactive-deny", []string{inactiveAllow(false, 0), inactiveDeny(false)}, false, false},
		{"will allow auto sync with active-allow and inactive-allow", []string{activeAllow(false), inactiveAllow(false, 0)}, false, true},
		{"will deny manual sync with active-deny", []string{activeDeny(false, 0)}, true, false},
		{"will deny auto sync with active-deny", []string{activeDeny(false, 0)}, false, false},
		{"will allow manual sync with active-deny with ManualSync enabled", []string{activeDeny(true, 0)}, true, true},
		{"will deny auto sync with active-deny with ManualSync enabled", []string{activeDeny(true, 0)}, false, false},
		{"will deny manual sync with many active-deny having one with ManualSync disabled", []string{activeDeny(true, 0), activeDeny(true, 1), activeDeny(true, 2), activeDeny(false, 3)}, true, false},
		{"will deny auto sync with many active-deny having one with ManualSync disabled", []string{activeDeny(true, 0), activeDeny(true, 1), activeDeny(true, 2), activeDeny(false, 3)}, false, false},
		{"will deny manual sync with active-deny and active-allow windows with ManualSync disabled", []string{activeAllow(false), activeDeny(false, 0)}, true, false},
		{"will allow manual sync with active-deny and active-allow windows with ManualSync enabled", []string{activeAllow(false), activeDeny(true, 0)}, true, true},
		{"will deny auto sync with active-deny and active-allow windows with ManualSync enabled", []string{activeAllow(false), activeDeny(true, 0)}, false, false},
		{"TestSyncWindows_SyncOverrun/DenyWindowWithOverrunBlocksNewSync", []string{window("deny", true, false, 0, "syncOverrun: true")}, false, false},
	}
	for _, c := range cases {
		for _, day := range argoDays {
			now := day.Add(12 * time.Hour)
			t.Run(c.argo+"/"+day.Format("Jan"), func(t *testing.T) {
				v := Check(parse(t, c.windows...), Stack{Name: "app1"}, spec.ChangeCommit, now)
				if got := v.Lets(c.manual); got != c.want {
					t.Fatalf("manual %v: lets %v, want %v (verdict %+v)", c.manual, got, c.want, v)
				}
			})
		}
	}
}

// TestArgoCDWindowsRefused ports the cases where Argo CD accepts or
// refuses a window (or a list of them), and those where it refuses one
// when it decides a sync: stackd refuses the same windows when it loads
// them.
func TestArgoCDWindowsRefused(t *testing.T) {
	item := func(kind, schedule, duration string, more ...string) string {
		var b strings.Builder
		b.WriteString("- ")
		for i, f := range []string{"kind: " + kind, fmt.Sprintf("schedule: %q", schedule), "duration: " + duration} {
			if strings.HasSuffix(f, ": ") || strings.HasSuffix(f, `: ""`) {
				continue
			}
			if i > 0 && !strings.HasSuffix(b.String(), "- ") {
				b.WriteString("  ")
			}
			b.WriteString(f + "\n")
		}
		for _, m := range more {
			b.WriteString("  " + m + "\n")
		}
		return b.String()
	}
	apps := `stacks: ["app1"]`
	invalid7 := func(kind string, manual bool) string {
		return item(kind, "* 10 * * 7", "1h", apps, fmt.Sprintf("manualSync: %v", manual))
	}
	cases := []struct {
		argo  string
		items []string
		ok    bool
	}{
		{"TestAppProjectSpec_AddWindow/MissingKind", []string{item("", "* * * * *", "11", apps)}, false},
		{"TestAppProjectSpec_AddWindow/MissingSchedule", []string{item("allow", "", "", apps)}, false},
		{"TestAppProjectSpec_AddWindow/MissingDuration", []string{item("allow", "* * * * *", "", apps)}, false},
		{"TestAppProjectSpec_AddWindow/BadSchedule", []string{item("allow", "* * *", "1h", apps)}, false},
		{"TestAppProjectSpec_AddWindow/BadDuration", []string{item("deny", "* * * * *", "33mm", apps)}, false},
		{"TestAppProjectSpec_AddWindow/WorkingApplication", []string{item("allow", "1 * * * *", "1h", apps)}, true},
		{"TestAppProjectSpecWindowWithDescription", []string{item("allow", "* * * * *", "1h", apps, "description: Ticket AAAAA")}, true},
		{"TestSyncWindow_Validate/Validates", []string{item("allow", "* * * * *", "1h", apps)}, true},
		{"TestSyncWindow_Validate/IncorrectKind", []string{item("wrong", "* * * * *", "1h", apps)}, false},
		{"TestSyncWindow_Validate/IncorrectSchedule", []string{item("allow", "* * *", "1h", apps)}, false},
		{"TestSyncWindow_Validate/IncorrectDuration", []string{item("allow", "* * * * *", "1000days", apps)}, false},
		{"TestAppProject_ValidateSyncWindowList/WorkingSyncWindow", []string{item("allow", "* * * * *", "1h", apps)}, true},
		{"TestAppProject_ValidateSyncWindowList/HasDuplicateSyncWindow", []string{item("allow", "* * * * *", "1h", apps), item("allow", "* * * * *", "1h", apps)}, false},
		{"TestAppProject_ValidateSyncWindowList/HasRequiredFields", []string{item("allow", "* * * * *", "1h")}, false},
		{"TestSyncWindows_Active/MatchNone-InvalidSchedule", []string{item("allow", "* 10 * * 7", "3h", apps), item("allow", "* 11 * * 7", "3h", apps)}, false},
		{"TestSyncWindows_Active/MatchNone-InvalidDuration", []string{item("allow", "* 10 * * *", "3a", apps), item("allow", "* 11 * * *", "3a", apps)}, false},
		{"TestSyncWindows_InactiveAllows/MatchNone-InvalidSchedule", []string{item("allow", "* 10 * * 7", "2h", apps)}, false},
		{"TestSyncWindows_InactiveAllows/MatchNone-InvalidDuration", []string{item("allow", "* 10 * * *", "2a", apps)}, false},
		{"TestSyncWindow_Active/Allow-inactive-InvalidSchedule", []string{item("allow", "* 10 * * 7", "2h", apps)}, false},
		{"TestSyncWindow_Active/Deny-inactive-InvalidSchedule", []string{item("deny", "* 10 * * 7", "2h", apps)}, false},
		{"TestSyncWindow_Active/Allow-inactive-InvalidDuration", []string{item("allow", "* 10 * * *", "2a", apps)}, false},
		{"TestSyncWindow_Active/Deny-inactive-InvalidDuration", []string{item("deny", "* 10 * * *", "2a", apps)}, false},
		{"TestSyncWindows_CanSync/will deny and return error with invalid windows", []string{invalid7("allow", false), invalid7("deny", false), invalid7("allow", true), invalid7("deny", true)}, false},
		{"TestSyncWindows_CanSync/will return error when inactive-allow has invalid schedule", []string{item("allow", "invalid-cron-schedule", "1h", apps)}, false},
		{"TestSyncWindows_CanSync/will return error when inactive-allow has invalid duration", []string{item("allow", "0 22 * * *", "invalid-duration", apps)}, false},
	}
	for _, c := range cases {
		t.Run(c.argo, func(t *testing.T) {
			src := "changeWindows:\n" + indent(strings.Join(c.items, ""))
			_, _, err := spec.Parse("argocd.yaml", []byte(src))
			if (err == nil) != c.ok {
				t.Fatalf("loads %v, want %v: %v\n%s", err == nil, c.ok, err, src)
			}
		})
	}
}

// indent puts a YAML list two spaces in.
func indent(s string) string {
	return "  " + strings.ReplaceAll(strings.TrimSuffix(s, "\n"), "\n", "\n  ") + "\n"
}

// TestArgoCDMatches ports the cases of TestSyncWindows_Matches and
// TestSyncWindows_Matches_AND_Operator that select by application name:
// the application "test-app" is the stack "test-app". Without
// namespaces and clusters, Argo CD's OR and AND agree.
func TestArgoCDMatches(t *testing.T) {
	cases := []struct {
		argo, glob string
		want       bool
	}{
		{"MatchAppName", "test-app", true},
		{"MatchWildcardAppName", "test-*", true},
		{"NoMatch", "app1", false},
	}
	for _, op := range []string{"TestSyncWindows_Matches", "TestSyncWindows_Matches_AND_Operator"} {
		for _, c := range cases {
			t.Run(op+"/"+c.argo, func(t *testing.T) {
				ws := parse(t, argoWindow("allow", "* * * * *", "1h", "", fmt.Sprintf("stacks: [%q]", c.glob)))
				if got := ws[0].Selects("test-app", nil); got != c.want {
					t.Fatalf("selects %v, want %v", got, c.want)
				}
			})
		}
	}
}

// TestArgoCDDifferences pins what stackd does where it chose otherwise
// than Argo CD, as docs/change-control.md writes it.
func TestArgoCDDifferences(t *testing.T) {
	t.Run("a window is active from the instant it starts", func(t *testing.T) {
		// Argo CD: not active at 22:00:00 exactly, active a nanosecond later.
		w := parse(t, argoWindow("deny", "0 22 * * *", "1h", ""))[0]
		for _, c := range []struct {
			at     string
			active bool
		}{
			{"2026-01-07T21:59:59Z", false}, {"2026-01-07T22:00:00Z", true},
			{"2026-01-07T22:59:59Z", true}, {"2026-01-07T23:00:00Z", false},
		} {
			if got := Active(w, at(c.at)); got != c.active {
				t.Errorf("at %s: active %v, want %v", c.at, got, c.active)
			}
		}
	})
	t.Run("the day the clocks go forward", func(t *testing.T) {
		// Europe/Berlin goes from 02:00 CET to 03:00 CEST on 2026-03-29.
		// A deny window at 02:30 for 1h does not start that day (Argo CD,
		// deciding after the change, reads the day as UTC+2 and finds it
		// active from 03:00 to 03:30 CEST); one at 01:30 for 2h lasts two
		// hours of elapsed time, to 04:30 CEST (Argo CD: to 03:30).
		skipped := parse(t, argoWindow("deny", "30 2 * * *", "1h", "Europe/Berlin"))
		for _, now := range []string{"2026-03-29T00:45:00Z", "2026-03-29T01:15:00Z"} {
			if v := Check(skipped, Stack{Name: "app"}, spec.ChangeCommit, at(now)); !v.Open {
				t.Errorf("at %s: closed by a start that does not exist", now)
			}
		}
		if v := Check(skipped, Stack{Name: "app"}, spec.ChangeCommit, at("2026-03-30T00:45:00Z")); v.Open {
			t.Error("the next day's 02:30 does not close")
		}
		elapsed := parse(t, argoWindow("deny", "30 1 * * *", "2h", "Europe/Berlin"))
		v := Check(elapsed, Stack{Name: "app"}, spec.ChangeCommit, at("2026-03-29T01:45:00Z")) // 03:45 CEST
		if v.Open || !v.NextOpen.Equal(at("2026-03-29T02:30:00Z")) {
			t.Errorf("open %v, next open %v: want closed until 04:30 CEST", v.Open, v.NextOpen)
		}
	})
}
