package daemon

import (
	"testing"
	"time"
)

func TestAuditFilterMatches(t *testing.T) {
	at := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	e := AuditEntry{Time: at, Stack: "app", Principal: Principal{Kind: PrincipalToken, Name: "ci"}}
	cases := []struct {
		name string
		f    AuditFilter
		want bool
	}{
		{"all", AuditFilter{}, true},
		{"its stack", AuditFilter{Stack: "app"}, true},
		{"another stack", AuditFilter{Stack: "db"}, false},
		{"its actor", AuditFilter{Actor: "ci"}, true},
		{"another actor", AuditFilter{Actor: "alice"}, false},
		{"since before", AuditFilter{Since: at.Add(-time.Second)}, true},
		{"since the same time", AuditFilter{Since: at}, true},
		{"since after", AuditFilter{Since: at.Add(time.Second)}, false},
		{"all three", AuditFilter{Stack: "app", Actor: "ci", Since: at}, true},
	}
	for _, c := range cases {
		if got := c.f.Matches(e); got != c.want {
			t.Errorf("%s: Matches = %v, want %v", c.name, got, c.want)
		}
	}
}
