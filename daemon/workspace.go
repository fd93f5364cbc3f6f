package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/stackd/stackd/daemon/spec"
	"github.com/stackd/stackd/model"
)

// prepared is a job's workspace, ready for the runner.
type prepared struct {
	ws     model.Workspace
	commit string
	// secrets are the values to scrub from the operation's log and
	// messages.
	secrets []string
	// destroy is what a later destroy of this stack needs, for stacks with
	// destroyOnFinalize.
	destroy *model.DestroySpec
	// pathsHash digests the checkout's files of spec.paths; empty when
	// every file counts.
	pathsHash string
	// commitInfo describes commit, when the checkout could.
	commitInfo *model.Commit
}

// prepare resolves the job's references and puts its program in place.
func (d *Daemon) prepare(ctx context.Context, j job) (*prepared, error) {
	if j.stack == nil {
		return d.prepareRemoved(ctx, j)
	}
	p := &prepared{commit: j.obs.Commit}
	refs := d.refSources(ctx, j, &p.secrets)
	dir, err := d.projectDir(ctx, j, refs, p)
	if err != nil {
		return nil, err
	}
	ws, secrets, err := stackWorkspace(j.cfg, j.stack, dir, refs)
	if err == nil {
		err = d.opts.HostPaths.CheckStackBackend(j.stack, ws.Backend, ws.Env)
	}
	if err != nil {
		return nil, &prepareError{model.ReasonSpecInvalid, err}
	}
	ws.WorkDir = d.stackDir(j.stack.Name)
	p.ws, p.secrets = ws, append(p.secrets, secrets...)
	if j.stack.Spec.DestroyOnFinalize && !j.stack.Spec.Preview {
		p.destroy = destroySpec(j.stack, dir)
	}
	return p, nil
}

// prepareRemoved builds the workspace of a stack that left the config
// from what its record kept; the source is not fetched again, so a
// destroy works after the repository is gone.
func (d *Daemon) prepareRemoved(ctx context.Context, j job) (*prepared, error) {
	ds := j.destroy
	if ds == nil && j.st.gone != nil {
		return d.prepareGone(ctx, j)
	}
	if ds == nil {
		return nil, &prepareError{model.ReasonSpecInvalid, errors.New("nothing is known about how to destroy this stack")}
	}
	if _, err := os.Stat(filepath.Join(ds.ProjectDir, "Pulumi.yaml")); err != nil {
		return nil, &prepareError{model.ReasonSourceUnavailable, fmt.Errorf("the stack's last project is gone: %w", err)}
	}
	s := &spec.Stack{Name: j.st.rec.Name, Dir: ds.ConfigDir, Spec: spec.StackSpec{Stack: ds.Stack, Backend: ds.Backend,
		SecretsProvider: ds.SecretsProvider, EnvRefs: ds.EnvRefs}}
	cfg := &spec.Config{}
	var outSecrets []string
	env, secrets, err := cfg.StackEnv(s, d.refSources(context.Background(), j, &outSecrets))
	if err == nil {
		// The record does not say whether the stack's config came from
		// Git, which was checked when it was applied; the daemon's own
		// paths stay out of reach whatever the record holds.
		err = d.opts.HostPaths.CheckStackBackend(s, ds.Backend, env)
	}
	if err != nil {
		return nil, &prepareError{model.ReasonSpecInvalid, err}
	}
	ws := model.Workspace{Name: s.Name, Stack: ds.Stack, ProjectDir: ds.ProjectDir, WorkDir: d.stackDir(s.Name), Backend: ds.Backend,
		SecretsProvider: ds.SecretsProvider, UseLocalStackOnly: true, Env: env, KeepConfig: true}
	return &prepared{ws: ws, secrets: append(secrets, outSecrets...)}, nil
}

// prepareGone prepares the destroy of a stack that left the config
// before stackd deployed it: its last spec, checked out at the commit its
// source points at, on a stack that must exist already.
func (d *Daemon) prepareGone(ctx context.Context, j job) (*prepared, error) {
	d.mu.Lock()
	g := &stackState{stack: j.st.gone, commit: j.st.commit}
	j.stack, j.cfg, j.obs.Commit = g.stack, j.st.goneCfg, d.commitOf(g)
	d.mu.Unlock()
	if j.obs.Commit == "" && tracksBranch(g) {
		src, err := d.stackGitSource(j.cfg, j.stack, d.opts.Refs)
		if err == nil {
			j.obs.Commit, err = d.opts.Fetcher.Resolve(ctx, src)
		}
		if err != nil {
			return nil, &prepareError{model.ReasonSourceUnavailable, err}
		}
	}
	p, err := d.prepare(ctx, j)
	if err == nil {
		p.ws.UseLocalStackOnly = true
	}
	return p, err
}

func destroySpec(s *spec.Stack, dir string) *model.DestroySpec {
	ds := &model.DestroySpec{Stack: s.Spec.Stack, Backend: s.Spec.Backend, SecretsProvider: s.Spec.SecretsProvider,
		ProjectDir: dir, ConfigDir: s.Dir, Approval: s.Spec.Approval, Labels: maps.Clone(s.Labels)}
	if t := s.Spec.UpdateTemplate; t != nil && t.Spec != nil {
		ds.Remove = t.Spec.Remove
	}
	for k, r := range s.Spec.EnvRefs {
		if r.Type == spec.RefLiteral {
			continue // may be a secret: not stored
		}
		if ds.EnvRefs == nil {
			ds.EnvRefs = map[string]spec.ResourceRef{}
		}
		ds.EnvRefs[k] = r
	}
	return ds
}

// projectDir puts the job's program in place: a checkout of the commit,
// or a Program document written as a Pulumi YAML project.
func (d *Daemon) projectDir(ctx context.Context, j job, refs spec.RefSources, p *prepared) (string, error) {
	dir := d.stackDir(j.stack.Name)
	if ref := j.stack.Spec.ProgramRef; ref != nil {
		prog := j.cfg.Programs[ref.Name]
		if prog == nil {
			return "", &prepareError{model.ReasonSourceUnavailable, fmt.Errorf("program %q is not in the config", ref.Name)}
		}
		out, err := prog.WriteProject(filepath.Join(dir, "program"))
		if err != nil {
			return "", &prepareError{model.ReasonWorkspaceFailed, err}
		}
		return out, nil
	}
	src, err := d.stackGitSource(j.cfg, j.stack, refs)
	if err != nil {
		return "", &prepareError{model.ReasonSpecInvalid, err}
	}
	if a := src.Auth; a != nil {
		p.secrets = append(p.secrets, a.Secrets()...)
	}
	out, err := d.opts.Fetcher.Checkout(ctx, src, j.obs.Commit, filepath.Join(dir, "src"))
	if err != nil {
		return "", &prepareError{model.ReasonSourceUnavailable, err}
	}
	p.commitInfo = d.commitInfo(filepath.Join(dir, "src"), j.obs.Commit)
	if globs, all := j.stack.Spec.PathFilter(); !all {
		if p.pathsHash, err = spec.HashPaths(filepath.Join(dir, "src"), globs); err != nil {
			return "", &prepareError{model.ReasonWorkspaceFailed, err}
		}
	}
	return out, nil
}

// commitInfo describes commit of the checkout in dir; nil when the
// Fetcher cannot read commits or the checkout does not have it.
func (d *Daemon) commitInfo(dir, commit string) *model.Commit {
	cr, ok := d.opts.Fetcher.(CommitReader)
	if !ok || commit == "" {
		return nil
	}
	c, err := cr.CommitInfo(dir, commit)
	if err != nil {
		d.log.Debug("cannot read the commit", "commit", commit, "err", err)
		return nil
	}
	return &c
}

// refSources are d's reference sources, with StackOutput answered from
// the other stack's current outputs (read once per job). Values of outputs
// that the other stack's status shows as secret are added to *secrets.
func (d *Daemon) refSources(ctx context.Context, j job, secrets *[]string) spec.RefSources {
	refs := d.opts.Refs
	var mu sync.Mutex
	cache := map[string]map[string]any{}
	refs.StackOutput = func(stack, output string) (string, error) {
		mu.Lock()
		defer mu.Unlock()
		outs, ok := cache[stack]
		if !ok {
			var err error
			if outs, err = d.outputsOf(ctx, stack, j.cfg); err != nil {
				return "", err
			}
			cache[stack] = outs
		}
		v, ok := outs[output]
		if !ok {
			return "", fmt.Errorf("stack %q has no output %q", stack, output)
		}
		text, err := outputText(v)
		if err == nil && d.secretOutput(stack, output) {
			*secrets = append(*secrets, text)
		}
		return text, err
	}
	return refs
}

func outputText(v any) (string, error) {
	if s, ok := v.(string); ok {
		return s, nil
	}
	data, err := json.Marshal(v)
	return string(data), err
}

// secretOutput says whether stack's recorded output is a secret.
func (d *Daemon) secretOutput(stack, output string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	dep := d.stacks[stack]
	return dep != nil && string(dep.rec.Status.Outputs[output]) == `"[secret]"`
}

// outputsOf reads another stack's outputs, secrets in clear, through the
// runner.
func (d *Daemon) outputsOf(ctx context.Context, name string, cfg *spec.Config) (map[string]any, error) {
	d.mu.Lock()
	dep := d.stacks[name]
	var s *spec.Stack
	if dep != nil && succeeded(dep) {
		s = dep.stack
	}
	d.mu.Unlock()
	if s == nil {
		return nil, fmt.Errorf("stack %q has not deployed", name)
	}
	dir, err := d.existingProjectDir(s)
	if err != nil {
		return nil, err
	}
	noOutputs := d.opts.Refs
	noOutputs.StackOutput = nil
	env, _, err := cfg.StackEnv(s, noOutputs)
	if err == nil {
		err = d.opts.HostPaths.CheckStackBackend(s, s.Spec.Backend, env)
	}
	if err != nil {
		return nil, err
	}
	ws := model.Workspace{Name: s.Name, Stack: s.Spec.Stack, ProjectDir: dir, WorkDir: d.stackDir(s.Name), Backend: s.Spec.Backend,
		SecretsProvider: s.Spec.SecretsProvider, Env: env}
	outs, err := d.opts.Runner.Outputs(ctx, ws)
	if err != nil {
		return nil, fmt.Errorf("read outputs of stack %q: %w", name, err)
	}
	return outs, nil
}

// existingProjectDir is where s's project was last put, without fetching.
func (d *Daemon) existingProjectDir(s *spec.Stack) (string, error) {
	dir := filepath.Join(d.stackDir(s.Name), "src", s.Spec.RepoPath())
	if s.Spec.ProgramRef != nil {
		dir = filepath.Join(d.stackDir(s.Name), "program")
	}
	if _, err := os.Stat(filepath.Join(dir, "Pulumi.yaml")); err != nil {
		return "", fmt.Errorf("the project of stack %q is not on disk: %w", s.Name, err)
	}
	return dir, nil
}

// stackWorkspace resolves s's config and environment for the runner. It
// returns the values to scrub from logs.
func stackWorkspace(c *spec.Config, s *spec.Stack, dir string, refs spec.RefSources) (model.Workspace, []string, error) {
	spec := &s.Spec
	ws := model.Workspace{Name: s.Name, Stack: spec.Stack, ProjectDir: dir, Backend: spec.Backend, Project: spec.Project,
		SecretsProvider: spec.SecretsProvider, UseLocalStackOnly: spec.UseLocalStackOnly,
		Environments: spec.Environment}
	env, secrets, err := c.StackEnv(s, refs)
	if err != nil {
		return model.Workspace{}, nil, err
	}
	ws.Env = env
	for _, k := range slices.Sorted(maps.Keys(env)) {
		if slices.Contains(secrets, env[k]) {
			ws.SecretEnv = append(ws.SecretEnv, k)
		}
	}
	cfg, more, err := c.StackConfig(s, refs)
	if err != nil {
		return model.Workspace{}, nil, err
	}
	ws.Config = cfg
	return ws, append(secrets, more...), nil
}

// stackGitSource builds s's Git source with resolved credentials. A local
// path as projectRepo is taken relative to the config file's directory.
// A local repository that s's config may not name is refused, again when
// the stack runs: a symbolic link may have changed since the config was
// validated.
func (d *Daemon) stackGitSource(c *spec.Config, s *spec.Stack, refs spec.RefSources) (model.GitSource, error) {
	src := model.GitSource{URL: s.Spec.ProjectRepo, Ref: s.Spec.Branch, RepoDir: s.Spec.RepoPath(), Shallow: s.Spec.Shallow}
	dir, err := spec.RepoPath(src.URL, s.Dir)
	if err == nil && dir != "" {
		err = d.opts.HostPaths.CheckRepo(dir, s.Root != "")
	}
	if err != nil {
		return model.GitSource{}, &spec.FieldError{Path: "projectRepo", Err: err}
	}
	if spec.IsLocalPath(src.URL) {
		p := src.URL
		if !filepath.IsAbs(p) {
			p = filepath.Join(s.Dir, p)
		}
		src.URL = "file://" + filepath.ToSlash(filepath.Clean(p))
	}
	auth, err := c.GitAuth(s, refs)
	if err != nil {
		return model.GitSource{}, err
	}
	src.Auth = auth
	return src, nil
}

// gitSource is Config.gitSource with d's reference sources.
func (d *Daemon) gitSource(s *spec.Stack) (model.GitSource, error) {
	return d.stackGitSource(d.cfg, s, d.opts.Refs)
}
