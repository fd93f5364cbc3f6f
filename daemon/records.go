package daemon

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// ErrNotFound is returned (wrapped) by a Store for a stack, update or
// metadata key that does not exist.
var ErrNotFound = errors.New("not found")

// UpdateID is the ID of a stack's update: "<stack>-<seq>".
func UpdateID(stack string, seq uint64) string {
	return fmt.Sprintf("%s-%d", stack, seq)
}

// ParseUpdateID splits an update ID into its stack (everything before the
// last '-') and seq (the decimal after it). A malformed ID names no
// update: the error wraps ErrNotFound.
func ParseUpdateID(id string) (string, uint64, error) {
	i := strings.LastIndexByte(id, '-')
	if i > 0 {
		seq, err := strconv.ParseUint(id[i+1:], 10, 64)
		if err == nil && seq > 0 && UpdateID(id[:i], seq) == id {
			return id[:i], seq, nil
		}
	}
	return "", 0, fmt.Errorf("malformed update id: %w", ErrNotFound)
}

// TruncateLog keeps the tail of log within limit bytes (fewer if the cut
// falls inside a UTF-8 character), after a line
// "[… N bytes truncated …]\n". Every Store keeps logs this way.
func TruncateLog(log []byte, limit int) []byte {
	if len(log) <= limit {
		return log
	}
	tail := log[len(log)-limit:]
	for i := 1; i < utf8.UTFMax && len(tail) > 0 && !utf8.RuneStart(tail[0]); i++ {
		tail = tail[1:]
	}
	head := fmt.Sprintf("[… %d bytes truncated …]\n", len(log)-len(tail))
	out := make([]byte, 0, len(head)+len(tail))
	return append(append(out, head...), tail...)
}
