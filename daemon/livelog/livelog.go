// Package livelog keeps the output of a running operation for its
// followers.
package livelog

import (
	"bytes"
	"sync"
)

// limit bounds what a Log keeps: the head is dropped past it.
const limit = 8 << 20

// Log is the output of a running operation: written by the
// operation, read by any number of followers. It is already scrubbed of
// known secrets.
type Log struct {
	mu      sync.Mutex
	buf     []byte
	dropped int64 // bytes dropped from the head
	closed  bool
	changed chan struct{} // closed and replaced on every write and on Close
}

// New returns an open, empty log.
func New() *Log {
	return &Log{changed: make(chan struct{})}
}

// Write appends p.
func (l *Log) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.buf = append(l.buf, p...)
	if over := len(l.buf) - limit; over > 0 {
		l.buf = append(l.buf[:0], l.buf[over:]...)
		l.dropped += int64(over)
	}
	l.signal()
	return len(p), nil
}

// Close marks the log complete; followers see the end.
func (l *Log) Close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.closed {
		l.closed = true
		l.signal()
	}
}

func (l *Log) signal() {
	close(l.changed)
	l.changed = make(chan struct{})
}

// Bytes is a copy of what the log holds.
func (l *Log) Bytes() []byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	return bytes.Clone(l.buf)
}

// Since returns the bytes after offset off (an absolute position in
// the log), the offset after them, whether the log is closed, and a
// channel closed at the next change.
func (l *Log) Since(off int64) (data []byte, next int64, closed bool, changed <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	start := max(off-l.dropped, 0)
	if start > int64(len(l.buf)) {
		start = int64(len(l.buf))
	}
	return bytes.Clone(l.buf[start:]), l.dropped + int64(len(l.buf)), l.closed, l.changed
}
