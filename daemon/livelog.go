package daemon

import (
	"bytes"
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
