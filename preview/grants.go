package preview

import (
	"maps"
	"path/filepath"
	"slices"
	"strings"

	"github.com/stackd/stackd/daemon/spec"
)

// notResolved stands in for a value a preview does not resolve.
const notResolved = "[not resolved in a preview]"

// ungranted lists, sorted, the field paths of stack next's references
// (next of config nextCfg, as a pull request to a Git config source
// proposes it) that a preview must not resolve: every reference that
// reads something from outside the spec (a Secret, a ConfigMap, a file,
// an environment variable, another stack's output, a Pulumi ESC
// environment) unless base, the same stack in the config in force (nil
// for a new stack), has one at the same path that reads the very same
// source. Otherwise a committer could reference any Secret the daemon
// can read and have the preview show it. Git credentials are granted
// only together with the same projectRepo: they are sent to its host.
// Literal values are written in the pull request and always resolve.
func ungranted(baseCfg *spec.Config, base *spec.Stack, nextCfg *spec.Config, next *spec.Stack) []string {
	var granted map[string]string
	if base != nil {
		granted = refSources(baseCfg, base)
	}
	var out []string
	for path, src := range refSources(nextCfg, next) {
		if g, ok := granted[path]; !ok || g != src {
			out = append(out, path)
		}
	}
	slices.Sort(out)
	return out
}

// refSources names, by field path, the source each reference of stack s
// reads: its kind, its selector and where it is read from (a document of
// the config or a directory of the daemon). It never holds a value.
func refSources(c *spec.Config, s *spec.Stack) map[string]string {
	sp := &s.Spec
	out := map[string]string{}
	for k, r := range sp.EnvRefs {
		addRef(out, "envRefs."+k, refSource(c, s, r))
	}
	for k, r := range sp.SecretsRef {
		addRef(out, "secretsRef."+k, refSource(c, s, r))
	}
	for k, r := range sp.ConfigRef {
		out["configRef."+k] = dataSource(c.ConfigMaps, "ConfigMap", r.Name) + "/" + r.Key
	}
	for _, name := range sp.Envs {
		out["envs."+name] = dataSource(c.ConfigMaps, "ConfigMap", name)
	}
	for _, name := range sp.EnvSecrets {
		out["envSecrets."+name] = dataSource(c.Secrets, "Secret", name)
	}
	if name := sp.AccessTokenSecret; name != "" {
		out["accessTokenSecret"] = dataSource(c.Secrets, "Secret", name) + "/accessToken"
	}
	for _, env := range sp.Environment {
		out["environment."+env] = "ESC environment " + env
	}
	for path, src := range gitAuthSources(c, s) {
		out[path] = src + " for " + sp.ProjectRepo
	}
	return out
}

// gitAuthSources are the sources of s's Git credentials.
func gitAuthSources(c *spec.Config, s *spec.Stack) map[string]string {
	out := map[string]string{}
	ga := s.Spec.GitAuth
	if ga == nil {
		if name := s.Spec.GitAuthSecret; name != "" {
			out["gitAuthSecret"] = dataSource(c.Secrets, "Secret", name)
		}
		return out
	}
	add := func(path string, r *spec.ResourceRef) {
		if r != nil {
			addRef(out, "gitAuth."+path, refSource(c, s, *r))
		}
	}
	if a := ga.SSHAuth; a != nil {
		add("sshAuth.sshPrivateKey", &a.SSHPrivateKey)
		add("sshAuth.password", a.Password)
	}
	add("accessToken", ga.AccessToken)
	if a := ga.GitHubApp; a != nil {
		add("githubApp.appID", &a.AppID)
		add("githubApp.installationID", &a.InstallationID)
		add("githubApp.privateKey", &a.PrivateKey)
	}
	if a := ga.BasicAuth; a != nil {
		add("basicAuth.userName", &a.UserName)
		add("basicAuth.password", &a.Password)
	}
	return out
}

// addRef records src at path unless the reference reads nothing ("").
func addRef(out map[string]string, path, src string) {
	if src != "" {
		out[path] = src
	}
}

// refSource names what r reads for stack s; "" for a Literal.
func refSource(c *spec.Config, s *spec.Stack, r spec.ResourceRef) string {
	switch {
	case r.Type == spec.RefLiteral:
		return ""
	case r.Type == spec.RefEnv && r.Env != nil:
		return "Env " + r.Env.Name
	case r.Type == spec.RefFS && r.Filesystem != nil:
		return "FS " + fsPath(s, r.Filesystem.Path)
	case r.Type == spec.RefSecret && r.Secret != nil:
		return dataSource(c.Secrets, "Secret", r.Secret.Name) + "/" + r.Secret.Key
	case r.Type == spec.RefStackOutput && r.StackOutput != nil:
		return "StackOutput " + r.StackOutput.Stack + "." + r.StackOutput.Output
	}
	return "unknown " + r.Type // never granted unless identical
}

// fsPath is the file an FS reference of s reads: relative to its Git
// checkout's root (base and pull request are checked out apart), or
// absolute for a local config.
func fsPath(s *spec.Stack, p string) string {
	if !filepath.IsAbs(p) {
		p = filepath.Join(s.Dir, p)
	}
	p = filepath.Clean(p)
	if s.Root != "" {
		if rel, err := filepath.Rel(s.Root, p); err == nil {
			return "repository:" + filepath.ToSlash(rel)
		}
	}
	return p
}

// dataSource names a Secret or ConfigMap and where it is read from: a
// document of the config wins over the daemon's directory.
func dataSource(docs map[string]map[string]string, kind, name string) string {
	if _, ok := docs[name]; ok {
		return kind + " document " + name
	}
	return kind + " " + name
}

// withhold returns a copy of s in which the references at paths (from
// ungranted) read nothing: an environment variable or config value gets
// notResolved (a configRef's value becomes plain config), and what reads
// a whole Secret or ConfigMap, an ESC environment or Git credentials is
// dropped. s itself is left as it is.
func withhold(s *spec.Stack, paths []string) *spec.Stack {
	if len(paths) == 0 {
		return s
	}
	c := *s
	sp := &c.Spec
	sp.EnvRefs, sp.SecretsRef = maps.Clone(sp.EnvRefs), maps.Clone(sp.SecretsRef)
	sp.ConfigRef, sp.Config = maps.Clone(sp.ConfigRef), maps.Clone(sp.Config)
	placeholder := spec.ResourceRef{Type: spec.RefLiteral, Literal: &spec.LiteralRef{Value: notResolved}}
	for _, p := range paths {
		field, key, _ := strings.Cut(p, ".")
		switch field {
		case "envRefs":
			sp.EnvRefs[key] = placeholder
		case "secretsRef":
			sp.SecretsRef[key] = placeholder
		case "configRef":
			delete(sp.ConfigRef, key)
			if sp.Config == nil {
				sp.Config = map[string]any{}
			}
			sp.Config[key] = notResolved
		case "envs":
			sp.Envs = without(sp.Envs, key)
		case "envSecrets":
			sp.EnvSecrets = without(sp.EnvSecrets, key)
		case "accessTokenSecret":
			sp.AccessTokenSecret = ""
		case "environment":
			sp.Environment = without(sp.Environment, key)
		case "gitAuth", "gitAuthSecret":
			sp.GitAuth, sp.GitAuthSecret = nil, ""
		}
	}
	return &c
}

// without is list without v, as a new slice.
func without(list []string, v string) []string {
	return slices.DeleteFunc(slices.Clone(list), func(s string) bool { return s == v })
}
