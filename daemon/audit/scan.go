package audit

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	"github.com/stackd/stackd/daemon/model"
)

// Page sizes of Log.Audit: the default when the filter's Limit is 0
// or less, and the most one call returns.
const (
	PageDefault = 100
	PageMax     = 5000
)

// Slack is how much older than the one before it an entry of the
// trail may be. Entries are appended in Seq order with the time of their
// request, and clocks step (a replica's, or one node's when NTP corrects
// it): a scan newest first for Since goes on this far past the first
// older entry before it stops.
const Slack = time.Minute

// Scan selects, for a Log's Audit, the entries of a filter
// among stored ones read newest first, each the JSON that json.Marshal
// makes of a model.AuditEntry. It skips, without decoding them, entries whose
// JSON cannot match the filter's stack or actor, so that a filter that
// matches little costs a read of the trail rather than a decoding of it.
type Scan struct {
	filter  Filter
	limit   int
	needles [][]byte
	// Entries are those selected so far, newest first; never nil.
	Entries []model.AuditEntry
}

// NewScan starts a scan for f. Its Limit is PageDefault when
// 0 or less, and at most PageMax.
func NewScan(f Filter) *Scan {
	s := &Scan{filter: f, limit: PageDefault, Entries: []model.AuditEntry{}}
	if f.Limit > 0 {
		s.limit = min(f.Limit, PageMax)
	}
	if f.Stack != "" {
		s.needles = append(s.needles, needle("stack", f.Stack))
	}
	if f.Actor != "" {
		s.needles = append(s.needles, needle("name", f.Actor))
	}
	return s
}

// Remaining is how many more entries the scan may select.
func (s *Scan) Remaining() int { return s.limit - len(s.Entries) }

// needle is how json.Marshal writes field: value in a model.AuditEntry.
func needle(field, value string) []byte {
	v, _ := json.Marshal(value) // a string always marshals
	return append([]byte(`"`+field+`":`), v...)
}

// Add considers the stored JSON of the next entry, newest first (its
// Seq below the last one's, and below the filter's Before). It says
// whether the scan goes on: false once Entries holds Limit entries or
// the scan is past the filter's Since.
func (s *Scan) Add(v []byte) (bool, error) {
	if len(s.Entries) >= s.limit {
		return false, nil
	}
	for _, n := range s.needles {
		if !bytes.Contains(v, n) {
			return !s.pastSince(v), nil
		}
	}
	var e model.AuditEntry
	if err := json.Unmarshal(v, &e); err != nil {
		return false, fmt.Errorf("audit entry: %w", err)
	}
	if !s.filter.Since.IsZero() && e.Time.Before(s.filter.Since.Add(-Slack)) {
		return false, nil
	}
	if s.filter.Matches(e) && (s.filter.Before == 0 || e.Seq < s.filter.Before) {
		s.Entries = append(s.Entries, e)
	}
	return len(s.Entries) < s.limit, nil
}

// pastSince says whether the entry v, which does not match, ends a scan
// for Since. Its time is read without decoding the rest when it is
// where json.Marshal puts it, after the Seq. An entry without a time
// ends nothing.
func (s *Scan) pastSince(v []byte) bool {
	if s.filter.Since.IsZero() {
		return false
	}
	t, ok := entryTime(v)
	return ok && t.Before(s.filter.Since.Add(-Slack))
}

var timeField = []byte(`,"time":"`)

// entryTime reads the time of the stored entry v; false when it has
// none, or is not JSON.
func entryTime(v []byte) (time.Time, bool) {
	if i := bytes.Index(v, timeField); i >= 0 && i < 32 {
		rest := v[i+len(timeField):]
		if j := bytes.IndexByte(rest, '"'); j > 0 {
			if t, err := time.Parse(time.RFC3339Nano, string(rest[:j])); err == nil {
				return t, true
			}
		}
	}
	var head struct{ Time *time.Time }
	if err := json.Unmarshal(v, &head); err != nil || head.Time == nil {
		return time.Time{}, false
	}
	return *head.Time, true
}
