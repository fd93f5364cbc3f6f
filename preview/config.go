package preview

import (
	"context"
	"fmt"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/stackd/stackd/daemon/model"
	"github.com/stackd/stackd/daemon/review"
	"github.com/stackd/stackd/daemon/spec"
)

// proposal is what a pull request to a Git config source proposes: the
// config with that source at the pull request's head, and the stacks of
// the source it adds or changes.
type proposal struct {
	cfg     *spec.Config
	changed []*spec.Stack
	added   map[string]bool
}

// proposedConfig loads the config as it would be after the merge of ev,
// for each Git config source that tracks ev's base branch of ev's
// repository and whose directory ev changes. It returns what each
// proposes, and the stacks removed. A config that does not load is an
// error that names the file, line and field, as a reload's would.
func (p *Previewer) proposedConfig(ctx context.Context, ev review.Event, files []string, cur *spec.Config) ([]proposal, []string, error) {
	inputs, err := p.opts.Daemon.ConfigInputs()
	if err != nil {
		return nil, nil, nil // no source to compare with: the stacks' own files still count
	}
	want := spec.RepoKeys(ev.URLs)
	var out []proposal
	var removed []string
	for i, in := range inputs {
		src, err := spec.ParseSource(in.Source)
		if err != nil || src.Git == nil || !want[spec.RepoKey(src.Git.URL)] ||
			strings.TrimPrefix(src.Git.Ref, "refs/heads/") != ev.BaseBranch || !underDir(files, src.Git.Path) {
			continue
		}
		next, err := p.loadAtHead(ctx, ev, inputs, i, src.Git)
		if err != nil {
			return nil, nil, err
		}
		changed, added, gone := review.ConfigChanges(cur, next, in.Source)
		out = append(out, proposal{cfg: next, changed: changed, added: added})
		removed = append(removed, gone...)
	}
	return out, removed, nil
}

// loadAtHead checks the source of inputs[i] out at ev's head and loads
// the config with it in place of the source's commit in force.
func (p *Previewer) loadAtHead(ctx context.Context, ev review.Event, inputs []spec.Input, i int, g *spec.GitDir) (*spec.Config, error) {
	root := filepath.Join(p.opts.DataDir, "previews", workDir(ev), "config")
	src := model.GitSource{URL: g.URL, Ref: ev.HeadRef(), Shallow: true, Auth: p.opts.SourceAuth}
	if _, err := p.opts.Fetcher.Checkout(ctx, src, ev.HeadSHA, root); err != nil {
		return nil, fmt.Errorf("check the manifests out: %w", err)
	}
	in := slices.Clone(inputs)
	in[i].Path = filepath.Join(root, filepath.FromSlash(g.Path))
	in[i].Root = root
	cfg, _, err := spec.LoadInputs(in)
	if err != nil {
		return nil, fmt.Errorf("the manifests at %s do not load: %w", short(ev.HeadSHA), err)
	}
	return cfg, nil
}

// underDir says whether one of files lies in dir ("" is the root).
func underDir(files []string, dir string) bool {
	dir = strings.Trim(path.Clean("/"+dir), "/")
	if dir == "" {
		return len(files) > 0
	}
	return slices.ContainsFunc(files, func(f string) bool { return strings.HasPrefix(f, dir+"/") })
}
