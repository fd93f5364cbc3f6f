package resolve

import (
	"encoding/json"
	"maps"
	"path/filepath"
	"slices"

	"github.com/stackd/stackd/daemon/model"
	"github.com/stackd/stackd/daemon/spec"
)

// DestroySpec is what the record of s, run from the project in dir,
// keeps for a destroy once s left the config: no literal environment
// value, which may be a secret.
func DestroySpec(s *spec.Stack, dir string) *model.DestroySpec {
	ds := &model.DestroySpec{Stack: s.Spec.Stack, Backend: s.Spec.Backend, SecretsProvider: s.Spec.SecretsProvider,
		ProjectDir: dir, ConfigDir: s.Dir, Approval: s.Spec.Approval, Labels: maps.Clone(s.Labels),
		Credentials: s.Spec.Credentials, Repository: s.Spec.ProjectRepo}
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

// OutputText is a stack output's value as a reference reads it: a
// string as it is, anything else as JSON.
func OutputText(v any) (string, error) {
	if s, ok := v.(string); ok {
		return s, nil
	}
	data, err := json.Marshal(v)
	return string(data), err
}

// Workspace resolves s's config and environment for the runner. It
// returns the values to scrub from logs.
func Workspace(c *spec.Config, s *spec.Stack, dir string, refs spec.RefSources) (model.Workspace, []string, error) {
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

// GitSource builds s's Git source with resolved credentials. A local
// path as projectRepo is taken relative to the config file's directory.
// A local repository that s's config may not name (hp says which) is
// refused, again when the stack runs: a symbolic link may have changed
// since the config was validated.
func GitSource(c *spec.Config, s *spec.Stack, refs spec.RefSources, hp spec.HostPaths) (model.GitSource, error) {
	src := model.GitSource{URL: s.Spec.ProjectRepo, Ref: s.Spec.Branch, RepoDir: s.Spec.RepoPath(), Shallow: s.Spec.Shallow}
	dir, err := spec.RepoPath(src.URL, s.Dir)
	if err == nil && dir != "" {
		err = hp.CheckRepo(dir, s.FromGit("projectRepo"))
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
