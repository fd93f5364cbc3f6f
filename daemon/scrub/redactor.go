package scrub

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
)

// Redactor scrubs a set of secret values from text: the daemon holds one
// with every secret it knows, whichever stack or part of the daemon it
// belongs to, and passes everything it stores, serves, logs or sends
// through it. Secrets are only ever added: a value rotated away may still
// be found in a program's output or a backend's state.
//
// Each value is scrubbed as written, line by line when it has several,
// JSON-escaped, URL-escaped and in base64; values shorter than MinLen,
// and those that the mask itself holds, are not. Clean also masks the
// credentials of URLs (see URLs) and every JSON Web Token (see JWTs), and
// drops terminal escape sequences.
//
// A Redactor is safe for concurrent use: Add builds a new matcher and
// swaps it in, so that Clean never waits. A nil *Redactor scrubs URLs
// and escapes only.
type Redactor struct {
	// parent is scrubbed too (With).
	parent *Redactor
	m      atomic.Pointer[matcher]
	// version grows with every Add that brings a new value.
	version atomic.Uint64

	mu    sync.Mutex // serializes Add
	known map[string]bool
}

// NewRedactor returns a Redactor of secrets.
func NewRedactor(secrets ...string) *Redactor {
	r := &Redactor{known: map[string]bool{}}
	r.Add(secrets...)
	return r
}

// With returns a Redactor that scrubs r's secrets (those added to r later
// too) and extra ones, which r does not learn: the values of work whose
// inputs are not trusted to be secrets, such as the preview of a pull
// request, are scrubbed from that work's output only.
func (r *Redactor) With(extra ...string) *Redactor {
	c := NewRedactor(extra...)
	c.parent = r
	return c
}

// Add adds secrets to the set; it reports whether one was new.
func (r *Redactor) Add(secrets ...string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	added := false
	for _, s := range secrets {
		for _, f := range forms(s) {
			if !r.known[f] {
				r.known[f] = true
				added = true
			}
		}
	}
	if added {
		patterns := make([]string, 0, len(r.known))
		for f := range r.known {
			patterns = append(patterns, f)
		}
		r.m.Store(newMatcher(patterns))
		r.version.Add(1)
	}
	return added
}

// Len counts the forms scrubbed (not those of a parent).
func (r *Redactor) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.known)
}

// Version grows whenever Add brings a new secret (to r or a parent):
// what was cleaned at an older version may need another look.
func (r *Redactor) Version() uint64 {
	if r == nil {
		return 0
	}
	return r.version.Load() + r.parent.Version()
}

// forms are the texts s is scrubbed as: s trimmed, each of its lines,
// and their JSON-escaped, URL-escaped and base64 forms.
func forms(s string) []string {
	var parts []string
	for _, p := range append([]string{s}, strings.Split(s, "\n")...) {
		if p = strings.TrimSpace(p); len(p) >= MinLen && !strings.Contains(Mask, p) {
			parts = append(parts, p)
		}
	}
	out := slices.Clone(parts)
	for _, p := range parts {
		for _, f := range []string{jsonEscaped(p, false), jsonEscaped(p, true), url.QueryEscape(p), url.PathEscape(p),
			base64.StdEncoding.EncodeToString([]byte(p))} {
			if !strings.Contains(Mask, f) {
				out = append(out, f)
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// jsonEscaped is s as it appears inside a JSON string.
func jsonEscaped(s string, escapeHTML bool) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(escapeHTML)
	_ = enc.Encode(s)
	return string(bytes.TrimSuffix(b.Bytes(), []byte("\"\n"))[1:])
}

// Clean drops terminal escapes from text and masks every secret and
// every URL credential and JSON Web Token in it. Clean(Clean(t)) ==
// Clean(t).
func (r *Redactor) Clean(text string) string {
	if strings.IndexByte(text, 0x1b) >= 0 {
		text = ansiEscape.ReplaceAllString(text, "")
	}
	return URLs(JWTs(r.secrets(text)))
}

// secrets masks r's secrets and its parents'.
func (r *Redactor) secrets(text string) string {
	for ; r != nil; r = r.parent {
		text = r.m.Load().replace(text, Mask)
	}
	return text
}

// longest is the length of the longest form r scrubs.
func (r *Redactor) longest() int {
	n := 0
	for ; r != nil; r = r.parent {
		if m := r.m.Load(); m != nil {
			n = max(n, m.maxLen)
		}
	}
	return n
}

// Bytes is Clean for a byte slice; it returns b itself when nothing
// changed.
func (r *Redactor) Bytes(b []byte) []byte {
	s := string(b)
	if c := r.Clean(s); c != s {
		return []byte(c)
	}
	return b
}

// JSON cleans every string of a JSON value (see the function JSON). A
// value that holds nothing to clean is returned as it is.
func (r *Redactor) JSON(raw json.RawMessage) json.RawMessage {
	s := string(raw)
	if r.Clean(s) == s && !strings.Contains(s, `\u001b`) && !strings.Contains(s, "://") {
		return raw
	}
	return JSON(raw, r.Clean)
}

// Writer returns a Writer to w that cleans with r.
func (r *Redactor) Writer(w io.Writer) *Writer {
	return &Writer{w: w, r: r}
}
