package spec

import (
	"testing"
	"time"
)

func TestCronNext(t *testing.T) {
	base := time.Date(2026, 11, 22, 10, 7, 30, 0, time.UTC) // a Sunday
	tests := []struct {
		expr, want string
	}{
		{"* * * * *", "2026-11-22 10:08"},
		{"*/15 * * * *", "2026-11-22 10:15"},
		{"0 * * * *", "2026-11-22 11:00"},
		{"30 2 * * *", "2026-11-23 02:30"},
		{"0 9 * * 1-5", "2026-11-23 09:00"},
		{"0 0 1 * *", "2026-12-01 00:00"},
		{"0 0 * * 0", "2026-11-29 00:00"},
		{"0 0 * * SUN", "2026-11-29 00:00"},
		{"0 22 * * MON-FRI", "2026-11-23 22:00"},
		{"0 22 * * mon-fri", "2026-11-23 22:00"},
		{"0 0 1 jan,Feb *", "2027-01-01 00:00"},
		{"0 0 ? * 3", "2026-11-25 00:00"},
		{"*/1 * 1 * *", "2026-12-01 00:00"},
		{"5,10 10 * * *", "2026-11-22 10:10"},
		{"0 0 29 2 *", "2028-02-29 00:00"},
		{"0 12 13 * 5", "2026-11-27 12:00"}, // Friday or the 13th, whichever first
	}
	for _, tt := range tests {
		c, err := ParseCron(tt.expr)
		if err != nil {
			t.Fatalf("%s: %v", tt.expr, err)
		}
		if got := c.Next(base).Format("2006-01-02 15:04"); got != tt.want {
			t.Errorf("%s: next = %s, want %s", tt.expr, got, tt.want)
		}
	}
	if c, _ := ParseCron("0 0 30 2 *"); !c.Next(base).IsZero() {
		t.Error("February 30 has a next time")
	}
	for _, bad := range []string{"", "* * * *", "60 * * * *", "* 24 * * *", "* * 0 * *", "* * * 13 *", "* * * * 8", "* * * * 7", "0 0 * * 0-7", "@daily", "0 0 0 * * *", "TZ=UTC 0 0 * * *", "TZ=UTC", "*/0 * * * *", "5-1 * * * *", "a * * * *"} {
		if _, err := ParseCron(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}
