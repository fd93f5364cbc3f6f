package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/stackd/stackd/daemon"
	"github.com/stackd/stackd/daemon/gate"
	"github.com/stackd/stackd/daemon/model"
	"github.com/stackd/stackd/daemon/spec"
	"github.com/stackd/stackd/gitwatch"
	"github.com/stackd/stackd/policy"
	"github.com/stackd/stackd/web"
)

// policyFlags name the Rego policies that judge every preview.
type policyFlags struct {
	policy string
}

func (f *policyFlags) define(fs *flag.FlagSet) {
	fs.StringVar(&f.policy, "policy", "", "policy `source`: a directory of Rego policies that judge every preview before an up and every pull request's preview (reloaded when it changes), or a Git directory git+URL//PATH?ref=REF (polled as --config's)")
}

// policySetup is the --policy set in force and what keeps it current.
type policySetup struct {
	// policies is nil without --policy.
	policies gate.Policies
	// git is the Git source; nil for a directory or without --policy.
	git *policySource
	// stop ends the watch or the polling.
	stop func()
}

// openPolicies loads the --policy set and keeps it current, until stop
// is called. A local directory must load at start, as the config must,
// and is watched (with --watch-config). A Git directory is polled
// (policySource).
func openPolicies(f *runFlags, auth *model.GitAuth, dataDir string, log *slog.Logger) (*policySetup, error) {
	if f.policy == "" {
		return &policySetup{stop: func() {}}, nil
	}
	src, err := spec.ParseSource(f.policy)
	if err != nil {
		return nil, usageErrorf("run: --policy: %v", err)
	}
	live := policy.NewLive(src.String(), log.With("component", "policy"))
	ctx, cancel := context.WithCancel(context.Background())
	if src.Git != nil {
		ps, done := startPolicySource(ctx, f, src, auth, dataDir, live, log)
		return &policySetup{policies: live, git: ps, stop: func() { cancel(); <-done }}, nil
	}
	if err := live.Load(ctx, src.Path, "", ""); err != nil {
		cancel()
		return nil, fmt.Errorf("--policy: %w", err)
	}
	if !f.watchConfig {
		return &policySetup{policies: live, stop: cancel}, nil
	}
	done, err := live.Watch(ctx, src.Path)
	if err != nil {
		cancel()
		return nil, err
	}
	return &policySetup{policies: live, stop: func() { cancel(); <-done }}, nil
}

// api is d for the web server: a push webhook for the Git policy source's
// repository and branch makes it poll at once, as it does the config's
// Git sources.
func (p *policySetup) api(d *daemon.Daemon) web.API {
	if p.git == nil {
		return d
	}
	return policyPush{Daemon: d, src: p.git}
}

// policyPush is the daemon, with Push also waking the Git policy source.
// It embeds the *daemon.Daemon so that the web server finds every
// optional interface the daemon implements.
type policyPush struct {
	*daemon.Daemon
	src *policySource
}

func (p policyPush) Push(urls []string, branch string) model.PushResult {
	res := p.Daemon.Push(urls, branch)
	if p.src.push(spec.RepoKeys(urls), branch) {
		res.Sources = append(res.Sources, "--policy "+p.src.name)
	}
	return res
}

// policySource follows a Git policy directory: it polls the ref every
// --config-poll-interval, with the Git sources' credentials, checks each
// new commit out under <data-dir>/policy/ and loads it. A commit whose
// policies do not compile leaves the commit before in force; until a
// first commit loads, every change is denied.
type policySource struct {
	name    string // the --policy value
	git     spec.GitDir
	wake    chan struct{}
	fetcher daemon.Fetcher
	auth    *model.GitAuth
	dir     string
	live    *policy.Live
	log     *slog.Logger
	timeout time.Duration
	// tried is the last commit loaded or tried.
	tried string
}

// startPolicySource polls src until ctx ends; the returned channel is
// closed then. The first poll runs before it returns, so that a
// reachable repository's policies are in force at start.
func startPolicySource(ctx context.Context, f *runFlags, src spec.Source, auth *model.GitAuth, dataDir string, live *policy.Live, log *slog.Logger) (*policySource, <-chan struct{}) {
	p := &policySource{name: src.String(), git: *src.Git, wake: make(chan struct{}, 1), auth: auth, dir: filepath.Join(dataDir, "policy"), live: live,
		log: log.With("component", "policy"), timeout: f.gitTimeout,
		fetcher: gitwatch.New(f.withLimits(gitwatch.Options{Timeout: f.gitTimeout, Logger: log.With("component", "gitwatch")}))}
	p.poll(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(f.pollInterval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			case <-p.wake:
			}
			p.poll(ctx)
		}
	}()
	return p, done
}

// push makes the source poll now when it follows branch of a repository
// in want (any push to its repository when it follows the default
// branch), and reports whether it does.
func (p *policySource) push(want map[string]bool, branch string) bool {
	if p.git.Pinned() || !want[spec.RepoKey(p.git.URL)] {
		return false
	}
	if ref := strings.TrimPrefix(p.git.Ref, "refs/heads/"); ref != "" && ref != branch {
		return false
	}
	p.fetcher.Forget(p.git.URL)
	select {
	case p.wake <- struct{}{}:
	default:
	}
	return true
}

// poll resolves the ref and loads a new commit.
func (p *policySource) poll(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 2*p.timeout+time.Minute)
	defer cancel()
	src := model.GitSource{URL: p.git.URL, Ref: p.git.Ref, RepoDir: p.git.Path, Shallow: true, Auth: p.auth}
	commit := p.git.Ref
	if p.git.Pinned() {
		src.Ref = ""
	} else {
		if src.Ref == "" {
			src.Ref = "HEAD"
		}
		var err error
		if commit, err = p.fetcher.Resolve(ctx, src); err != nil {
			p.live.Failed(fmt.Errorf("resolve %s: %w", p.git.URL, err))
			p.tried = "" // loaded again once reachable, to clear the error
			return
		}
	}
	if commit == p.tried {
		return
	}
	dir, err := p.fetcher.Checkout(ctx, src, commit, filepath.Join(p.dir, commit[:12]))
	if err != nil {
		p.live.Failed(fmt.Errorf("check out %s at %s: %w", p.git.URL, commit, err))
		p.tried = ""
		return
	}
	p.tried = commit
	if err := p.live.Load(ctx, dir, p.git.URL+"//"+p.git.Path, commit); err == nil {
		p.prune(commit)
	}
}

// prune removes the checkouts of other commits than keep.
func (p *policySource) prune(keep string) {
	entries, _ := os.ReadDir(p.dir)
	for _, e := range entries {
		if e.Name() != keep[:12] {
			_ = os.RemoveAll(filepath.Join(p.dir, e.Name()))
		}
	}
}
