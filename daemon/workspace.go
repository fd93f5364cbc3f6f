package daemon

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/stackd/stackd/daemon/model"
	"github.com/stackd/stackd/daemon/resolve"
	"github.com/stackd/stackd/daemon/spec"
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
	ws, secrets, err := resolve.Workspace(j.cfg, j.stack, dir, refs)
	if err == nil {
		err = d.opts.HostPaths.CheckStackBackend(j.stack, ws.Backend, ws.Env)
	}
	if err != nil {
		return nil, &prepareError{model.ReasonSpecInvalid, err}
	}
	ws.WorkDir = d.stackDir(j.stack.Name)
	p.ws, p.secrets = ws, append(p.secrets, secrets...)
	if j.stack.Spec.DestroyOnFinalize && !j.stack.Spec.Preview {
		p.destroy = resolve.DestroySpec(j.stack, dir)
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
	l := d.lock()
	g := &stackState{stack: j.st.gone, commit: j.st.commit}
	j.stack, j.cfg, j.obs.Commit = g.stack, j.st.goneCfg, l.commitOf(g)
	l.unlock()
	if j.obs.Commit == "" && tracksBranch(g) {
		src, err := resolve.GitSource(j.cfg, j.stack, d.opts.Refs, d.opts.HostPaths)
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
	src, err := resolve.GitSource(j.cfg, j.stack, refs, d.opts.HostPaths)
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
		text, err := resolve.OutputText(v)
		if err == nil && d.secretOutput(stack, output) {
			*secrets = append(*secrets, text)
		}
		return text, err
	}
	return refs
}

// secretOutput says whether stack's recorded output is a secret.
func (d *Daemon) secretOutput(stack, output string) bool {
	l := d.lock()
	defer l.unlock()
	dep := l.stacks[stack]
	return dep != nil && string(dep.rec.Status.Outputs[output]) == `"[secret]"`
}

// outputsOf reads another stack's outputs, secrets in clear, through the
// runner.
func (d *Daemon) outputsOf(ctx context.Context, name string, cfg *spec.Config) (map[string]any, error) {
	l := d.lock()
	dep := l.stacks[name]
	var s *spec.Stack
	if dep != nil && succeeded(dep) {
		s = dep.stack
	}
	l.unlock()
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

// gitSource is Config.gitSource with d's reference sources.
func (d *Daemon) gitSource(s *spec.Stack) (model.GitSource, error) {
	return resolve.GitSource(d.cfg, s, d.opts.Refs, d.opts.HostPaths)
}
