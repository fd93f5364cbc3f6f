package policy

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/stackd/stackd/daemon/dirwatch"
	"github.com/stackd/stackd/daemon/model"
)

// Live is the policy set in force, reloaded when its files change. A load
// that fails keeps the set loaded before; before any set loaded, every
// evaluation fails, so that every change is denied (fail closed). Live
// implements gate.Policies (daemon/gate) and daemon.PolicyReporter.
type Live struct {
	log    *slog.Logger
	source string // the --policy value, shown in the status

	mu     sync.Mutex
	set    *Set
	status model.PolicyStatus
}

// NewLive returns a Live for source, with nothing loaded yet.
func NewLive(source string, log *slog.Logger) *Live {
	return &Live{log: log, source: source, status: model.PolicyStatus{Source: source, Policies: []string{}}}
}

// Evaluate judges in with the set in force.
func (l *Live) Evaluate(ctx context.Context, in model.PolicyInput) (model.PolicyVerdict, error) {
	l.mu.Lock()
	set, why := l.set, l.status.Error
	l.mu.Unlock()
	if set == nil {
		if why == "" {
			why = "not loaded yet"
		}
		return model.PolicyVerdict{}, fmt.Errorf("no policies are loaded from %s: %s", l.source, why)
	}
	return set.Evaluate(ctx, in)
}

// PolicyStatus is the outcome of the last load.
func (l *Live) PolicyStatus() model.PolicyStatus {
	l.mu.Lock()
	defer l.mu.Unlock()
	st := l.status
	st.Policies = append([]string{}, st.Policies...)
	return st
}

// Load loads the policies of dir (shown as shown in errors; "" is dir),
// the content of commit for a Git source. On success the set is in force;
// on failure the one before stays and the status says why.
func (l *Live) Load(ctx context.Context, dir, shown, commit string) error {
	set, err := Load(ctx, dir, shown)
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	l.status.LastAttempt = now
	if err != nil {
		l.status.Successful, l.status.Error = false, err.Error()
		l.log.Error("cannot load the policies; those loaded before stay in force", "source", l.source, "err", err)
		return err
	}
	l.set = set
	l.status = model.PolicyStatus{Source: l.source, Commit: commit, Policies: set.Names(),
		Successful: true, LastSuccess: now, LastAttempt: now}
	l.log.Info("policies loaded", "source", l.source, "policies", strings.Join(set.Names(), ","), "files", len(set.Files))
	return nil
}

// Failed records that the policies could not be read (a Git source that
// cannot be fetched): the set in force stays, the status says why.
func (l *Live) Failed(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.status.Error == "" {
		l.log.Warn("cannot read the policies; those loaded before stay in force", "source", l.source, "err", err)
	}
	l.status.LastAttempt, l.status.Successful, l.status.Error = time.Now(), false, err.Error()
}

// Watch reloads the policies of dir whenever something changes below it,
// until ctx ends. It returns once the watch is set up; done is closed
// when it has ended.
func (l *Live) Watch(ctx context.Context, dir string) (done <-chan struct{}, err error) {
	dirs, err := dirwatch.Tree(dir)
	if err == nil {
		done, err = dirwatch.Watch(ctx, dirs,
			func() { _ = l.Load(ctx, dir, "", "") }, // logged and shown in the status
			func(err error) { l.log.Warn("policy watch error", "err", err) })
	}
	if err != nil {
		return nil, fmt.Errorf("watch the policies: %w", err)
	}
	return done, nil
}
