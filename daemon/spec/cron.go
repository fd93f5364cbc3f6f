package spec

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// Cron is a parsed 5-field cron expression: minute, hour, day of
// month, month, day of week. The grammar is Argo CD's for sync windows,
// by construction: the same library (robfig/cron/v3) with the same
// parser options. Each field takes "*" (or "?"), numbers, ranges "a-b",
// lists "a,b" and steps "*/n" or "a-b/n"; months and days of the week
// also take their English names' first three letters in any case
// (JAN-DEC, SUN-SAT). Days of the week run from 0 (Sunday) to 6: 7 is
// refused, as Argo CD refuses it.
type Cron struct {
	minute, hour, dom, month, dow uint64 // bit sets
	domAny, dowAny                bool
}

// cronParser is Argo CD's sync-window parser: five fields, no seconds,
// no descriptors (@daily).
var cronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow)

// cronStar is the bit robfig/cron sets in a field written "*" or "?".
const cronStar = 1 << 63

// ParseCron parses a 5-field cron expression with Argo CD's grammar. A
// time zone prefix (TZ= or CRON_TZ=), which that grammar takes, is
// refused: a window's time zone is its timeZone field.
func ParseCron(expr string) (*Cron, error) {
	if strings.HasPrefix(expr, "TZ=") || strings.HasPrefix(expr, "CRON_TZ=") {
		return nil, errors.New("a time zone prefix (TZ=, CRON_TZ=) is not taken here: write the zone in timeZone")
	}
	s, err := cronParser.Parse(expr)
	if err != nil {
		return nil, fmt.Errorf("not a cron expression as Argo CD reads it (minute hour day-of-month month day-of-week): %w", err)
	}
	spec, ok := s.(*cron.SpecSchedule)
	if !ok { // the options above parse nothing else
		return nil, fmt.Errorf("not a cron expression of 5 fields")
	}
	return &Cron{minute: spec.Minute, hour: spec.Hour, dom: spec.Dom, month: spec.Month, dow: spec.Dow,
		domAny: spec.Dom&cronStar != 0, dowAny: spec.Dow&cronStar != 0}, nil
}

// Next is the first minute strictly after t that the schedule matches,
// on t's location's wall clock; zero if none within five years
// (February 30). A minute that does not exist on that clock (in the hour
// skipped when it goes forward) never matches; one that happens twice
// matches twice.
func (c *Cron) Next(t time.Time) time.Time {
	t = t.Truncate(time.Minute).Add(time.Minute)
	limit := t.AddDate(5, 0, 0)
	for t.Before(limit) {
		switch {
		case c.month&(1<<uint(t.Month())) == 0:
			t = time.Date(t.Year(), t.Month()+1, 1, 0, 0, 0, 0, t.Location())
		case !c.dayMatches(t):
			t = time.Date(t.Year(), t.Month(), t.Day()+1, 0, 0, 0, 0, t.Location())
		case c.hour&(1<<uint(t.Hour())) == 0:
			t = t.Truncate(time.Hour).Add(time.Hour)
		case c.minute&(1<<uint(t.Minute())) == 0:
			t = t.Add(time.Minute)
		default:
			return t
		}
	}
	return time.Time{}
}

// dayMatches applies cron's rule, as robfig/cron does: when either day
// field is "*", a day must match both; when both are restricted, a day
// matching either one counts.
func (c *Cron) dayMatches(t time.Time) bool {
	dom := c.dom&(1<<uint(t.Day())) != 0
	dow := c.dow&(1<<uint(t.Weekday())) != 0
	if c.domAny || c.dowAny {
		return dom && dow
	}
	return dom || dow
}
