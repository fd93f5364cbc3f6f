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
		{"bad cron", strings.Replace(item, "0 22 * * *", "0 25 * * *", 1), `test.yaml:3:15: changeWindows[0].schedule: hour field "25": "25" is not a number from 0 to 23`},
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
