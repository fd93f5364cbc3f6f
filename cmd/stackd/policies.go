package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"

	"github.com/stackd/stackd/daemon"
	"github.com/stackd/stackd/daemon/spec"
	"github.com/stackd/stackd/policy"
)

// policyFlags name the Rego policies that judge every preview.
type policyFlags struct {
	policy string
}

func (f *policyFlags) define(fs *flag.FlagSet) {
	fs.StringVar(&f.policy, "policy", "", "`directory` of Rego policies that judge every preview before an up and every pull request's preview (reloaded when it changes)")
}

// openPolicies loads the --policy set and keeps it current; nil without
// --policy. A local directory must load at start, as the config must, and
// is watched (with --watch-config) until stop is called.
func openPolicies(f *runFlags, log *slog.Logger) (_ daemon.Policies, stop func(), err error) {
	stop = func() {}
	if f.policy == "" {
		return nil, stop, nil
	}
	src, err := spec.ParseSource(f.policy)
	if err != nil {
		return nil, nil, usageErrorf("run: --policy: %v", err)
	}
	if src.Git != nil {
		return nil, nil, usageErrorf("run: --policy: give a directory")
	}
	live := policy.NewLive(src.String(), log.With("component", "policy"))
	ctx, cancel := context.WithCancel(context.Background())
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
