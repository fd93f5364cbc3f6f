package daemon

import (
	"bytes"
	"regexp"
	"strings"
	"sync"
)

// liveLogLimit bounds what a LiveLog keeps: the head is dropped past it.
const liveLogLimit = 8 << 20

// LiveLog is the output of a running operation: written by the
// operation, read by any number of followers. It is already scrubbed of
// known secrets.
type LiveLog struct {
	mu      sync.Mutex
	buf     []byte
	dropped int64 // bytes dropped from the head
	closed  bool
	changed chan struct{} // closed and replaced on every write and on Close
}

// NewLiveLog returns an open, empty log.
func NewLiveLog() *LiveLog {
	return &LiveLog{changed: make(chan struct{})}
}

// Write appends p.
func (l *LiveLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	if over := len(l.buf) - liveLogLimit; over > 0 {
		l.buf = append(l.buf[:0], l.buf[over:]...)
		l.dropped += int64(over)
	}
	l.signal()
	return len(p), nil
}

// Close marks the log complete; followers see the end.
func (l *LiveLog) Close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.closed {
		l.closed = true
		l.signal()
	}
}

func (l *LiveLog) signal() {
	close(l.changed)
	l.changed = make(chan struct{})
}

// Bytes is a copy of what the log holds.
func (l *LiveLog) Bytes() []byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	return bytes.Clone(l.buf)
}

// Since returns the bytes after offset off (an absolute position in
// the log), the offset after them, whether the log is closed, and a
// channel closed at the next change.
func (l *LiveLog) Since(off int64) (data []byte, next int64, closed bool, changed <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	start := max(off-l.dropped, 0)
	if start > int64(len(l.buf)) {
		start = int64(len(l.buf))
	}
	return bytes.Clone(l.buf[start:]), l.dropped + int64(len(l.buf)), l.closed, l.changed
}

// scrubber writes lines to w with every secret replaced by "[secret]".
// It holds back a partial line until its end (or Close), so a secret
// split across writes is still caught.
type scrubber struct {
	w       interface{ Write([]byte) (int, error) }
	secrets []string
	partial []byte
}

func newScrubber(w interface{ Write([]byte) (int, error) }, secrets []string) *scrubber {
	return &scrubber{w: w, secrets: scrubList(secrets)}
}

// scrubList keeps the secrets worth scrubbing, each line of multi-line
// ones too, longest first so that no shorter one breaks a longer one.
func scrubList(secrets []string) []string {
	var out []string
	for _, s := range secrets {
		for _, part := range append([]string{s}, strings.Split(s, "\n")...) {
			part = strings.TrimSpace(part)
			if len(part) >= minSecretLen {
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

// maxPartial bounds the unfinished line a scrubber holds: output without
// newlines cannot grow the daemon's memory.
const maxPartial = 64 << 10

func (s *scrubber) Write(p []byte) (int, error) {
	s.partial = append(s.partial, p...)
	if i := bytes.LastIndexByte(s.partial, '\n'); i >= 0 {
		line := s.clean(string(s.partial[:i+1]))
		s.partial = append(s.partial[:0], s.partial[i+1:]...)
		if _, err := s.w.Write([]byte(line)); err != nil {
			return 0, err
		}
	}
	if len(s.partial) > maxPartial {
		// Cut the line: scrub it whole, and keep the tail that may hold
		// the start of a secret still to come.
		text := s.clean(string(s.partial))
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
func (s *scrubber) Close() {
	if len(s.partial) > 0 {
		_, _ = s.w.Write([]byte(s.clean(string(s.partial))))
		s.partial = nil
	}
}

// ansiEscape matches terminal colour and cursor sequences, which program
// output may hold whatever the CLI is told.
var ansiEscape = regexp.MustCompile("\x1b\\[[0-9;?]*[ -/]*[@-~]")

// clean replaces every secret in text, and drops terminal escapes.
func (s *scrubber) clean(text string) string {
	text = ansiEscape.ReplaceAllString(text, "")
	for _, secret := range s.secrets {
		text = strings.ReplaceAll(text, secret, "[secret]")
	}
	return text
}
