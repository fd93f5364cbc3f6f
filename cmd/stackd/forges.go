package main

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"github.com/stackd/stackd/daemon"
	"github.com/stackd/stackd/daemon/gate"
	"github.com/stackd/stackd/daemon/model"
	"github.com/stackd/stackd/daemon/review"
	"github.com/stackd/stackd/daemon/spec"
	"github.com/stackd/stackd/forge"
	"github.com/stackd/stackd/preview"
	"github.com/stackd/stackd/web"
)

// forgeFlags declare the forges that pull-request previews report to.
type forgeFlags struct {
	forges      stringsFlag // KIND=BASE_URL
	tokenFiles  stringsFlag // BASE_URL=FILE
	forkPRs     bool
	authors     stringsFlag
	externalURL string
	// reviewMax and reviewMaxPerRepo bound the review stacks.
	reviewMax, reviewMaxPerRepo int
	// resyncInterval is how often the open pull requests are checked on
	// their forges; 0: never.
	resyncInterval time.Duration
}

// knownForges are the forges known without --forge.
var knownForges = map[string]review.Kind{"https://github.com": review.GitHub, "https://gitlab.com": review.GitLab}

func (f *forgeFlags) define(fs *flag.FlagSet) {
	fs.Var(&f.forges, "forge", "`KIND=BASE_URL` of a forge whose pull requests are previewed: github, gitlab or gitea (repeatable; github.com and gitlab.com are known)")
	fs.Var(&f.tokenFiles, "forge-token-file", "`BASE_URL=FILE`: the file holding the API token of that forge (repeatable)")
	fs.BoolVar(&f.forkPRs, "preview-fork-prs", false, "preview pull requests from forks too: their authors' code then runs with the stacks' credentials")
	fs.Var(&f.authors, "preview-author", "only preview the pull requests of this forge user `NAME` (repeatable; default: every author)")
	fs.StringVar(&f.externalURL, "external-url", "", "stackd's `URL` as the forge's users reach it, for links from statuses and comments")
	fs.IntVar(&f.reviewMax, "review-stacks-max", 20, "at most `N` review stacks of pull requests at once, in all (0: no bound)")
	fs.IntVar(&f.reviewMaxPerRepo, "review-stacks-max-per-repo", 5, "at most `N` review stacks at once per forge repository (0: no bound)")
	fs.DurationVar(&f.resyncInterval, "preview-resync-interval", 10*time.Minute, "check the open pull requests on their forges at start and then every `DURATION`, to catch up with missed closings and pushes (0: never)")
}

// enabled says whether previews were asked for.
func (f *forgeFlags) enabled() bool { return len(f.forges) > 0 || len(f.tokenFiles) > 0 }

// build makes the forges, by the host of their repositories. Tokens are
// read from their files and never logged.
func (f *forgeFlags) build(log *slog.Logger) (review.Forges, error) {
	if f.reviewMax < 0 || f.reviewMaxPerRepo < 0 {
		return nil, errors.New("--review-stacks-max and --review-stacks-max-per-repo must not be negative")
	}
	if f.resyncInterval < 0 {
		return nil, fmt.Errorf("--preview-resync-interval %s: must not be negative (0 turns the check off)", f.resyncInterval)
	}
	tokens := map[string]string{}
	for _, v := range f.tokenFiles {
		base, file, ok := strings.Cut(v, "=")
		if !ok || base == "" || file == "" {
			return nil, fmt.Errorf("--forge-token-file %q: want BASE_URL=FILE", v)
		}
		tok, err := readSecretFile(file, "--forge-token-file")
		if err != nil {
			return nil, err
		}
		tokens[normalBase(base)] = tok
	}
	kinds := map[string]review.Kind{}
	for base, k := range knownForges {
		kinds[base] = k
	}
	for _, v := range f.forges {
		kind, base, ok := strings.Cut(v, "=")
		k, known := review.ParseKind(kind)
		if !ok || !known {
			return nil, fmt.Errorf("--forge %q: want KIND=BASE_URL with KIND github, gitlab or gitea", v)
		}
		if u, err := url.Parse(base); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			return nil, fmt.Errorf("--forge %q: the base URL must be an http(s) URL", v)
		}
		kinds[normalBase(base)] = k
	}
	for base := range tokens {
		if _, ok := kinds[base]; !ok {
			return nil, fmt.Errorf("--forge-token-file: no --forge is declared for %s", base)
		}
	}
	out := review.Forges{}
	for base, k := range kinds {
		fg, err := forge.New(forge.Config{Kind: k, BaseURL: base, Token: tokens[base]}, forge.Options{Logger: log})
		if err != nil {
			return nil, fmt.Errorf("--forge %s=%s: %w", k, base, err)
		}
		out[review.Host(base)] = fg
	}
	return out, nil
}

// normalBase is a base URL without a trailing slash.
func normalBase(base string) string { return strings.TrimRight(strings.TrimSpace(base), "/") }

// newPreviewer makes the previewer of pull requests, or nil when no
// forge was declared.
func newPreviewer(f *runFlags, d *daemon.Daemon, own daemon.Ownership, run daemon.Runner, fetcher daemon.Fetcher, st daemon.Store,
	auth *model.GitAuth, dataDir string, obs preview.Observer, notifier daemon.Notifier, log *slog.Logger, pol gate.Policies,
) (*preview.Previewer, error) {
	if !f.forgeFlags.enabled() {
		return nil, nil
	}
	forges, err := f.forgeFlags.build(log.With("component", "forge"))
	if err != nil {
		return nil, err
	}
	approval, err := spec.ParseApproval(f.approval)
	if err != nil {
		return nil, err
	}
	records, _ := st.(review.Store)  // the BoltDB store keeps the open pull requests
	shared, _ := st.(preview.Shared) // a cluster shares them among its replicas
	return preview.New(preview.Options{Node: nodeName(own), Daemon: d, Runner: run, Fetcher: fetcher, Store: st, Forges: forges,
		Approval: approval, DataDir: dataDir, UIURL: f.externalURL, ForkPRs: f.forkPRs, Authors: f.authors, SourceAuth: auth,
		ReviewBounds: review.Bounds{Total: f.reviewMax, PerRepo: f.reviewMaxPerRepo},
		Timeout:      f.opTimeout, Notifier: notifier, Observer: obs, Policies: pol, Records: records, Shared: shared,
		ResyncInterval: f.forgeFlags.resyncInterval, Logger: log.With("component", "preview")}), nil
}

// previewAPI is pv for the web server: a nil interface, not a nil
// pointer, when previews are off.
func previewAPI(pv *preview.Previewer) web.PreviewAPI {
	if pv == nil {
		return nil
	}
	return pv
}
