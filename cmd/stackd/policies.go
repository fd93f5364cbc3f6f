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
	fs.StringVar(&f.policy, "policy", "", "`directory` of Rego policies that judge every preview before an up (reloaded when it changes)")
}

// openPolicies loads the --policy set and keeps it current; nil without
// --policy. A local directory must load at start, as the config must, and
// is watched.
func openPolicies(ctx context.Context, f *runFlags, log *slog.Logger) (daemon.Policies, error) {
	if f.policy == "" {
		return nil, nil
	}
	src, err := spec.ParseSource(f.policy)
	if err != nil {
		return nil, usageErrorf("run: --policy: %v", err)
	}
	live := policy.NewLive(src.String(), log.With("component", "policy"))
	if src.Git != nil {
		return nil, usageErrorf("run: --policy: give a directory")
	}
	if err := live.Load(ctx, src.Path, "", ""); err != nil {
		return nil, fmt.Errorf("--policy: %w", err)
	}
	if f.watchConfig {
		if _, err := live.Watch(ctx, src.Path); err != nil {
			return nil, err
		}
	}
	return live, nil
}
