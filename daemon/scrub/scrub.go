// Package scrub keeps secrets out of what stackd shows: it replaces known
// secret values in update logs, messages and outputs, line by line or in
// JSON, and drops terminal escape sequences.
package scrub

import (
	"bytes"
	"encoding/json"
	"io"
	"regexp"
	"strings"
)

// MinLen is the shortest value scrubbed: shorter ones would mangle
// output without protecting anything.
const MinLen = 4

// Writer writes lines to w with every secret replaced by "[secret]" and
// terminal escapes dropped. It holds back a partial line until its end
// (or Close), so a secret split across writes is still caught.
type Writer struct {
	w       io.Writer
	secrets []string
	partial []byte
}

// New scrubs secrets from what is written to w.
func New(w io.Writer, secrets []string) *Writer {
	return &Writer{w: w, secrets: list(secrets)}
}

// list keeps the secrets worth scrubbing, each line of multi-line
// ones too, longest first so that no shorter one breaks a longer one.
func list(secrets []string) []string {
	var out []string
	for _, s := range secrets {
		for _, part := range append([]string{s}, strings.Split(s, "\n")...) {
			part = strings.TrimSpace(part)
			if len(part) >= MinLen {
				out = append(out, part)
			}
		}
	}
	sortLongestFirst(out)
	return out
}

func sortLongestFirst(s []string) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && len(s[j]) > len(s[j-1]); j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
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
		keep := 0
		if len(s.secrets) > 0 {
			keep = len(s.secrets[0]) - 1 // the longest
		}
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

// Clean replaces every secret in text, and drops terminal escapes.
func (s *Writer) Clean(text string) string {
	text = ansiEscape.ReplaceAllString(text, "")
	for _, secret := range s.secrets {
		text = strings.ReplaceAll(text, secret, "[secret]")
	}
	return text
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
