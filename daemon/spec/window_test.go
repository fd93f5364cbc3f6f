package spec

import (
	"strings"
	"testing"
	"time"
)

const windowDoc = `stacks:
  - name: app
    stack: dev
    projectRepo: https://example.com/org/app.git
    branch: main
changeWindows:
  - name: freeze
    kind: deny
    schedule: "0 18 * * 5"
    duration: 62h
    timeZone: Europe/Berlin
    stacks: ["prod-*"]
    labels: {tier: critical}
    changes: [commit, destroy]
`

func TestParseChangeWindows(t *testing.T) {
	cfg, diags := mustParse(t, windowDoc+"---\nchangeWindows:\n  - {kind: allow, schedule: '0 9 * * 1-5', duration: 8h, stacks: ['*']}\n")
	if len(diags) != 0 {
		t.Fatalf("unexpected diagnostics:\n%s", list(diags))
	}
	if len(cfg.ChangeWindows) != 2 || len(cfg.Stacks) != 1 {
		t.Fatalf("got %d windows, %d stacks", len(cfg.ChangeWindows), len(cfg.Stacks))
	}
	w := cfg.ChangeWindows[0]
	if w.Name != "freeze" || w.Kind != WindowDeny || w.Duration.Duration != 62*time.Hour || w.Location().String() != "Europe/Berlin" ||
		w.Cron() == nil || w.Pos.Line != 7 || w.Pos.Col != 5 {
		t.Fatalf("window %+v at %v", w, w.Pos)
	}
	if !w.Selects("prod-db", map[string]string{"tier": "critical", "x": "y"}) || w.Selects("prod-db", nil) || w.Selects("dev-db", map[string]string{"tier": "critical"}) {
		t.Fatal("selector")
	}
	if !w.Gates(ChangeCommit) || w.Gates(ChangeDrift) || !w.Gates(ChangeDestroy) {
		t.Fatal("changes")
	}
	all := cfg.ChangeWindows[1]
	if all.Location() != time.UTC || !all.Gates(ChangeDrift) || !all.Selects("anything", nil) || all.String() != "allow window at test.yaml:17:5" {
		t.Fatalf("defaults: %v %v", all.Location(), all)
	}
}

func TestParseChangeWindowErrors(t *testing.T) {
	item := "changeWindows:\n  - kind: deny\n    schedule: '0 22 * * *'\n    duration: 8h\n    stacks: ['*']\n"
	tests := []struct{ name, src, want string }{
		{"no kind", strings.Replace(item, "kind: deny", "name: x", 1), "test.yaml:2:5: changeWindows[0].kind: missing kind (allow or deny)"},
		{"bad kind", strings.Replace(item, "kind: deny", "kind: block", 1), `test.yaml:2:11: changeWindows[0].kind: unknown kind "block" (allow or deny)`},
		{"no schedule", strings.Replace(item, "schedule: '0 22 * * *'", "timeZone: UTC", 1), "changeWindows[0].schedule: missing schedule"},
		{"bad cron", strings.Replace(item, "0 22 * * *", "0 25 * * *", 1), `test.yaml:3:15: changeWindows[0].schedule: not a cron expression as Argo CD reads it (minute hour day-of-month month day-of-week): end of range (25) above maximum (23): 25`},
		{"sunday as 7", strings.Replace(item, "0 22 * * *", "0 22 * * 7", 1), `test.yaml:3:15: changeWindows[0].schedule: not a cron expression as Argo CD reads it (minute hour day-of-month month day-of-week): end of range (7) above maximum (6): 7`},
		{"a descriptor", strings.Replace(item, "0 22 * * *", "@daily", 1), `test.yaml:3:15: changeWindows[0].schedule: not a cron expression as Argo CD reads it`},
		{"a zone prefix", strings.Replace(item, "0 22 * * *", "TZ=UTC 0 22 * * *", 1), `test.yaml:3:15: changeWindows[0].schedule: a time zone prefix (TZ=, CRON_TZ=) is not taken here`},
		{"a long description", item + "    description: " + strings.Repeat("x", 256) + "\n", `test.yaml:6:18: changeWindows[0].description: longer than 255 characters`},
		{"the same window twice", item + strings.Replace(item, "changeWindows:\n", "", 1), `test.yaml:6:5: changeWindows[1]: the same window as the one at test.yaml:2:5 (kind, schedule, duration, time zone and selectors): Argo CD refuses it too`},
		{"the same window in another document", item + "---\n" + strings.Replace(item, "    kind: deny", "    name: other\n    manualSync: true\n    kind: deny", 1), `test.yaml:8:5: changeWindows[0]: the same window as the one at test.yaml:2:5`},
		{"cron never", strings.Replace(item, "0 22 * * *", "0 0 30 2 *", 1), "test.yaml:3:15: changeWindows[0].schedule: never matches a date of the calendar"},
		{"no duration", strings.Replace(item, "duration: 8h", "timeZone: UTC", 1), "changeWindows[0].duration: missing or shorter than 1m"},
		{"bad duration", strings.Replace(item, "8h", "8 hours", 1), "test.yaml:4:15: changeWindows[0].duration: invalid duration"},
		{"bad zone", item + "    timeZone: Mars/Olympus\n", `test.yaml:6:15: changeWindows[0].timeZone: unknown time zone "Mars/Olympus"`},
		{"local zone", item + "    timeZone: Local\n", `changeWindows[0].timeZone: unknown time zone "Local"`},
		{"no selector", strings.Replace(item, "    stacks: ['*']\n", "", 1), "test.yaml:2:5: changeWindows[0]: a change window needs stacks or labels"},
		{"bad glob", strings.Replace(item, "['*']", "['[a']", 1), `test.yaml:5:14: changeWindows[0].stacks[0]: invalid glob "[a"`},
		{"bad change", item + "    changes: [commit, delete]\n", `test.yaml:6:23: changeWindows[0].changes[1]: unknown change "delete" (commit, drift or destroy)`},
		{"typo", item + "    timezone: UTC\n", `test.yaml:6:5: changeWindows[0].timezone: unknown field "timezone" (did you mean "timeZone"?)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, diags, err := Parse("test.yaml", []byte(tt.src))
			if err == nil {
				t.Fatal("parsed without error")
			}
			if got := list(diags.Errors()); !strings.Contains(got, tt.want) {
				t.Fatalf("errors:\n%swant one containing:\n  %s", got, tt.want)
			}
		})
	}
}

// TestParseArgoCDWindowFields: a window written as in an Argo CD
// AppProject (with stacks: for applications:) loads: day and month
// names, manualSync, syncOverrun and description; syncOverrun: false is
// noted where it is written, true is not.
func TestParseArgoCDWindowFields(t *testing.T) {
	src := `changeWindows:
  - kind: deny
    schedule: '0 22 * * MON-FRI'
    duration: 10h
    stacks: ['*']
    manualSync: true
    syncOverrun: false
    description: CHG-1234
  - kind: allow
    schedule: '0 9 * jan,FEB sat'
    duration: 1h
    stacks: ['*']
    syncOverrun: true
`
	cfg, diags := mustParse(t, src)
	if len(cfg.ChangeWindows) != 2 {
		t.Fatalf("windows: %v", cfg.ChangeWindows)
	}
	w := cfg.ChangeWindows[0]
	if !w.ManualSync || w.SyncOverrun == nil || *w.SyncOverrun || w.Description != "CHG-1234" || cfg.ChangeWindows[1].ManualSync {
		t.Fatalf("window %+v", w)
	}
	friday := time.Date(2026, 1, 9, 12, 0, 0, 0, time.UTC)
	if got := w.Cron().Next(friday); !got.Equal(time.Date(2026, 1, 9, 22, 0, 0, 0, time.UTC)) {
		t.Fatalf("MON-FRI: next after Friday noon %v", got)
	}
	if got := w.Cron().Next(friday.Add(12 * time.Hour)); !got.Equal(time.Date(2026, 1, 12, 22, 0, 0, 0, time.UTC)) {
		t.Fatalf("MON-FRI: next after Friday night %v", got)
	}
	notes := list(diags.Notes())
	if len(diags.Notes()) != 1 || !strings.Contains(notes, "test.yaml:7:18: changeWindows[0].syncOverrun: note: stackd never stops an update") {
		t.Fatalf("notes:\n%s", notes)
	}
}
