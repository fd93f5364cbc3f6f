// Package dirwatch calls a function when files change below directories:
// the debounced watch that reloads the config, the roles file and the
// policies. It is the only importer of github.com/fsnotify/fsnotify.
package dirwatch

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"
)

// Debounce gathers the burst of events one save makes (write temp,
// rename, chmod; or Kubernetes' ..data symlink swap) into one call.
const Debounce = 300 * time.Millisecond

// Watch calls changed once per burst of events in dirs, until ctx ends;
// a directory created in one of them is watched too, unless hidden
// (subdirectories already there are not: list them, see Tree). Errors
// of the watch go to watchErr. Directories, not files, are watched: an
// editor's rename-over save and a symlink swap replace the file, and a
// watch on the old file would see nothing after. Watch returns once the
// watch is set up; done is closed when it has ended.
func Watch(ctx context.Context, dirs []string, changed func(), watchErr func(error)) (done <-chan struct{}, err error) {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, err
	}
	for _, dir := range dirs {
		if err := w.Add(dir); err != nil {
			w.Close()
			return nil, fmt.Errorf("watch %s: %w", dir, err)
		}
	}
	ch := make(chan struct{})
	go func() {
		defer close(ch)
		defer w.Close()
		loop(ctx, w, changed, watchErr)
	}()
	return ch, nil
}

func loop(ctx context.Context, w *fsnotify.Watcher, changed func(), watchErr func(error)) {
	var fire <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-w.Events:
			if !ok {
				return
			}
			if ev.Op.Has(fsnotify.Create) {
				addIfDir(w, ev.Name)
			}
			fire = time.After(Debounce)
		case err, ok := <-w.Errors:
			if !ok {
				return
			}
			watchErr(err)
		case <-fire:
			fire = nil
			changed()
		}
	}
}

func addIfDir(w *fsnotify.Watcher, path string) {
	if fi, err := os.Stat(path); err == nil && fi.IsDir() && !strings.HasPrefix(filepath.Base(path), ".") {
		_ = w.Add(path)
	}
}

// Tree lists the directories to watch for paths: a file's directory, and
// a directory with every non-hidden directory below it. Paths are made
// absolute; each directory is listed once.
func Tree(paths ...string) ([]string, error) {
	seen := map[string]bool{}
	var out []string
	add := func(dir string) {
		if !seen[dir] {
			seen[dir] = true
			out = append(out, dir)
		}
	}
	for _, p := range paths {
		abs, err := filepath.Abs(p)
		if err != nil {
			return nil, err
		}
		fi, err := os.Stat(abs)
		if err != nil {
			return nil, err
		}
		if !fi.IsDir() {
			add(filepath.Dir(abs))
			continue
		}
		err = filepath.WalkDir(abs, func(path string, e fs.DirEntry, err error) error {
			switch {
			case err != nil:
				return err
			case !e.IsDir():
				return nil
			case path != abs && strings.HasPrefix(e.Name(), "."):
				return filepath.SkipDir
			}
			add(path)
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}
