package daemon

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"
)

// Observer is told what happens, for metrics; web implements it with
// Prometheus. Its methods must not block.
type Observer interface {
	// UpdateFinished reports a finished update (its type, state, start
	// and end).
	UpdateFinished(u Update)
	// Polled reports one branch resolution.
	Polled(err error, took time.Duration)
	// CommitApplied reports how long a new commit took from being seen to
	// being applied.
	CommitApplied(took time.Duration)
	// ConfigReloaded reports a reload attempt.
	ConfigReloaded(s ConfigStatus)
	// DriftChecked reports a drift check's outcome: a drift state.
	DriftChecked(state string)
}

type nopObserver struct{}

func (nopObserver) UpdateFinished(Update)       {}
func (nopObserver) Polled(error, time.Duration) {}
func (nopObserver) CommitApplied(time.Duration) {}
func (nopObserver) ConfigReloaded(ConfigStatus) {}
func (nopObserver) DriftChecked(string)         {}

// ConfigStatus is the outcome of the last config (re)load.
type ConfigStatus struct {
	Successful  bool      `json:"successful"`
	LastSuccess time.Time `json:"lastSuccess,omitzero"`
	LastAttempt time.Time `json:"lastAttempt,omitzero"`
	// Error says why the last attempt failed: the config's problems, one
	// per line, each naming file:line:column.
	Error string `json:"error,omitempty"`
}

// Stats are the scheduler's gauges.
type Stats struct {
	// Running counts operations in flight.
	Running int
	// Queued counts stacks that want to run but wait for a worker, a
	// prerequisite or a sync wave.
	Queued int
}

// ErrUnknownUpdate is returned for an update id that does not exist.
var ErrUnknownUpdate = errors.New("unknown update")

// Stats reports the scheduler's gauges.
func (d *Daemon) Stats() Stats {
	d.mu.Lock()
	defer d.mu.Unlock()
	s := Stats{Running: d.running}
	for _, st := range d.stacks {
		if !st.running && st.waiting {
			s.Queued++
		}
	}
	return s
}

// ConfigStatus reports the last config load.
func (d *Daemon) ConfigStatus() ConfigStatus {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.reload
}

// Reload reads the config again from Options.ConfigPaths and applies it.
// A config with errors is not applied: the one in force stays, and the
// error (every problem, one per line) is returned and kept in
// ConfigStatus.
func (d *Daemon) Reload() error {
	now := time.Now()
	cfg, _, err := Load(d.opts.ConfigPaths...) // err lists every problem
	if err != nil {
		err = fmt.Errorf("config not applied: %w", err)
	} else if d.unchanged(cfg) {
		d.log.Debug("config reloaded: nothing changed")
		return d.recordReload(now, nil)
	} else if why := d.guard(cfg); why != "" {
		err = fmt.Errorf("config not applied: %s", why)
	} else {
		err = d.Apply(cfg)
	}
	if err := d.recordReload(now, err); err != nil {
		d.log.Error("config reload failed; the previous config stays in force", "err", err)
		return err
	}
	d.log.Info("config reloaded", "stacks", len(cfg.Stacks))
	return nil
}

// unchanged says whether cfg means what the config in force means.
func (d *Daemon) unchanged(cfg *Config) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return fingerprint(cfg) == fingerprint(d.cfg)
}

// guard refuses a config that removes too many stacks, unless allowed.
func (d *Daemon) guard(cfg *Config) string {
	if d.opts.AllowMassRemoval {
		return ""
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return massRemoval(d.cfg, cfg)
}

// recordReload keeps the outcome of a reload in ConfigStatus and tells
// the observer; it returns err.
func (d *Daemon) recordReload(now time.Time, err error) error {
	d.mu.Lock()
	d.reload.LastAttempt, d.reload.Successful, d.reload.Error = now, err == nil, ""
	if err != nil {
		d.reload.Error = err.Error()
	} else {
		d.reload.LastSuccess = now
	}
	status := d.reload
	d.mu.Unlock()
	d.opts.Observer.ConfigReloaded(status)
	return err
}

// Updates lists a stack's updates, newest first (see Store.Updates).
func (d *Daemon) Updates(stack string, before uint64, limit int) ([]Update, error) {
	d.mu.Lock()
	_, known := d.stacks[stack]
	d.mu.Unlock()
	if !known {
		return nil, ErrUnknownStack
	}
	return d.opts.Store.Updates(stack, before, limit)
}

// Update returns one update.
func (d *Daemon) Update(id string) (Update, error) {
	u, err := d.opts.Store.Update(id)
	if err != nil {
		return Update{}, fmt.Errorf("%w: %s", ErrUnknownUpdate, id)
	}
	return u, nil
}

// Log returns an update's log: the live log while it runs (followers read
// it as it grows), else the stored one. Both are scrubbed of the secrets
// the daemon knows.
func (d *Daemon) Log(id string) ([]byte, *LiveLog, error) {
	u, err := d.Update(id)
	if err != nil {
		return nil, nil, err
	}
	d.mu.Lock()
	st := d.stacks[u.Stack]
	var live *LiveLog
	if st != nil && st.running && st.rec.Status.CurrentUpdate != nil && st.rec.Status.CurrentUpdate.Name == id {
		live = st.live
	}
	d.mu.Unlock()
	if live != nil {
		return nil, live, nil
	}
	log, err := d.opts.Store.Log(id)
	if err != nil {
		return nil, nil, nil // an update that wrote no log yet
	}
	return log, nil, nil
}

// Push reports a push to a repository's branch, as a webhook announces
// it: the stacks that track that branch of that repository poll it now.
// urls are the repository's URLs as the forge names them (clone, SSH,
// web). It returns the names of those stacks.
func (d *Daemon) Push(urls []string, branch string) []string {
	want := map[string]bool{}
	for _, u := range urls {
		want[repoKey(u)] = true
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	var names []string
	for _, name := range sortedKeys(d.stacks) {
		st := d.stacks[name]
		if !tracksBranch(st) || strings.TrimPrefix(st.stack.Spec.Branch, "refs/heads/") != branch {
			continue
		}
		src, err := d.gitSource(st.stack)
		if err != nil || !want[repoKey(src.URL)] {
			continue
		}
		d.opts.Fetcher.Forget(src.URL)
		st.nextPoll = time.Time{}
		names = append(names, name)
	}
	if len(names) > 0 {
		d.kick()
	}
	return names
}

// repoKey identifies a repository across the ways of writing its URL:
// scheme, user, letter case of the host, a ".git" suffix and a trailing
// slash do not matter; "git@host:path" is "host/path".
func repoKey(u string) string {
	u = strings.TrimSpace(u)
	if i := strings.Index(u, "://"); i >= 0 {
		if p, err := url.Parse(u); err == nil {
			u = strings.ToLower(p.Hostname()) + p.Path
		}
	} else if at := strings.Index(u, "@"); at >= 0 {
		if host, path, ok := strings.Cut(u[at+1:], ":"); ok {
			u = strings.ToLower(host) + "/" + path
		}
	}
	u = strings.TrimSuffix(strings.TrimSuffix(u, "/"), ".git")
	return strings.TrimSuffix(u, "/")
}
