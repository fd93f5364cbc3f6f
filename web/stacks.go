package web

import (
	"bufio"
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

// The stack list at fleet size: each stack's summary JSON and UI row are
// made once per change of the stack (the daemon's StackVersions say which
// changed), not per request; a request filters and pages what is kept,
// and writes the kept JSON as it is, through a pooled buffer, with its
// length known beforehand. A stack's full view is not kept, only its
// JSON, made the first time a full list shows the stack and then at each
// of its changes: the UI and the summaries never need it.

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
	ref     access.StackRef // what access decides on: name, source, labels
	health  string          // the summary's, which ?health= filters on
	full    json.RawMessage // the view's JSON; nil until a full list asks
	short   json.RawMessage // the summary's JSON
	row     view.StackRow
}

// stackCache keeps the rendered stacks.
type stackCache struct {
	mu      sync.Mutex
	entries map[string]*stackEntry
}

// list returns every stack, by name, rendering again those whose version
// or holder changed since they were last rendered (with their full JSON
// when they had it).
func (c *stackCache) list(api API) []*stackEntry {
	versions := api.StackVersions()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries == nil {
		c.entries = map[string]*stackEntry{}
	}
	out := make([]*stackEntry, 0, len(versions))
	for _, sv := range versions {
		e := c.entries[sv.Name]
		if e == nil || e.version != sv.Version || e.holder != sv.Holder {
			v, err := api.Stack(sv.Name)
			if err != nil {
				continue // gone meanwhile
			}
			e = render(v, sv, e != nil && e.full != nil)
			c.entries[sv.Name] = e
		}
		out = append(out, e)
	}
	if len(c.entries) > len(out) { // some stacks are gone
		live := make(map[string]bool, len(out))
		for _, e := range out {
			live[e.ref.Name] = true
		}
		for name := range c.entries {
			if !live[name] {
				delete(c.entries, name)
			}
		}
	}
	return out
}

// withFull returns page with each entry's full JSON, rendering again the
// entries without it (and keeping them, so that from then on each one's
// full JSON is made at its changes); a stack gone meanwhile leaves the
// page.
func (c *stackCache) withFull(api API, page []*stackEntry) []*stackEntry {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := page[:0]
	for _, e := range page {
		if e.full == nil {
			v, err := api.Stack(e.ref.Name)
			if err != nil {
				continue
			}
			re := render(v, model.StackVersion{Name: e.ref.Name, Version: e.version, Holder: e.holder}, true)
			if c.entries[e.ref.Name] == e {
				c.entries[e.ref.Name] = re
			}
			e = re
		}
		out = append(out, e)
	}
	return out
}

func render(v model.StackView, sv model.StackVersion, full bool) *stackEntry {
	sum := view.SummaryOf(&v)
	e := &stackEntry{version: sv.Version, holder: sv.Holder, ref: *refOf(&v), health: sum.Health, row: view.Summarize(v)}
	if full {
		e.full, _ = json.Marshal(v)
	}
	e.short, _ = json.Marshal(sum)
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
	return (q.health == "" || strings.EqualFold(e.health, q.health)) &&
		(q.source == "" || e.ref.Source == q.source) &&
		(q.q == "" || strings.Contains(strings.ToLower(e.ref.Name), strings.ToLower(q.q)))
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
		if e.ref.Name <= q.after && q.after != "" {
			continue
		}
		if len(page) == q.limit {
			next = page[len(page)-1].ref.Name
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
	summary := shape == "summary"
	page, total, next := q.page(s.readable(principal(r), s.stacks.list(s.api)))
	if !summary {
		page = s.stacks.withFull(s.api, page)
	}
	tail := `],"total":` + strconv.Itoa(total)
	if next != "" {
		nb, _ := json.Marshal(next)
		tail += `,"next":` + string(nb)
	}
	tail += "}\n"
	const head = `{"stacks":[`
	size := len(head) + len(tail) + max(len(page)-1, 0)
	for _, e := range page {
		size += len(e.json(summary))
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(size))
	bw := listWriters.Get().(*bufio.Writer)
	defer listWriters.Put(bw)
	bw.Reset(w)
	_, _ = bw.WriteString(head)
	for i, e := range page {
		if i > 0 {
			_ = bw.WriteByte(',')
		}
		_, _ = bw.Write(e.json(summary))
	}
	_, _ = bw.WriteString(tail)
	_ = bw.Flush()
	bw.Reset(nil) // keeps no response
}

// json is e's JSON in the list: its summary's, or its full view's.
func (e *stackEntry) json(summary bool) json.RawMessage {
	if summary {
		return e.short
	}
	return e.full
}

// listWriters buffer the list's writes: a few large writes to the
// connection rather than one per stack (or one copy of the whole list).
var listWriters = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, 64<<10) }}

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
		ref = e.ref // with its labels, which roles may select on
		if ok, _ := s.permit(p, access.ActionRead, &ref); ok {
			out = append(out, e)
		}
	}
	return out
}
