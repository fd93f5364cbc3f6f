package metrics

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"time"
)

// A scrape of GET /metrics with 1,000 stacks encodes ten thousand series;
// encoding (and compressing) them took two thirds of a scrape. The
// response is kept and served again while the state it shows is the
// same: no stack's version, no count and no gauge of the scheduler, the
// config or the cluster changed (a fingerprint says so), and it is less
// than maxAge old, so that the process's own gauges stay fresh. A scrape
// that finds it older makes it again; the scrapes meanwhile (of the same
// state) get the kept one rather than wait.
const maxAge = time.Second

// Cached is next (the registry's handler) serving its response again
// while m's metrics did not change.
func (m *Metrics) Cached(next http.Handler) http.Handler {
	return &cache{next: next, metrics: m}
}

// cache serves the response of next again while it is current.
type cache struct {
	next    http.Handler
	metrics *Metrics

	mu      sync.Mutex
	entries map[string]*cachedScrape // by Accept and Accept-Encoding
}

type cachedScrape struct {
	mu          sync.Mutex // held while the scrape of a new state is made
	fingerprint uint64
	at          time.Time
	refreshing  bool // the scrape is made again, for its age alone
	code        int
	header      http.Header
	body        []byte
}

// keep takes rec, the scrape of the state of fingerprint fp.
func (e *cachedScrape) keep(fp uint64, rec *httptest.ResponseRecorder) {
	e.fingerprint, e.at, e.code, e.header, e.body = fp, time.Now(), rec.Code, rec.Header().Clone(), rec.Body.Bytes()
}

func (c *cache) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	key := r.Header.Get("Accept") + "\x00" + r.Header.Get("Accept-Encoding")
	c.mu.Lock()
	if c.entries == nil || len(c.entries) > 16 {
		c.entries = map[string]*cachedScrape{} // a few keys in practice
	}
	e := c.entries[key]
	if e == nil {
		e = &cachedScrape{}
		c.entries[key] = e
	}
	c.mu.Unlock()

	fp := c.metrics.fingerprint()
	e.mu.Lock()
	switch {
	case e.body == nil || e.fingerprint != fp: // the scrapes of the new state wait for this one
		e.keep(fp, c.scrape(r))
	case time.Since(e.at) > maxAge && !e.refreshing: // the others get the kept one meanwhile
		e.refreshing = true
		at := e.at
		e.mu.Unlock()
		rec := c.scrape(r)
		e.mu.Lock()
		e.refreshing = false
		if e.at.Equal(at) { // none newer was kept meanwhile
			e.keep(fp, rec)
		}
	}
	code, header, body := e.code, e.header, e.body
	e.mu.Unlock()
	for k, v := range header {
		w.Header()[k] = v
	}
	w.WriteHeader(code)
	_, _ = w.Write(body)
}

func (c *cache) scrape(r *http.Request) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	c.next.ServeHTTP(rec, r)
	return rec
}

// fingerprint digests what stackd's own metrics show: the observer's
// events, every stack's version, the scheduler's, the config's and the
// cluster's status, and the counts of pull requests and review stacks. Equal fingerprints mean equal metrics of stackd's.
// It is made at every scrape, so without allocating per stack.
func (m *Metrics) fingerprint() uint64 {
	h := fnvUint(fnvOffset, m.events.Load())
	ref := m.api.Load()
	if ref == nil {
		return h
	}
	for _, sv := range ref.StackVersions() {
		h = fnvUint(fnvString(fnvString(h, sv.Name), sv.Holder), sv.Version)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	_ = enc.Encode(ref.Stats())
	_ = enc.Encode(ref.ConfigStatus())
	if cs, ok := ref.ClusterStatus(); ok {
		_ = enc.Encode(cs)
	}
	if byState, reviews, ok := m.pullRequestGauges(); ok {
		_ = enc.Encode(byState) // maps encode sorted
		_ = enc.Encode(reviews)
	}
	return fnvString(h, buf.String())
}

// FNV-1a, 64 bits (as hash/fnv's New64a), on strings and integers.
const fnvOffset, fnvPrime = 14695981039346656037, 1099511628211

// fnvString digests s, then a NUL that ends it.
func fnvString(h uint64, s string) uint64 {
	for i := range len(s) {
		h = (h ^ uint64(s[i])) * fnvPrime
	}
	return h * fnvPrime // ^ 0
}

func fnvUint(h, v uint64) uint64 {
	for range 8 {
		h = (h ^ v&0xff) * fnvPrime
		v >>= 8
	}
	return h
}
