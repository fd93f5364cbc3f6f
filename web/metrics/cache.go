package metrics

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"hash/fnv"
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
// than maxAge old, so that the process's own gauges stay fresh.
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
	mu          sync.Mutex // held while the scrape is made
	fingerprint uint64
	at          time.Time
	code        int
	header      http.Header
	body        []byte
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
	if e.body == nil || e.fingerprint != fp || time.Since(e.at) > maxAge {
		rec := httptest.NewRecorder()
		c.next.ServeHTTP(rec, r)
		e.fingerprint, e.at, e.code, e.header, e.body = fp, time.Now(), rec.Code, rec.Header().Clone(), rec.Body.Bytes()
	}
	code, header, body := e.code, e.header, e.body
	e.mu.Unlock()
	for k, v := range header {
		w.Header()[k] = v
	}
	w.WriteHeader(code)
	_, _ = w.Write(body)
}

// fingerprint digests what stackd's own metrics show: the observer's
// events, every stack's version, the scheduler's, the config's and the
// cluster's status, and the counts of pull requests and review stacks. Equal fingerprints mean equal metrics of stackd's.
func (m *Metrics) fingerprint() uint64 {
	h := fnv.New64a()
	_ = binary.Write(h, binary.LittleEndian, m.events.Load())
	ref := m.api.Load()
	if ref == nil {
		return h.Sum64()
	}
	for _, sv := range ref.StackVersions() {
		h.Write([]byte(sv.Name))
		h.Write([]byte{0})
		h.Write([]byte(sv.Holder))
		_ = binary.Write(h, binary.LittleEndian, sv.Version)
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
	h.Write(buf.Bytes())
	return h.Sum64()
}
