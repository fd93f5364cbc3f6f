package auth

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"
)

// reloadDebounce gathers the burst of events one save makes (write temp,
// rename, chmod; or Kubernetes' ..data symlink swap) into one reload.
const reloadDebounce = 300 * time.Millisecond

// Watch reloads the roles file whenever something changes in its
// directory, until ctx ends: the directory, not the file, since an
// editor's rename-over save and a mounted ConfigMap's symlink swap
// replace the file. After each reload that changed the policy or failed,
// reloaded (if not nil) is told the outcome (nil: applied), for status
// and metrics; a failed one leaves the policy in force. Watch returns
// once the watch is set up; done is closed when it has ended. Without a
// roles file it does nothing.
func (a *Access) Watch(ctx context.Context, reloaded func(error)) (done <-chan struct{}, err error) {
	ch := make(chan struct{})
	if a.file == "" {
		close(ch)
		return ch, nil
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, fmt.Errorf("watch roles file: %w", err)
	}
	dir, err := filepath.Abs(filepath.Dir(a.file))
	if err == nil {
		err = w.Add(dir)
	}
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("watch roles file: %w", err)
	}
	go func() {
		defer close(ch)
		defer w.Close()
		a.watchLoop(ctx, w, reloaded)
	}()
	return ch, nil
}

func (a *Access) watchLoop(ctx context.Context, w *fsnotify.Watcher, reloaded func(error)) {
	var fire <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case _, ok := <-w.Events:
			if !ok {
				return
			}
			fire = time.After(reloadDebounce)
		case err, ok := <-w.Errors:
			if !ok {
				return
			}
			a.log.Warn("roles file watch error", "err", err)
		case <-fire:
			fire = nil
			if changed, err := a.Reload(); (changed || err != nil) && reloaded != nil {
				reloaded(err)
			}
		}
	}
}
