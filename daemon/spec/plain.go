package spec

import (
	"net/url"
	"reflect"
	"strings"
	"unicode"
)

// secretFields are the spec fields whose literal values may be secrets;
// so may those of reviewStacks.secretsRef.
var secretFields = []string{"secretsRef", "envRefs", "gitAuth"}

// urlFields are the spec fields that hold URLs, whose user info and query
// may hold credentials (postgres://user:password@host/db,
// hashivault://key?token=…).
var urlFields = []string{"projectRepo", "backend", "secretsProvider"}

// Redacted renders spec with PKO's field names, leaving out unset
// fields, with every literal value that may be a secret replaced by
// "[secret]", and the user info and query of every URL by "[redacted]".
func Redacted(spec *StackSpec) map[string]any {
	m, _ := Plain(*spec).(map[string]any)
	for _, f := range urlFields {
		if v, ok := m[f].(string); ok {
			m[f] = RedactURL(v)
		}
	}
	for _, f := range secretFields {
		if v, ok := m[f]; ok {
			m[f] = redactLiterals(v)
		}
	}
	if s, ok := m["secrets"].(map[string]any); ok {
		for k := range s {
			s[k] = "[secret]"
		}
	}
	if rs, ok := m["reviewStacks"].(map[string]any); ok {
		if v, ok := rs["secretsRef"]; ok {
			rs["secretsRef"] = redactLiterals(v)
		}
	}
	return m
}

// RedactURL hides what in a URL may be a credential: its user info and
// its query. A value that does not parse as a URL but looks like one
// with user info is hidden whole; scp-like Git addresses (git@host:path)
// name a user, not a secret, and stay.
func RedactURL(s string) string {
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok {
		return s
	}
	u, err := url.Parse(s)
	if err != nil {
		if strings.ContainsAny(rest, "@?") {
			return scheme + "://[redacted]"
		}
		return s
	}
	out := u.Scheme + "://"
	if u.User != nil {
		out += "[redacted]@"
	}
	out += u.Host + u.EscapedPath()
	if u.RawQuery != "" || u.ForceQuery {
		out += "?[redacted]"
	}
	if u.Fragment != "" {
		out += "#" + u.EscapedFragment()
	}
	return out
}

// redactLiterals replaces the value of every literal reference below v.
func redactLiterals(v any) any {
	switch t := v.(type) {
	case map[string]any:
		for k, e := range t {
			if k == "literal" {
				t[k] = map[string]any{"value": "[secret]"}
				continue
			}
			t[k] = redactLiterals(e)
		}
	case []any:
		for i, e := range t {
			t[i] = redactLiterals(e)
		}
	}
	return v
}

// Plain turns a config value into maps, slices and scalars named by the
// fields' yaml tags, leaving out unset struct fields and Kubernetes-only
// ones. Values the user wrote as free-form YAML are kept as they are.
func Plain(v any) any {
	return plainValue(reflect.ValueOf(v), false)
}

var (
	ignoredType  = reflect.TypeOf(Ignored{})
	durationType = reflect.TypeOf(Duration{})
)

func plainValue(v reflect.Value, omitZero bool) any {
	if !v.IsValid() {
		return nil
	}
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return nil
		}
		return plainValue(v.Elem(), false)
	case reflect.Struct:
		return plainStruct(v)
	case reflect.Map:
		if v.Len() == 0 {
			return nil
		}
		out := make(map[string]any, v.Len())
		for it := v.MapRange(); it.Next(); {
			out[it.Key().String()] = plainValue(it.Value(), false)
		}
		return out
	case reflect.Slice:
		if v.Len() == 0 {
			return nil
		}
		out := make([]any, v.Len())
		for i := range out {
			out[i] = plainValue(v.Index(i), false)
		}
		return out
	}
	if omitZero && v.IsZero() {
		return nil
	}
	return v.Interface()
}

func plainStruct(v reflect.Value) any {
	switch v.Type() {
	case ignoredType:
		return nil
	case durationType:
		if d := v.Interface().(Duration); d.Duration != 0 {
			return d.String()
		}
		return nil
	}
	out := map[string]any{}
	for i := range v.NumField() {
		f := v.Type().Field(i)
		if !f.IsExported() {
			continue
		}
		if e := plainValue(v.Field(i), true); e != nil {
			out[fieldName(f)] = e
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// fieldName is a field's yaml name, or its Go name with a lowercase
// first letter.
func fieldName(f reflect.StructField) string {
	if name, _, _ := strings.Cut(f.Tag.Get("yaml"), ","); name != "" {
		return name
	}
	r := []rune(f.Name)
	r[0] = unicode.ToLower(r[0])
	return string(r)
}
