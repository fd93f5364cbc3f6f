package spec

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
)

// ConfigValue is one resolved stack config value.
type ConfigValue struct {
	// Key is as written in the spec: "name" (the project's namespace) or
	// "namespace:name".
	Key string
	// Value is the value's text; JSON text when JSON is set.
	Value  string
	JSON   bool
	Secret bool
}

// StackEnv resolves envRefs (and the deprecated envs/envSecrets).
func (c *Config) StackEnv(s *Stack, refs RefSources) (map[string]string, []string, error) {
	env := map[string]string{}
	var secrets []string
	for _, k := range slices.Sorted(maps.Keys(s.Spec.EnvRefs)) {
		r := s.Spec.EnvRefs[k]
		v, err := c.ResolveRef(s, "envRefs."+k, r, refs)
		if err != nil {
			return nil, nil, err
		}
		env[k] = v
		if r.IsSecret(k) {
			secrets = append(secrets, v)
		}
	}
	more, err := c.legacyEnv(s, refs)
	if err != nil {
		return nil, nil, err
	}
	for k, v := range more {
		if _, set := env[k]; !set {
			env[k] = v.value
			if v.secret {
				secrets = append(secrets, v.value)
			}
		}
	}
	return env, secrets, nil
}

type envValue struct {
	value  string
	secret bool
}

// legacyEnv reads PKO's deprecated environment fields: envs (every key of
// the named ConfigMaps), envSecrets (every key of the named Secrets) and
// accessTokenSecret (PULUMI_ACCESS_TOKEN from the Secret's key
// accessToken). envRefs win over them.
func (c *Config) legacyEnv(s *Stack, refs RefSources) (map[string]envValue, error) {
	out := map[string]envValue{}
	for i, name := range s.Spec.Envs {
		data, err := c.ConfigMapData(name, refs)
		if err != nil {
			return nil, &RefError{Path: fmt.Sprintf("envs[%d]", i), Err: err}
		}
		for k, v := range data {
			out[k] = envValue{v, false}
		}
	}
	for i, name := range s.Spec.EnvSecrets {
		data, err := c.SecretData(name, refs)
		if err != nil {
			return nil, &RefError{Path: fmt.Sprintf("envSecrets[%d]", i), Err: err}
		}
		for k, v := range data {
			out[k] = envValue{v, true}
		}
	}
	if name := s.Spec.AccessTokenSecret; name != "" {
		tok, err := c.SecretValue(name, "accessToken", refs)
		if err != nil {
			return nil, &RefError{Path: "accessTokenSecret", Err: err}
		}
		out["PULUMI_ACCESS_TOKEN"] = envValue{tok, true}
	}
	return out, nil
}

// StackConfig resolves config, configRef, secretsRef and, for a review
// stack, its overrides, in that order: a later value of a key replaces an
// earlier one. It returns the secret values too.
func (c *Config) StackConfig(s *Stack, refs RefSources) ([]ConfigValue, []string, error) {
	sp := &s.Spec
	out, err := plainConfig("config", sp.Config)
	if err != nil {
		return nil, nil, err
	}
	for _, k := range slices.Sorted(maps.Keys(sp.ConfigRef)) {
		r := sp.ConfigRef[k]
		v, err := c.ResolveConfigRef("configRef."+k, r, refs)
		if err != nil {
			return nil, nil, err
		}
		if r.JSON && !json.Valid([]byte(v)) {
			return nil, nil, fmt.Errorf("configRef.%s: the value of ConfigMap %q key %q is not valid JSON", k, r.Name, r.Key)
		}
		out = append(out, ConfigValue{Key: k, Value: v, JSON: r.JSON})
	}
	var secrets []string
	for _, k := range slices.Sorted(maps.Keys(sp.Secrets)) {
		out = append(out, ConfigValue{Key: k, Value: sp.Secrets[k], Secret: true})
		secrets = append(secrets, sp.Secrets[k])
	}
	more, secrets, err := c.secretConfig(s, "secretsRef", sp.SecretsRef, refs, secrets)
	if err != nil {
		return nil, nil, err
	}
	out = append(out, more...)
	if o := sp.overrides; o != nil {
		more, err := plainConfig("reviewStacks.config", o.Config)
		if err != nil {
			return nil, nil, err
		}
		out = append(out, more...)
		if more, secrets, err = c.secretConfig(s, "reviewStacks.secretsRef", o.SecretsRef, refs, secrets); err != nil {
			return nil, nil, err
		}
		out = append(out, more...)
	}
	return out, secrets, nil
}

// plainConfig turns the config values m of field into the runner's, in
// key order.
func plainConfig(field string, m map[string]any) ([]ConfigValue, error) {
	var out []ConfigValue
	for _, k := range slices.Sorted(maps.Keys(m)) {
		v, isJSON, err := configText(m[k])
		if err != nil {
			return nil, fmt.Errorf("%s.%s: %w", field, k, err)
		}
		out = append(out, ConfigValue{Key: k, Value: v, JSON: isJSON})
	}
	return out, nil
}

// secretConfig resolves the secret config references m of field, in key
// order, and appends their values to secrets.
func (c *Config) secretConfig(s *Stack, field string, m map[string]ResourceRef, refs RefSources, secrets []string) ([]ConfigValue, []string, error) {
	var out []ConfigValue
	for _, k := range slices.Sorted(maps.Keys(m)) {
		v, err := c.ResolveRef(s, field+"."+k, m[k], refs)
		if err != nil {
			return nil, nil, err
		}
		out = append(out, ConfigValue{Key: k, Value: v, Secret: true})
		secrets = append(secrets, v)
	}
	return out, secrets, nil
}

// configText turns a config value into the runner's text: strings as
// they are, anything else as JSON.
func configText(v any) (string, bool, error) {
	if s, ok := v.(string); ok {
		return s, false, nil
	}
	data, err := json.Marshal(v)
	if err != nil {
		return "", false, fmt.Errorf("not representable as JSON: %w", err)
	}
	return string(data), true, nil
}
