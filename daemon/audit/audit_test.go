package audit

import (
	"testing"
	"time"

	"github.com/stackd/stackd/daemon/model"
)

func TestAuditFilterMatches(t *testing.T) {
	at := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	e := model.AuditEntry{Time: at, Stack: "app", Principal: model.Principal{Kind: model.PrincipalToken, Name: "ci"}}
	cases := []struct {
		name string
		f    Filter
		want bool
	}{
		{"all", Filter{}, true},
		{"its stack", Filter{Stack: "app"}, true},
		{"another stack", Filter{Stack: "db"}, false},
		{"its actor", Filter{Actor: "ci"}, true},
		{"another actor", Filter{Actor: "alice"}, false},
		{"since before", Filter{Since: at.Add(-time.Second)}, true},
		{"since the same time", Filter{Since: at}, true},
		{"since after", Filter{Since: at.Add(time.Second)}, false},
		{"all three", Filter{Stack: "app", Actor: "ci", Since: at}, true},
	}
	for _, c := range cases {
		if got := c.f.Matches(e); got != c.want {
			t.Errorf("%s: Matches = %v, want %v", c.name, got, c.want)
		}
	}
}
