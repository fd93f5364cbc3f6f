package daemon

import (
	"context"
	"fmt"

	"github.com/stackd/stackd/daemon/dirwatch"
)

// watchConfig reloads the config whenever something changes in the
// directories that hold it, until ctx ends (see dirwatch.Watch).
func (d *Daemon) watchConfig(ctx context.Context) error {
	var paths []string
	for _, s := range d.opts.Sources {
		if s.Git == nil {
			paths = append(paths, s.Path)
		}
	}
	if len(paths) == 0 {
		return nil
	}
	dirs, err := dirwatch.Tree(paths...)
	if err != nil {
		return fmt.Errorf("watch config: %w", err)
	}
	done, err := dirwatch.Watch(ctx, dirs,
		func() { _ = d.reloadConfig("watch", 0) }, // logged and recorded in ConfigStatus
		func(err error) { d.log.Warn("config watch error", "err", err) })
	if err != nil {
		return fmt.Errorf("watch config: %w", err)
	}
	d.loopWG.Add(1)
	go func() {
		defer d.loopWG.Done()
		<-done
	}()
	return nil
}
