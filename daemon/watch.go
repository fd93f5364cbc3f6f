package daemon

import (
	"context"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/stackd/stackd/daemon/spec"
)

// reloadDebounce gathers the burst of events one save makes (write temp,
// rename, chmod; or Kubernetes' ..data symlink swap) into one reload.
const reloadDebounce = 300 * time.Millisecond

// watchConfig reloads the config whenever something changes in the
// directories that hold it, until ctx ends. Directories, not files, are
// watched: an editor's rename-over save and a symlink swap replace the
// file, and a watch on the old file would see nothing after.
func (d *Daemon) watchConfig(ctx context.Context) error {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watch config: %w", err)
	}
	var paths []string
	for _, s := range d.opts.Sources {
		if s.Git == nil {
			paths = append(paths, s.Path)
		}
	}
	if len(paths) == 0 {
		w.Close()
		return nil
	}
	dirs, err := configDirs(paths)
	if err != nil {
		w.Close()
		return err
	}
	for _, dir := range dirs {
		if err := w.Add(dir); err != nil {
			w.Close()
			return fmt.Errorf("watch config dir %s: %w", dir, err)
		}
	}
	d.loopWG.Add(1)
	go func() {
		defer d.loopWG.Done()
		defer w.Close()
		d.watchLoop(ctx, w)
	}()
	return nil
}

func (d *Daemon) watchLoop(ctx context.Context, w *fsnotify.Watcher) {
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
				addIfDir(w, ev.Name) // a new subdirectory of a config tree
			}
			fire = time.After(reloadDebounce)
		case err, ok := <-w.Errors:
			if !ok {
				return
			}
			d.log.Warn("config watch error", "err", err)
		case <-fire:
			fire = nil
			_ = d.reloadConfig("watch", 0) // logged and recorded in ConfigStatus
		}
	}
}

func addIfDir(w *fsnotify.Watcher, path string) {
	if fi, err := os.Stat(path); err == nil && fi.IsDir() && !strings.HasPrefix(filepath.Base(path), ".") {
		_ = w.Add(path)
	}
}

// configDirs lists the directories to watch for paths: a file's
// directory, and a directory with every non-hidden directory below it.
func configDirs(paths []string) ([]string, error) {
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
			return nil, fmt.Errorf("watch config: %w", err)
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
			return nil, fmt.Errorf("watch config: %w", err)
		}
	}
	return out, nil
}

// massRemoval says why applying next would remove too many of cur's
// stacks: all of them or more than half, in all or in one source (a Git
// directory emptied by a commit is one source of several). Empty means it
// may go ahead.
func massRemoval(cur, next *spec.Config) string {
	if cur == nil || len(cur.Stacks) == 0 {
		return ""
	}
	total, removed := map[string]int{}, map[string]int{}
	for _, s := range cur.Stacks {
		total[s.Source]++
		if next.Stack(s.Name) == nil {
			removed[s.Source]++
		}
	}
	all := 0
	for _, n := range removed {
		all += n
	}
	if tooMany(all, len(cur.Stacks)) {
		return fmt.Sprintf("the new config removes %d of the %d stacks; refusing it as a safeguard against an emptied or truncated config (allow it once with stackd reload --allow-removal %d, or start with --allow-mass-removal)", all, len(cur.Stacks), all)
	}
	for _, src := range slices.Sorted(maps.Keys(removed)) {
		if tooMany(removed[src], total[src]) {
			return fmt.Sprintf("the new config removes %d of the %d stacks of %s; refusing it as a safeguard against an emptied or truncated config (allow it once with stackd reload --allow-removal %d, or start with --allow-mass-removal)", removed[src], total[src], src, all)
		}
	}
	return ""
}

// removedCount is how many stacks of cur next lacks.
func removedCount(cur, next *spec.Config) int {
	n := 0
	for _, s := range cur.Stacks {
		if next.Stack(s.Name) == nil {
			n++
		}
	}
	return n
}

func tooMany(removed, of int) bool {
	return removed > 0 && (removed == of || removed*2 > of)
}
