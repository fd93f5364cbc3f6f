package spec

import (
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// The placeholders that reviewStacks.config strings may hold, expanded
// when a review stack is deployed. "$${" writes a literal "${".
const (
	// PlaceholderPRNumber is the pull request's number, e.g. 7.
	PlaceholderPRNumber = "prNumber"
	// PlaceholderReviewStack is the review stack's name, e.g. app-pr-7.
	PlaceholderReviewStack = "reviewStack"
)

// placeholderName is a placeholder name that a message may quote; other
// text between "${" and "}" is not quoted.
var placeholderName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.-]{0,40}$`)

// FieldError is a problem with the value at Path (relative to the
// stack's spec). Its message never quotes a value.
type FieldError struct {
	Path string
	Err  error
}

func (e *FieldError) Error() string { return e.Path + ": " + e.Err.Error() }

func (e *FieldError) Unwrap() error { return e.Err }

// ForReview returns the stack that review stack name, of pull request
// number, runs as: s with the config of its spec overridden by
// reviewStacks, and its envRefs by reviewStacks.envRefs (a variable of
// the same name is replaced). The values of reviewStacks.config, their
// placeholders expanded, and of reviewStacks.secretsRef come after all
// of the template's (see StackConfig), so that each replaces the
// template's value of its key however either is written ("size" is the
// project's "web:size"); the template's value of a key written the same
// way is left out, not even resolved. A key that the template holds as a
// secret cannot become plain: that is an error, as is an unknown
// placeholder. The result has no reviewStacks of its own. s is not
// changed: the maps of the result that differ are copies.
func (s *Stack) ForReview(name string, number int) (*Stack, error) {
	out := *s
	sp := &out.Spec
	rs := sp.ReviewStacks
	sp.ReviewStacks = nil
	if rs == nil {
		return &out, nil
	}
	if len(rs.EnvRefs) > 0 {
		sp.EnvRefs = maps.Clone(sp.EnvRefs)
		if sp.EnvRefs == nil {
			sp.EnvRefs = map[string]ResourceRef{}
		}
		maps.Copy(sp.EnvRefs, rs.EnvRefs)
	}
	if len(rs.Config) == 0 && len(rs.SecretsRef) == 0 {
		return &out, nil
	}
	vars := map[string]string{PlaceholderPRNumber: strconv.Itoa(number), PlaceholderReviewStack: name}
	over := &ReviewStacks{Config: map[string]any{}, SecretsRef: rs.SecretsRef}
	for _, k := range slices.Sorted(maps.Keys(rs.Config)) {
		rel := joinPath("reviewStacks.config", k)
		if msg := secretClash(sp, k); msg != "" {
			return nil, &FieldError{Path: rel, Err: errors.New(msg)}
		}
		v, err := ExpandPlaceholders(rs.Config[k], rel, vars)
		if err != nil {
			return nil, err
		}
		over.Config[k] = v
	}
	sp.Config, sp.ConfigRef = maps.Clone(sp.Config), maps.Clone(sp.ConfigRef)
	sp.Secrets, sp.SecretsRef = maps.Clone(sp.Secrets), maps.Clone(sp.SecretsRef)
	for _, k := range slices.Concat(slices.Collect(maps.Keys(rs.Config)), slices.Collect(maps.Keys(rs.SecretsRef))) {
		delete(sp.Config, k)
		delete(sp.ConfigRef, k)
		delete(sp.Secrets, k)
		delete(sp.SecretsRef, k)
	}
	sp.overrides = over
	return &out, nil
}

// secretClash says why config key k of reviewStacks.config cannot be
// plain: the template holds it, or a key that may be the same, as a
// secret. Empty when it can.
func secretClash(sp *StackSpec, k string) string {
	fields := []struct {
		name string
		keys []string
	}{
		{"secretsRef", slices.Sorted(maps.Keys(sp.SecretsRef))},
		{"secrets", slices.Sorted(maps.Keys(sp.Secrets))},
	}
	for _, f := range fields {
		for _, t := range f.keys {
			switch {
			case t == k:
				return fmt.Sprintf("the template's %s is a secret, which a plain value cannot override: override it under reviewStacks.secretsRef", joinPath(f.name, t))
			case mayBeSameKey(k, t):
				return fmt.Sprintf("may be the same key as the template's secret %s (a key without a namespace is the project's), which a plain value cannot override: override it under reviewStacks.secretsRef", joinPath(f.name, t))
			}
		}
	}
	return ""
}

// mayBeSameKey says whether config keys a and b may name the same value:
// they are written the same, or one has no namespace (it is the
// project's) and the other the same name in some namespace, which may be
// the project's.
func mayBeSameKey(a, b string) bool {
	_, aName, aNS := strings.Cut(a, ":")
	_, bName, bNS := strings.Cut(b, ":")
	return a == b || (!aNS && bNS && a == bName) || (aNS && !bNS && aName == b)
}

// ExpandPlaceholders returns a copy of config value v (a string, or maps
// and lists of values, as decoded) whose strings have their placeholders
// "${name}" replaced by vars[name] and "$${" by "${". path names v in
// errors, which are *FieldError: an unknown placeholder, or one that is
// not closed.
func ExpandPlaceholders(v any, path string, vars map[string]string) (any, error) {
	switch x := v.(type) {
	case string:
		s, err := expandString(x, vars)
		if err != nil {
			return nil, &FieldError{Path: path, Err: err}
		}
		return s, nil
	case map[string]any:
		out := make(map[string]any, len(x))
		for _, k := range slices.Sorted(maps.Keys(x)) {
			e, err := ExpandPlaceholders(x[k], joinPath(path, k), vars)
			if err != nil {
				return nil, err
			}
			out[k] = e
		}
		return out, nil
	case []any:
		out := make([]any, len(x))
		for i, item := range x {
			e, err := ExpandPlaceholders(item, indexPath(path, i), vars)
			if err != nil {
				return nil, err
			}
			out[i] = e
		}
		return out, nil
	}
	return v, nil
}

// expandString replaces the placeholders of s (see ExpandPlaceholders).
func expandString(s string, vars map[string]string) (string, error) {
	if !strings.Contains(s, "${") {
		return s, nil
	}
	var b strings.Builder
	for {
		i := strings.Index(s, "${")
		if i < 0 {
			b.WriteString(s)
			return b.String(), nil
		}
		if i > 0 && s[i-1] == '$' { // "$${": a literal "${"
			b.WriteString(s[:i-1] + "${")
			s = s[i+2:]
			continue
		}
		b.WriteString(s[:i])
		end := strings.IndexByte(s[i:], '}')
		if end < 0 {
			return "", errors.New(`a placeholder "${" is not closed by "}" (write "$${" for a literal "${")`)
		}
		name := s[i+2 : i+end]
		v, ok := vars[name]
		if !ok {
			return "", unknownPlaceholder(name)
		}
		b.WriteString(v)
		s = s[i+end+1:]
	}
}

func unknownPlaceholder(name string) error {
	known := "${" + PlaceholderPRNumber + "} and ${" + PlaceholderReviewStack + "}"
	if placeholderName.MatchString(name) {
		return fmt.Errorf("unknown placeholder ${%s}: the placeholders are %s (write $${ for a literal ${)", name, known)
	}
	return fmt.Errorf("unknown placeholder: the placeholders are %s (write $${ for a literal ${)", known)
}
