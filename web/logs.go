package web

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httputil"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/stackd/stackd/daemon/livelog"
	"github.com/stackd/stackd/daemon/model"
)

// Page sizes of GET /api/v1/stacks/{name}/updates and
// GET /api/v1/config/revisions.
const (
	defaultUpdates = 20
	maxUpdates     = 100
)

// listUpdates serves a stack's update history, newest first, a page at a
// time: ?limit=<n> (default 20, at most 100) and ?before=<seq> (the
// previous page's "next"); ?type=<type>[,<type>…] keeps the updates of
// those types only, a page still holding limit of them when the history
// has them. "next" is left out on the last page.
func (s *Server) listUpdates(w http.ResponseWriter, r *http.Request) {
	before, limit, err := pageParams(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	types, err := updateTypes(r.URL.Query()["type"])
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	// One more than asked tells whether there is a next page.
	updates, err := s.updatesOf(r.PathValue("name"), types, before, limit+1)
	if err != nil {
		writeAPIError(w, err)
		return
	}
	out := map[string]any{}
	if len(updates) > limit {
		updates = updates[:limit]
		out["next"] = strconv.FormatUint(updates[limit-1].Seq, 10)
	}
	if updates == nil {
		updates = []model.Update{}
	}
	out["updates"] = updates
	writeJSON(w, http.StatusOK, out)
}

// updateTypes reads the values of a ?type parameter, each a type or a
// comma-separated list of them, as a set; nil (every type) when there
// are none. An unknown type is an error naming the known ones.
func updateTypes(values []string) (map[string]bool, error) {
	var types map[string]bool
	for _, v := range values {
		for t := range strings.SplitSeq(v, ",") {
			if t = strings.TrimSpace(t); t == "" {
				continue
			}
			if !slices.Contains(model.UpdateTypes, t) {
				return nil, fmt.Errorf("type: unknown update type %q (valid: %s)", t, strings.Join(model.UpdateTypes, ", "))
			}
			if types == nil {
				types = map[string]bool{}
			}
			types[t] = true
		}
	}
	return types, nil
}

// updatesOf reads up to limit of stack's updates with Seq below before
// (when before > 0) whose type is in types (any type when types is nil),
// newest first, paging through the history until it has them or the
// history ends.
func (s *Server) updatesOf(stack string, types map[string]bool, before uint64, limit int) ([]model.Update, error) {
	if types == nil {
		return s.api.Updates(stack, before, limit)
	}
	var out []model.Update
	for len(out) < limit {
		page, err := s.api.Updates(stack, before, maxUpdates)
		if err != nil {
			return nil, err
		}
		for _, u := range page {
			if types[u.Type] && len(out) < limit {
				out = append(out, u)
			}
		}
		if len(page) < maxUpdates {
			break
		}
		before = page[len(page)-1].Seq
	}
	return out, nil
}

// listRevisions serves the config revisions, newest first, a page at a
// time exactly as listUpdates pages updates: ?limit=<n> and
// ?before=<seq>, with "next" left out on the last page.
func (s *Server) listRevisions(w http.ResponseWriter, r *http.Request) {
	before, limit, err := pageParams(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	revs, err := s.api.ConfigRevisions(before, limit+1) // one more tells whether there is a next page
	if err != nil {
		writeAPIError(w, err)
		return
	}
	out := map[string]any{}
	if len(revs) > limit {
		revs = revs[:limit]
		out["next"] = strconv.FormatUint(revs[limit-1].Seq, 10)
	}
	if revs == nil {
		revs = []model.ConfigRevision{}
	}
	out["revisions"] = revs
	writeJSON(w, http.StatusOK, out)
}

// pageParams reads ?before and ?limit.
func pageParams(r *http.Request) (before uint64, limit int, err error) {
	q := r.URL.Query()
	if v := q.Get("before"); v != "" {
		if before, err = strconv.ParseUint(v, 10, 64); err != nil {
			return 0, 0, errors.New("before: not a sequence number: " + v)
		}
	}
	limit = defaultUpdates
	if v := q.Get("limit"); v != "" {
		if limit, err = strconv.Atoi(v); err != nil || limit < 1 {
			return 0, 0, errors.New("limit: not a positive number: " + v)
		}
	}
	return before, min(limit, maxUpdates), nil
}

// getLog serves an update's log as text: the stored log, or what the
// live log holds while the update runs. With ?follow=1 and the update
// running, it streams the live log until the update ends, the client goes
// away or the server stops. The daemon scrubs secrets from both.
func (s *Server) getLog(w http.ResponseWriter, r *http.Request) {
	stored, live, err := s.api.Log(r.PathValue("id"))
	if err != nil {
		writeAPIError(w, err)
		return
	}
	if live == nil && r.Header.Get(forwardedHeader) == "" {
		if url := s.api.RemoteLog(r.PathValue("id")); url != "" {
			s.proxyLog(w, r, url)
			return
		}
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	switch {
	case live == nil:
		_, _ = w.Write(stored)
	case follows(r):
		s.follow(w, r, live)
	default:
		_, _ = w.Write(live.Bytes())
	}
}

// forwardedHeader marks a log request one replica passed to another: it
// is never passed on again.
const forwardedHeader = "X-Stackd-Forwarded"

// proxyLog serves the log of an update that another replica runs, from
// that replica (base is its API URL), streaming as it comes. The
// client's credentials go along: every replica has the same token.
func (s *Server) proxyLog(w http.ResponseWriter, r *http.Request, base string) {
	target, err := url.Parse(base)
	if err != nil || (target.Scheme != "http" && target.Scheme != "https") {
		writeError(w, http.StatusBadGateway, "the replica running the update advertises no usable URL")
		return
	}
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Time{})
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.Header.Set(forwardedHeader, "1")
		},
		Transport:     s.peers,
		FlushInterval: -1, // a followed log streams
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			s.log.Warn("cannot reach the replica running the update", "replica", target.Host, "err", err)
			writeError(w, http.StatusBadGateway, "cannot reach the replica running the update")
		},
	}
	rp.ServeHTTP(deadlineWriter{w, func() { s.extendWrite(rc) }}, r)
}

// deadlineWriter moves the write deadline before each write, as follow
// does, so that only a client that stops reading is dropped.
type deadlineWriter struct {
	http.ResponseWriter
	extend func()
}

func (d deadlineWriter) Write(p []byte) (int, error) {
	d.extend()
	return d.ResponseWriter.Write(p)
}

// Unwrap lets the proxy flush the underlying writer.
func (d deadlineWriter) Unwrap() http.ResponseWriter { return d.ResponseWriter }

// follows reports whether the client asked to follow the log (a HEAD
// request gets the headers and no stream).
func follows(r *http.Request) bool {
	v, err := strconv.ParseBool(r.URL.Query().Get("follow"))
	return err == nil && v && r.Method == http.MethodGet
}

// follow streams live from its start, one flushed chunk per change. The
// connection's read and write timeouts would cut a long operation's log:
// the read deadline is cleared and the write deadline moved before each
// chunk, so only a client that stops reading is dropped.
func (s *Server) follow(w http.ResponseWriter, r *http.Request, live *livelog.Log) {
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Time{})
	s.extendWrite(rc)
	w.WriteHeader(http.StatusOK)
	if err := rc.Flush(); err != nil {
		return
	}
	var off int64
	for {
		data, next, closed, changed := live.Since(off)
		off = next
		if len(data) > 0 {
			s.extendWrite(rc)
			if _, err := w.Write(data); err != nil {
				return
			}
			if err := rc.Flush(); err != nil {
				return
			}
		}
		if closed {
			return
		}
		select {
		case <-changed:
		case <-r.Context().Done():
			return
		case <-s.stopped.Done():
			return
		}
	}
}

// extendWrite gives the next write the server's write timeout from now.
func (s *Server) extendWrite(rc *http.ResponseController) {
	deadline := time.Time{}
	if d := s.srv.WriteTimeout; d > 0 {
		deadline = time.Now().Add(d)
	}
	_ = rc.SetWriteDeadline(deadline)
}
