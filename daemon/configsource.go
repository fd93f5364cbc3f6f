package daemon

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/stackd/stackd/daemon/model"
	"github.com/stackd/stackd/daemon/spec"
)

// DefaultSourcePoll is how often Git config sources are polled.
const DefaultSourcePoll = time.Minute

// sourceState is one config source as the daemon follows it. Its fields
// are guarded by Daemon.mu; fetches and reloads run without it.
type sourceState struct {
	spec.Source
	name string // Source.String()

	// The Git source's newest fetched commit and the project directory
	// of its checkout; empty until a fetch succeeded.
	latest, latestDir string
	// The commit in force and its checkout.
	applied, appliedDir string
	appliedAt           time.Time
	lastPoll, nextPoll  time.Time
	fetchErr            error
	// configErr holds the problems of the last reload found in this
	// source's files.
	configErr string
}

func newSourceStates(srcs []spec.Source) []*sourceState {
	out := make([]*sourceState, len(srcs))
	for i, s := range srcs {
		out[i] = &sourceState{Source: s, name: s.String()}
	}
	return out
}

// key names the source's checkouts and its store metadata.
func (s *sourceState) key() string {
	sum := sha256.Sum256([]byte(s.name))
	return hex.EncodeToString(sum[:6])
}

// shown is how the files of a Git source are named in diagnostics: the
// repository, "//", and their path inside it.
func (s *sourceState) shown() string {
	return s.Git.URL + "//" + s.Git.Path
}

func (d *Daemon) hasGitSources() bool {
	for _, s := range d.sources {
		if s.Git != nil {
			return true
		}
	}
	return false
}

// sourceDir is where the checkouts of a Git source live, one per commit.
func (d *Daemon) sourceDir(s *sourceState) string {
	return filepath.Join(d.opts.DataDir, "config", s.key())
}

func (d *Daemon) sourceGit(s *sourceState) model.GitSource {
	src := model.GitSource{URL: s.Git.URL, Ref: s.Git.Ref, Shallow: true, Auth: d.opts.SourceAuth}
	if s.Git.Pinned() {
		src.Ref = ""
	} else if src.Ref == "" {
		src.Ref = "HEAD"
	}
	return src
}

// fetchSource resolves s's ref and checks out the commit it names. It
// reports whether that commit is new.
func (d *Daemon) fetchSource(ctx context.Context, s *sourceState) bool {
	ctx, cancel := context.WithTimeout(ctx, d.opts.PollTimeout)
	defer cancel()
	src := d.sourceGit(s)
	start := time.Now()
	commit, err := s.Git.Ref, error(nil)
	if !s.Git.Pinned() {
		commit, err = d.opts.Fetcher.Resolve(ctx, src)
		d.opts.Observer.Polled(err, time.Since(start))
	}
	var dir string
	if err == nil {
		dir, err = d.checkoutSource(ctx, s, src, commit)
	}
	l := d.lock()
	defer l.unlock()
	s.lastPoll = time.Now()
	if err != nil {
		if s.fetchErr == nil {
			l.log.Warn("cannot fetch a config source; the config in force stays", "source", s.name, "err", err)
		}
		s.fetchErr = err
		return false
	}
	if s.fetchErr != nil {
		l.log.Info("config source is reachable again", "source", s.name)
	}
	s.fetchErr = nil
	changed := commit != s.latest
	if changed {
		l.log.Info("new config commit", "source", s.name, "commit", commit)
	}
	s.latest, s.latestDir = commit, dir
	return changed
}

// checkoutSource checks commit out into its own directory and returns
// the source's directory in it. The directory may not exist: a commit
// that deleted it holds no manifests.
func (d *Daemon) checkoutSource(ctx context.Context, s *sourceState, src model.GitSource, commit string) (string, error) {
	root, err := d.opts.Fetcher.Checkout(ctx, src, commit, filepath.Join(d.sourceDir(s), commit[:12]))
	if err != nil {
		return "", err
	}
	dir := filepath.Join(root, filepath.FromSlash(s.Git.Path))
	real, err := filepath.EvalSymlinks(dir)
	if errors.Is(err, os.ErrNotExist) {
		return dir, nil
	}
	if err != nil {
		return "", fmt.Errorf("config source %s: %w", s.name, err)
	}
	realRoot, err := filepath.EvalSymlinks(root)
	if err != nil {
		return "", fmt.Errorf("config source %s: %w", s.name, err)
	}
	if real != realRoot && !strings.HasPrefix(real, realRoot+string(filepath.Separator)) {
		return "", fmt.Errorf("config source %s: %s leads out of the repository", s.name, s.Git.Path)
	}
	return dir, nil
}

// pollSources fetches the Git sources that are due (all of them when
// force is set) and reports whether one has a new commit.
func (d *Daemon) pollSources(ctx context.Context, force bool) bool {
	changed := false
	for _, s := range d.sources {
		if s.Git == nil {
			continue
		}
		l := d.lock()
		due := force || !time.Now().Before(s.nextPoll)
		if s.Git.Pinned() && s.latest != "" {
			due = false // a commit never moves
		}
		if due {
			s.nextPoll = time.Now().Add(l.opts.SourcePoll)
		}
		l.unlock()
		if due && d.fetchSource(ctx, s) {
			changed = true
		}
	}
	return changed
}

// untilSourcePoll is how long until the next Git source is due.
func (d *Daemon) untilSourcePoll() time.Duration {
	l := d.lock()
	defer l.unlock()
	next := l.opts.SourcePoll
	for _, s := range l.sources {
		if s.Git != nil && !(s.Git.Pinned() && s.latest != "") {
			next = min(next, time.Until(s.nextPoll))
		}
	}
	return max(next, 10*time.Millisecond)
}

// watchSources polls the Git sources and applies a new commit, until ctx
// ends. While no config is in force (a first fetch failed, or the first
// config was not valid) every poll tries again.
func (d *Daemon) watchSources(ctx context.Context) {
	defer d.loopWG.Done()
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-d.srcWake:
		case <-timer.C:
		}
		changed := d.pollSources(ctx, false)
		l := d.lock()
		loaded := l.cfg != nil
		l.unlock()
		if changed || !loaded {
			_ = d.reloadConfig("git", 0) // logged and recorded in ConfigStatus
		}
		timer.Reset(d.untilSourcePoll())
	}
}

// pushSources makes the Git config sources that follow branch of a
// repository in want poll now, and names them. A source following the
// default branch polls on any push to its repository.
func (d *Daemon) pushSources(want map[string]bool, branch string) []string {
	l := d.lock()
	defer l.unlock()
	var names []string
	for _, s := range l.sources {
		if s.Git == nil || s.Git.Pinned() || !want[spec.RepoKey(s.Git.URL)] {
			continue
		}
		if ref := strings.TrimPrefix(s.Git.Ref, "refs/heads/"); ref != "" && ref != branch {
			continue
		}
		l.opts.Fetcher.Forget(s.Git.URL)
		s.nextPoll = time.Time{}
		names = append(names, s.name)
	}
	if len(names) > 0 {
		select {
		case l.srcWake <- struct{}{}:
		default:
		}
	}
	return names
}

// appliedRecord is what the store keeps of a Git source in force.
type appliedRecord struct {
	Commit    string    `json:"commit"`
	AppliedAt time.Time `json:"appliedAt"`
}

func metaKey(s *sourceState) string { return "config-source:" + s.name }

// restoreSources finds the commits in force when the daemon last ran and
// their checkouts, so that a restart runs the same manifests even when
// the repository cannot be reached.
func (d *Daemon) restoreSources(ctx context.Context) {
	for _, s := range d.sources {
		if s.Git == nil {
			continue
		}
		data, err := d.opts.Store.Meta(metaKey(s))
		if err != nil {
			continue // never applied
		}
		var rec appliedRecord
		if err := json.Unmarshal(data, &rec); err != nil || !spec.IsFullSHA(rec.Commit) {
			d.log.Warn("ignoring an unreadable record of a config source", "source", s.name)
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, d.opts.PollTimeout)
		dir, err := d.checkoutSource(cctx, s, d.sourceGit(s), rec.Commit)
		cancel()
		l := d.lock()
		if err != nil {
			s.fetchErr = err
		} else {
			s.applied, s.appliedDir, s.appliedAt = rec.Commit, dir, rec.AppliedAt
		}
		l.unlock()
	}
}

// fetchUnapplied fetches, before the first reload, the Git sources that
// have no commit in force, so that a reachable repository is applied at
// start. The others are polled as soon as the daemon runs.
func (d *Daemon) fetchUnapplied(ctx context.Context) {
	for _, s := range d.sources {
		l := d.lock()
		need := s.Git != nil && s.applied == ""
		l.unlock()
		if need {
			d.fetchSource(ctx, s)
		}
	}
}

// inputs lists what a reload reads: each local path, and each Git
// source's newest checkout (or the one in force when no fetch succeeded
// since the start).
func (d locked) inputs() ([]spec.Input, []model.RevisionSource, error) {
	var inputs []spec.Input
	var revs []model.RevisionSource
	for _, s := range d.sources {
		if s.Git == nil {
			inputs = append(inputs, spec.Input{Source: s.name, Path: s.Path, MaxBytes: s.MaxBytes, HostPaths: d.opts.HostPaths})
			revs = append(revs, model.RevisionSource{Source: s.name})
			continue
		}
		commit, dir := s.latest, s.latestDir
		if commit == "" {
			commit, dir = s.applied, s.appliedDir
		}
		if commit == "" {
			why := "not fetched yet"
			if s.fetchErr != nil {
				why = s.fetchErr.Error()
			}
			return nil, nil, fmt.Errorf("config source %s: %s", s.name, why)
		}
		inputs = append(inputs, spec.Input{Source: s.name, Path: dir, Shown: s.shown(), EmptyOK: true,
			Root: filepath.Join(d.sourceDir(s), commit[:12]), MaxBytes: s.MaxBytes, HostPaths: d.opts.HostPaths})
		revs = append(revs, model.RevisionSource{Source: s.name, Commit: commit})
	}
	return inputs, revs, nil
}

// markApplied records that revs are in force, and returns the Git
// sources whose commit in force changed.
func (d locked) markApplied(revs []model.RevisionSource, now time.Time) []*sourceState {
	var moved []*sourceState
	for i, s := range d.sources {
		s.configErr = ""
		if s.Git == nil {
			s.appliedAt = now
			continue
		}
		if revs[i].Commit != s.applied {
			s.applied, s.appliedAt = revs[i].Commit, now
			moved = append(moved, s)
		}
		if s.applied == s.latest {
			s.appliedDir = s.latestDir
		}
	}
	return moved
}

// persistApplied keeps the commits in force of moved across restarts and
// removes the checkouts no longer needed.
func (d *Daemon) persistApplied(moved []*sourceState) {
	for _, s := range moved {
		l := d.lock()
		rec := appliedRecord{Commit: s.applied, AppliedAt: s.appliedAt}
		keep := map[string]bool{model.ShortCommit(s.applied): true, model.ShortCommit(s.latest): true}
		l.unlock()
		data, _ := json.Marshal(rec)
		if err := d.opts.Store.PutMeta(metaKey(s), data); err != nil {
			d.log.Error("cannot record the commit in force of a config source", "source", s.name, "err", err)
		}
		d.pruneCheckouts(s, keep)
	}
}

// pruneCheckouts removes the source's checkouts of other commits than
// those in keep. Only commit-named entries go: a checkout in progress
// works in a "<commit>.tmp-*" sibling.
func (d *Daemon) pruneCheckouts(s *sourceState, keep map[string]bool) {
	entries, _ := os.ReadDir(d.sourceDir(s))
	for _, e := range entries {
		if name := e.Name(); len(name) == 12 && !keep[name] && isHex(name) {
			if err := os.RemoveAll(filepath.Join(d.sourceDir(s), name)); err != nil {
				d.log.Warn("cannot remove an old config checkout", "source", s.name, "err", err)
			}
		}
	}
}

func isHex(s string) bool {
	for _, r := range s {
		if !strings.ContainsRune("0123456789abcdef", r) {
			return false
		}
	}
	return true
}

// attribute gives each source the lines of a reload error found in
// its files. An error no source's files show (a source that cannot be
// read) goes to the Git sources whose new commit was being applied.
func (d locked) attribute(err error) {
	lines := strings.Split(err.Error(), "\n")
	found := false
	for _, s := range d.sources {
		prefix := s.Path
		if s.Git != nil {
			prefix = s.shown()
		}
		var mine []string
		for _, l := range lines {
			if strings.HasPrefix(l, prefix) || strings.Contains(l, s.name) {
				mine = append(mine, l)
			}
		}
		s.configErr = strings.Join(mine, "\n")
		found = found || len(mine) > 0
	}
	if found {
		return
	}
	for _, s := range d.sources {
		if s.Git != nil && s.latest != s.applied {
			s.configErr = err.Error()
		}
	}
}
