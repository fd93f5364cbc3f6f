// Package scrub keeps secrets out of what stackd shows: it replaces known
// secret values and the credentials of URLs in update logs, messages,
// outputs and the daemon's own log, line by line or in JSON, and drops
// terminal escape sequences. The daemon holds one Redactor with every
// secret it knows, so that no stack's output shows another's secret.
// The records the daemon stores, serves and tells (a stack's status, an
// update, the config's status; records.go) are cleaned field by field.
package scrub

import (
	"bytes"
	"encoding/json"
	"io"
	"regexp"
)

// MinLen is the shortest value scrubbed: shorter ones would mangle
// output without protecting anything.
const MinLen = 4

// Writer writes lines to w cleaned by a Redactor (secrets replaced by
// "[secret]", URL credentials masked, terminal escapes dropped). It holds
// back a partial line until its end (or Close), so a secret split across
// writes is still caught. Secrets added to the Redactor while it writes
// are scrubbed from the lines that follow.
type Writer struct {
	w       io.Writer
	r       *Redactor
	partial []byte
}

// New scrubs secrets from what is written to w.
func New(w io.Writer, secrets []string) *Writer {
	return NewRedactor(secrets...).Writer(w)
}

// maxPartial bounds the unfinished line a Writer holds: output without
// newlines cannot grow the daemon's memory.
const maxPartial = 64 << 10

// Write scrubs whole lines through to the underlying writer.
func (s *Writer) Write(p []byte) (int, error) {
	s.partial = append(s.partial, p...)
	// Only the new bytes can end a line: no rescan of a long partial one.
	if j := bytes.LastIndexByte(p, '\n'); j >= 0 {
		i := len(s.partial) - len(p) + j
		line := s.Clean(string(s.partial[:i+1]))
		s.partial = append(s.partial[:0], s.partial[i+1:]...)
		if _, err := s.w.Write([]byte(line)); err != nil {
			return 0, err
		}
	}
	if len(s.partial) > maxPartial {
		// Cut the line: scrub it whole, and keep the tail that may hold
		// the start of a secret still to come.
		text := s.Clean(string(s.partial))
		keep := max(0, s.r.longest()-1)
		cut := max(0, len(text)-keep)
		s.partial = append(s.partial[:0], text[cut:]...)
		if _, err := s.w.Write([]byte(text[:cut])); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

// Close flushes a last partial line.
func (s *Writer) Close() {
	if len(s.partial) > 0 {
		_, _ = s.w.Write([]byte(s.Clean(string(s.partial))))
		s.partial = nil
	}
}

// ansiEscape matches terminal colour and cursor sequences, which program
// output may hold whatever the CLI is told.
var ansiEscape = regexp.MustCompile("\x1b\\[[0-9;?]*[ -/]*[@-~]")

// Clean cleans text with the Writer's Redactor.
func (s *Writer) Clean(text string) string {
	return s.r.Clean(text)
}

// JSON applies clean to every string of a JSON value, and to the
// text of every number and boolean, which becomes a string when clean
// changes it; the result is valid JSON. Invalid JSON is cleaned as text
// and returned as a JSON string, so that it can be stored and served.
func JSON(raw json.RawMessage, clean func(string) string) json.RawMessage {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		out, _ := json.Marshal(clean(string(raw)))
		return out
	}
	out, err := json.Marshal(scrubValue(v, clean))
	if err != nil {
		out, _ = json.Marshal(clean(string(raw)))
	}
	return out
}

// Value applies clean to every string of a decoded JSON value (maps,
// slices, strings, json.Number), as JSON does.
func Value(v any, clean func(string) string) any { return scrubValue(v, clean) }

func scrubValue(v any, clean func(string) string) any {
	switch t := v.(type) {
	case string:
		return clean(t)
	case json.Number:
		if c := clean(t.String()); c != t.String() {
			return c
		}
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, e := range t {
			out[clean(k)] = scrubValue(e, clean)
		}
		return out
	case []any:
		for i, e := range t {
			t[i] = scrubValue(e, clean)
		}
	}
	return v
}
