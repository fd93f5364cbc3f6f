package daemon

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"
)

// Page sizes of AuditLog.Audit: the default when the filter's Limit is 0
// or less, and the most one call returns.
const (
	AuditPageDefault = 100
	AuditPageMax     = 5000
)

// AuditSlack is how much older than the one before it an entry of the
// trail may be. Entries are appended in Seq order with the time of their
// request, and clocks step (a replica's, or one node's when NTP corrects
// it): a scan newest first for Since goes on this far past the first
// older entry before it stops.
const AuditSlack = time.Minute

// AuditScan selects, for an AuditLog's Audit, the entries of a filter
// among stored ones read newest first, each the JSON that json.Marshal
// makes of an AuditEntry. It skips, without decoding them, entries whose
// JSON cannot match the filter's stack or actor, so that a filter that
// matches little costs a read of the trail rather than a decoding of it.
type AuditScan struct {
	filter  AuditFilter
	limit   int
	needles [][]byte
	// Entries are those selected so far, newest first; never nil.
	Entries []AuditEntry
}

// NewAuditScan starts a scan for f. Its Limit is AuditPageDefault when
// 0 or less, and at most AuditPageMax.
func NewAuditScan(f AuditFilter) *AuditScan {
	s := &AuditScan{filter: f, limit: AuditPageDefault, Entries: []AuditEntry{}}
	if f.Limit > 0 {
		s.limit = min(f.Limit, AuditPageMax)
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
func (s *AuditScan) Remaining() int { return s.limit - len(s.Entries) }

// needle is how json.Marshal writes field: value in an AuditEntry.
func needle(field, value string) []byte {
	v, _ := json.Marshal(value) // a string always marshals
	return append([]byte(`"`+field+`":`), v...)
}

// Add considers the stored JSON of the next entry, newest first (its
// Seq below the last one's, and below the filter's Before). It says
// whether the scan goes on: false once Entries holds Limit entries or
// the scan is past the filter's Since.
func (s *AuditScan) Add(v []byte) (bool, error) {
	if len(s.Entries) >= s.limit {
		return false, nil
	}
	for _, n := range s.needles {
		if !bytes.Contains(v, n) {
			return !s.pastSince(v), nil
		}
	}
	var e AuditEntry
	if err := json.Unmarshal(v, &e); err != nil {
		return false, fmt.Errorf("audit entry: %w", err)
	}
	if !s.filter.Since.IsZero() && e.Time.Before(s.filter.Since.Add(-AuditSlack)) {
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
func (s *AuditScan) pastSince(v []byte) bool {
	if s.filter.Since.IsZero() {
		return false
	}
	t, ok := entryTime(v)
	return ok && t.Before(s.filter.Since.Add(-AuditSlack))
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
