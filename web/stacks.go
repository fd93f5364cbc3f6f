package web

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"

	"github.com/stackd/stackd/daemon/access"
	"github.com/stackd/stackd/daemon/model"
	"github.com/stackd/stackd/web/view"
)

// The stack list at fleet size: each stack's view, its JSON (full and
// summary) and its UI row are made once per change of the stack (the
// daemon's StackVersions say which changed), not per request; a request
// filters and pages what is kept.

// Paging of GET /api/v1/stacks and the UI's list.
const (
	defaultPage = 100
	maxPage     = 1000
)

// stackEntry is one stack as last rendered. Its fields are shared by
// every request: read only.
type stackEntry struct {
	version uint64
	holder  string
	view    model.StackView
	full    json.RawMessage
	summary view.StackSummary
	short   json.RawMessage // summary's JSON
	row     view.StackRow
}

// stackCache keeps the rendered stacks.
type stackCache struct {
	mu      sync.Mutex
	entries map[string]*stackEntry
}

// list returns every stack, by name, rendering again those whose version
// or holder changed since they were last rendered.
func (c *stackCache) list(api API) []*stackEntry {
	versions := api.StackVersions()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries == nil {
		c.entries = map[string]*stackEntry{}
	}
	out := make([]*stackEntry, 0, len(versions))
	live := make(map[string]bool, len(versions))
	for _, sv := range versions {
		live[sv.Name] = true
		e := c.entries[sv.Name]
		if e == nil || e.version != sv.Version || e.holder != sv.Holder {
			v, err := api.Stack(sv.Name)
			if err != nil {
				continue // gone meanwhile
			}
			e = render(v, sv)
			c.entries[sv.Name] = e
		}
		out = append(out, e)
	}
	for name := range c.entries {
		if !live[name] {
			delete(c.entries, name)
		}
	}
	return out
}

func render(v model.StackView, sv model.StackVersion) *stackEntry {
	e := &stackEntry{version: sv.Version, holder: sv.Holder, view: v, summary: view.SummaryOf(&v), row: view.Summarize(v)}
	e.full, _ = json.Marshal(v)
	e.short, _ = json.Marshal(e.summary)
	return e
}

// stackQuery is a list request: filters, then a page of what passes.
type stackQuery struct {
	health, source, q string
	after             string
	limit             int
}

// parseStackQuery reads ?health=&source=&q=&after=&limit=; limit
// defaults to def and is at most maxPage.
func parseStackQuery(v url.Values, def int) (stackQuery, error) {
	q := stackQuery{health: v.Get("health"), source: v.Get("source"), q: v.Get("q"), after: v.Get("after"), limit: def}
	if s := v.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			return q, errBadLimit
		}
		q.limit = min(n, maxPage)
	}
	return q, nil
}

var errBadLimit = errors.New("limit must be a positive integer")

func (q stackQuery) match(e *stackEntry) bool {
	return (q.health == "" || strings.EqualFold(e.summary.Health, q.health)) &&
		(q.source == "" || e.summary.Source == q.source) &&
		(q.q == "" || strings.Contains(strings.ToLower(e.summary.Name), strings.ToLower(q.q)))
}

// page filters entries (sorted by name) and returns the page after
// q.after, the number that passed the filters, and the name to ask the
// next page after ("" on the last page).
func (q stackQuery) page(entries []*stackEntry) (page []*stackEntry, total int, next string) {
	for _, e := range entries {
		if !q.match(e) {
			continue
		}
		total++
		if e.summary.Name <= q.after && q.after != "" {
			continue
		}
		if len(page) == q.limit {
			next = page[len(page)-1].summary.Name
			continue
		}
		page = append(page, e)
	}
	return page, total, next
}

// listStacks serves GET /api/v1/stacks: every stack's full view by
// default, ?view=summary for summaries; ?health=, ?source=, ?q= filter
// and ?limit=&after= page (without limit, every stack that passes).
func (s *Server) listStacks(w http.ResponseWriter, r *http.Request) {
	v := r.URL.Query()
	shape := v.Get("view")
	if shape != "" && shape != "summary" && shape != "full" {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "view must be summary or full"})
		return
	}
	q, err := parseStackQuery(v, maxInt)
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
		return
	}
	page, total, next := q.page(s.readable(principal(r), s.stacks.list(s.api)))
	var b strings.Builder
	b.WriteString(`{"stacks":[`)
	for i, e := range page {
		if i > 0 {
			b.WriteByte(',')
		}
		if shape == "summary" {
			b.Write(e.short)
		} else {
			b.Write(e.full)
		}
	}
	b.WriteString(`],"total":` + strconv.Itoa(total))
	if next != "" {
		nb, _ := json.Marshal(next)
		b.WriteString(`,"next":` + string(nb))
	}
	b.WriteString("}\n")
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(b.String()))
}

const maxInt = int(^uint(0) >> 1)

// readable keeps the entries p may read: every one while reads are open
// or for the admin token, else those a role of p allows reading.
func (s *Server) readable(p model.Principal, entries []*stackEntry) []*stackEntry {
	if s.openReads() || p.Kind == model.PrincipalAdmin {
		return entries
	}
	out := make([]*stackEntry, 0, len(entries))
	var ref access.StackRef // one for all: Access keeps none
	for _, e := range entries {
		ref.Name, ref.Source = e.view.Name, e.view.Source
		if ok, _ := s.permit(p, access.ActionRead, &ref); ok {
			out = append(out, e)
		}
	}
	return out
}
