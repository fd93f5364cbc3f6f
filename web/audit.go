package web

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/stackd/stackd/daemon/audit"
	"github.com/stackd/stackd/daemon/model"
	"github.com/stackd/stackd/web/view"
)

// The audit trail (Options.Audit) records every request that changes
// something or is refused, and every sign-in and sign-out: who, what,
// which stack, when, from where, and the outcome. It never holds a
// credential, a cookie or a query string (which could hold either).

// Bounds of what a record keeps from the request.
const (
	maxAuditPath   = 256
	maxAuditRemote = 128
)

// Unauthenticated refusals are the one kind of record anyone who reaches
// the port can cause: beyond a burst, at most one a second is kept, and
// the rest only counted (stackd_audit_dropped_total).
const (
	unauthBurst = 60
	unauthEvery = time.Second
)

// record writes one entry to the audit trail and counts it in the
// metrics. A failure to write is logged: the request it records has been
// answered already.
func (s *Server) record(r *http.Request, p model.Principal, action, stack, outcome string, status int, reason string) {
	if s.opts.Metrics != nil {
		s.opts.Metrics.Audited(action, outcome)
	}
	if s.opts.Audit == nil {
		return
	}
	now := time.Now()
	if outcome == model.AuditUnauthenticated && !s.unauthLimit.allow(now, unauthBurst, unauthEvery) {
		if s.opts.Metrics != nil {
			s.opts.Metrics.AuditDropped()
		}
		return
	}
	e := model.AuditEntry{Time: now.UTC(), Principal: p, Action: action, Stack: stack, Method: r.Method,
		Path: view.Clip(r.URL.Path, maxAuditPath), Remote: view.Clip(remoteOf(r), maxAuditRemote), Outcome: outcome,
		Status: status, Reason: view.Clip(reason, maxReason), Node: s.opts.Node}
	if _, err := s.opts.Audit.PutAudit(e); err != nil {
		s.log.Error("cannot record a request in the audit trail", "action", action, "stack", stack,
			"outcome", outcome, "err", err)
	}
}

// remoteOf is where r came from: the peer's address, and what a proxy
// says the client was (X-Forwarded-For, which anyone can send: it is
// kept as a claim beside the address that made the connection).
func remoteOf(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	if fwd := strings.TrimSpace(r.Header.Get("X-Forwarded-For")); fwd != "" {
		return fwd + " via " + host
	}
	return host
}

// jsonError is the "error" of a JSON error body, if it is one.
func jsonError(body []byte) string {
	var e struct {
		Error string `json:"error"`
	}
	if json.Unmarshal(body, &e) != nil {
		return ""
	}
	return e.Error
}

// bucket is a token bucket: burst tokens, one more every period.
type bucket struct {
	mu     sync.Mutex
	tokens float64
	last   time.Time
}

func (b *bucket) allow(now time.Time, burst float64, every time.Duration) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.refill(now, burst, every)
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// full says whether the bucket holds burst tokens again, and left
// whether it holds one, without taking it.
func (b *bucket) left(now time.Time, burst float64, every time.Duration) (left, full bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.refill(now, burst, every)
	return b.tokens >= 1, b.tokens >= burst
}

// refill adds the tokens earned since the last call; b.mu is held.
func (b *bucket) refill(now time.Time, burst float64, every time.Duration) {
	if b.last.IsZero() {
		b.tokens = burst
	} else {
		b.tokens = min(burst, b.tokens+float64(now.Sub(b.last))/float64(every))
	}
	b.last = now
}

// Paging of the audit trail.
const (
	defaultAuditPage = 100
	maxAuditPage     = 1000
)

// auditQuery reads ?stack=&actor=&since=&before=&limit= into a filter.
// since is a time (RFC 3339) or how long ago (a duration such as 90m,
// 24h or 7d).
func auditQuery(q url.Values, now time.Time) (audit.Filter, error) {
	f := audit.Filter{Stack: q.Get("stack"), Actor: q.Get("actor"), Limit: defaultAuditPage}
	if v := q.Get("since"); v != "" {
		t, err := parseSince(v, now)
		if err != nil {
			return f, err
		}
		f.Since = t
	}
	if v := q.Get("before"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return f, errors.New("before: not a sequence number: " + v)
		}
		f.Before = n
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return f, errors.New("limit: not a positive number: " + v)
		}
		f.Limit = min(n, maxAuditPage)
	}
	return f, nil
}

// parseSince reads a time (RFC 3339) or an age (a Go duration, or a
// number of days such as 7d) before now.
func parseSince(v string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		return t, nil
	}
	if days, ok := strings.CutSuffix(v, "d"); ok {
		if n, err := strconv.Atoi(days); err == nil && n >= 0 {
			return now.AddDate(0, 0, -n), nil
		}
	}
	if d, err := time.ParseDuration(v); err == nil && d >= 0 {
		return now.Add(-d), nil
	}
	return time.Time{}, fmt.Errorf("since: want a time (2006-01-02T15:04:05Z) or an age (90m, 24h, 7d), not %q", v)
}

// auditPage lists the entries f selects, newest first, and the Seq to ask
// the next page before (0 on the last page).
func (s *Server) auditPage(f audit.Filter) ([]model.AuditEntry, uint64, error) {
	limit := f.Limit
	f.Limit++ // one more tells whether there is a next page
	entries, err := s.opts.Audit.Audit(f)
	if err != nil {
		return nil, 0, fmt.Errorf("read the audit trail: %w", err)
	}
	var next uint64
	if len(entries) > limit {
		entries = entries[:limit]
		next = entries[limit-1].Seq
	}
	if entries == nil {
		entries = []model.AuditEntry{}
	}
	return entries, next, nil
}

// listAudit serves GET /api/v1/audit: {"entries": [...], "next": "<seq>"},
// newest first. A stack's trail (?stack=) needs read on it, granted by a
// role (open reads do not count: the trail names people and addresses);
// the whole trail needs admin.
func (s *Server) listAudit(w http.ResponseWriter, r *http.Request) {
	if s.opts.Audit == nil {
		writeError(w, http.StatusNotFound, "this daemon keeps no audit trail")
		return
	}
	f, err := auditQuery(r.URL.Query(), time.Now())
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	entries, next, err := s.auditPage(f)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	out := map[string]any{"entries": entries}
	if next != 0 {
		out["next"] = strconv.FormatUint(next, 10)
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) uiAudit(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	p := view.AuditPage{Page: s.newPage(r, "Audit"), Kept: s.opts.Audit != nil,
		Stack: q.Get("stack"), Actor: q.Get("actor"), Since: q.Get("since")}
	p.Section = view.SectionAudit
	if p.Kept {
		f, err := auditQuery(q, time.Now())
		if err != nil {
			s.renderError(w, r, http.StatusBadRequest, "Bad request", err.Error())
			return
		}
		var next uint64
		if p.Entries, next, err = s.auditPage(f); err != nil {
			s.renderError(w, r, http.StatusInternalServerError, "Error", err.Error())
			return
		}
		if next != 0 {
			v := url.Values{}
			for k, val := range map[string]string{"stack": p.Stack, "actor": p.Actor, "since": p.Since} {
				if val != "" {
					v.Set(k, val)
				}
			}
			v.Set("before", strconv.FormatUint(next, 10))
			p.Next = "/audit?" + v.Encode()
		}
	}
	s.render(w, http.StatusOK, "audit.html", p)
}
