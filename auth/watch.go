package auth

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/stackd/stackd/daemon/dirwatch"
)

// Watch reloads the roles file whenever something changes in its
// directory, until ctx ends (see dirwatch.Watch). After each reload that
// changed the policy or failed, reloaded (if not nil) is told the
// outcome (nil: applied), for status and metrics; a failed one leaves
// the policy in force. Watch returns once the watch is set up; done is
// closed when it has ended. Without a roles file it does nothing.
func (a *Access) Watch(ctx context.Context, reloaded func(error)) (done <-chan struct{}, err error) {
	if a.file == "" {
		ch := make(chan struct{})
		close(ch)
		return ch, nil
	}
	dir, err := filepath.Abs(filepath.Dir(a.file))
	if err == nil {
		done, err = dirwatch.Watch(ctx, []string{dir}, func() {
			if changed, err := a.Reload(); (changed || err != nil) && reloaded != nil {
				reloaded(err)
			}
		}, func(err error) { a.log.Warn("roles file watch error", "err", err) })
	}
	if err != nil {
		return nil, fmt.Errorf("watch roles file: %w", err)
	}
	return done, nil
}
