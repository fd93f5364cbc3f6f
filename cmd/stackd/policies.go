package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/stackd/stackd/daemon"
	"github.com/stackd/stackd/daemon/spec"
	"github.com/stackd/stackd/gitwatch"
	"github.com/stackd/stackd/policy"
)

// policyFlags name the Rego policies that judge every preview.
type policyFlags struct {
	policy string
}

func (f *policyFlags) define(fs *flag.FlagSet) {
	fs.StringVar(&f.policy, "policy", "", "policy `source`: a directory of Rego policies that judge every preview before an up and every pull request's preview (reloaded when it changes), or a Git directory git+URL//PATH?ref=REF (polled as --config's)")
}

// openPolicies loads the --policy set and keeps it current, until stop
// is called; nil without --policy. A local directory must load at start,
// as the config must, and is watched (with --watch-config). A Git
// directory is polled (policySource).
func openPolicies(f *runFlags, auth *daemon.GitAuth, dataDir string, log *slog.Logger) (_ daemon.Policies, stop func(), err error) {
	stop = func() {}
	if f.policy == "" {
		return nil, stop, nil
	}
	src, err := spec.ParseSource(f.policy)
	if err != nil {
		return nil, nil, usageErrorf("run: --policy: %v", err)
	}
	live := policy.NewLive(src.String(), log.With("component", "policy"))
	ctx, cancel := context.WithCancel(context.Background())
	if src.Git != nil {
		done := startPolicySource(ctx, f, src, auth, dataDir, live, log)
		return live, func() { cancel(); <-done }, nil
	}
	if err := live.Load(ctx, src.Path, "", ""); err != nil {
		cancel()
		return nil, nil, fmt.Errorf("--policy: %w", err)
	}
	if !f.watchConfig {
		return live, cancel, nil
	}
	done, err := live.Watch(ctx, src.Path)
	if err != nil {
		cancel()
		return nil, nil, err
	}
	return live, func() { cancel(); <-done }, nil
}

// policySource follows a Git policy directory: it polls the ref every
// --config-poll-interval, with the Git sources' credentials, checks each
// new commit out under <data-dir>/policy/ and loads it. A commit whose
// policies do not compile leaves the commit before in force; until a
// first commit loads, every change is denied.
type policySource struct {
	git     spec.GitDir
	fetcher daemon.Fetcher
	auth    *daemon.GitAuth
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
func startPolicySource(ctx context.Context, f *runFlags, src spec.Source, auth *daemon.GitAuth, dataDir string, live *policy.Live, log *slog.Logger) <-chan struct{} {
	p := &policySource{git: *src.Git, auth: auth, dir: filepath.Join(dataDir, "policy"), live: live,
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
				p.poll(ctx)
			}
		}
	}()
	return done
}

// poll resolves the ref and loads a new commit.
func (p *policySource) poll(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 2*p.timeout+time.Minute)
	defer cancel()
	src := daemon.GitSource{URL: p.git.URL, Ref: p.git.Ref, RepoDir: p.git.Path, Shallow: true, Auth: p.auth}
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
