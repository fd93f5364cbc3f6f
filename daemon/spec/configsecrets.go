package spec

import (
	"maps"
	"slices"
)

// ConfigSecrets are the secret values of cfg, which the daemon scrubs
// from everything it shows: the data of its Secret documents and, for
// each stack, its secret config, secretsRef (its review stacks' too),
// secret envRefs, envSecrets, accessTokenSecret and Git credentials. A
// reference that cannot be read is skipped (the stack's operation
// reports it); another stack's output is learned when an operation reads
// it.
func ConfigSecrets(cfg *Config, refs RefSources) []string {
	refs.StackOutput = nil
	var out []string
	for _, name := range slices.Sorted(maps.Keys(cfg.Secrets)) {
		out = append(out, slices.Collect(maps.Values(cfg.Secrets[name]))...)
	}
	for _, s := range cfg.Stacks {
		out = append(out, stackSecrets(cfg, s, refs)...)
	}
	return out
}

func stackSecrets(cfg *Config, s *Stack, refs RefSources) []string {
	sp := &s.Spec
	out := slices.Collect(maps.Values(sp.Secrets))
	resolve := func(path string, r ResourceRef) {
		if r.Type == RefStackOutput {
			return
		}
		if v, err := cfg.ResolveRef(s, path, r, refs); err == nil {
			out = append(out, v)
		}
	}
	for k, r := range sp.SecretsRef {
		resolve("secretsRef."+k, r)
	}
	if rs := sp.ReviewStacks; rs != nil {
		for k, r := range rs.SecretsRef {
			resolve("reviewStacks.secretsRef."+k, r)
		}
		for k, r := range rs.EnvRefs {
			if r.IsSecret(k) {
				resolve("reviewStacks.envRefs."+k, r)
			}
		}
	}
	for k, r := range sp.EnvRefs {
		if r.IsSecret(k) {
			resolve("envRefs."+k, r)
		}
	}
	for _, name := range sp.EnvSecrets {
		if data, err := cfg.SecretData(name, refs); err == nil {
			out = append(out, slices.Collect(maps.Values(data))...)
		}
	}
	if name := sp.AccessTokenSecret; name != "" {
		if v, err := cfg.SecretValue(name, "accessToken", refs); err == nil {
			out = append(out, v)
		}
	}
	if a, err := cfg.GitAuth(s, refs); err == nil && a != nil {
		out = append(out, a.Secrets()...)
	}
	return out
}
