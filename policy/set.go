package policy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/util"

	"github.com/stackd/stackd/daemon/model"
)

// MaxFileBytes bounds one policy file.
const MaxFileBytes = 1 << 20

// Set is a compiled policy set. It is immutable and safe for concurrent
// use.
type Set struct {
	// Files are the policy files, as shown in errors.
	Files    []string
	policies []compiled
}

// compiled is one policy: a package and its deny and warn queries.
type compiled struct {
	name  string
	rules []rule
}

type rule struct {
	level string // model.PolicyDeny or model.PolicyWarn
	query rego.PreparedEvalQuery
}

// Names are the set's policies that have a deny or warn rule, sorted.
func (s *Set) Names() []string {
	names := make([]string, len(s.policies))
	for i, p := range s.policies {
		names[i] = p.name
	}
	return names
}

// Load reads and compiles the *.rego files under dir, in subdirectories
// too, leaving out hidden ones (.git) and OPA's test files (*_test.rego).
// Files are named shown/relative-path in errors (shown "" is dir; a Git
// source's is URL//path, kept as written). A
// directory without policy files is an empty set, which allows
// everything.
func Load(ctx context.Context, dir, shown string) (*Set, error) {
	if shown == "" {
		shown = dir
	}
	files := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() && path != dir && strings.HasPrefix(name, ".") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(name, ".rego") || strings.HasSuffix(name, "_test.rego") {
			return nil
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		src, err := readFile(path)
		if err != nil {
			return err
		}
		files[strings.TrimSuffix(shown, "/")+"/"+filepath.ToSlash(rel)] = src
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read the policies: %w", err)
	}
	return Compile(ctx, files)
}

func readFile(path string) (string, error) {
	info, err := os.Stat(path)
	if err != nil {
		return "", err
	}
	if info.Size() > MaxFileBytes {
		return "", fmt.Errorf("%s: %d bytes, more than the limit of %d", path, info.Size(), MaxFileBytes)
	}
	data, err := os.ReadFile(path)
	return string(data), err
}

// Compile parses and compiles policy files, given by name. Errors name
// file:line:column, one per line.
func Compile(ctx context.Context, files map[string]string) (*Set, error) {
	s := &Set{}
	modules := map[string]*ast.Module{}
	var errs ast.Errors
	for name, src := range files {
		s.Files = append(s.Files, name)
		m, err := ast.ParseModuleWithOpts(name, src, ast.ParserOptions{RegoVersion: ast.RegoV1, Capabilities: capabilities})
		if err != nil {
			errs = append(errs, asErrors(err)...)
			continue
		}
		modules[name] = m
	}
	slices.Sort(s.Files)
	if len(errs) > 0 {
		return nil, regoError(errs)
	}
	c := ast.NewCompiler().WithDefaultRegoVersion(ast.RegoV1).WithCapabilities(capabilities)
	if c.Compile(modules); c.Failed() {
		return nil, regoError(c.Errors)
	}
	for _, pkg := range packages(modules) {
		p := compiled{name: strings.TrimPrefix(pkg.path.String(), "data.")}
		for _, level := range []string{model.PolicyDeny, model.PolicyWarn} {
			if !pkg.rules[level] {
				continue
			}
			q, err := rego.New(
				rego.Compiler(c),
				rego.Query(pkg.path.String()+"."+level),
				rego.StrictBuiltinErrors(true),
				rego.Capabilities(capabilities),
			).PrepareForEval(ctx)
			if err != nil {
				return nil, fmt.Errorf("policy %s: prepare %s: %w", p.name, level, err)
			}
			p.rules = append(p.rules, rule{level: level, query: q})
		}
		s.policies = append(s.policies, p)
	}
	return s, nil
}

// pkg is a package of the policy files and which of deny and warn it
// defines.
type pkg struct {
	path  ast.Ref
	rules map[string]bool
}

// packages are the packages of modules that define deny or warn, sorted
// by path; several files may make up one package.
func packages(modules map[string]*ast.Module) []pkg {
	byPath := map[string]*pkg{}
	for _, m := range modules {
		key := m.Package.Path.String()
		for _, r := range m.Rules {
			ref := r.Head.Ref()
			if len(ref) != 1 {
				continue
			}
			name := ref[0].Value.String()
			if name != model.PolicyDeny && name != model.PolicyWarn {
				continue
			}
			p := byPath[key]
			if p == nil {
				p = &pkg{path: m.Package.Path, rules: map[string]bool{}}
				byPath[key] = p
			}
			p.rules[name] = true
		}
	}
	out := make([]pkg, 0, len(byPath))
	for _, p := range byPath {
		out = append(out, *p)
	}
	slices.SortFunc(out, func(a, b pkg) int { return strings.Compare(a.path.String(), b.path.String()) })
	return out
}

// capabilities are OPA's builtins but those that reach the network: a
// policy judges the preview it is given, quickly and the same way each
// time.
var capabilities = func() *ast.Capabilities {
	c := ast.CapabilitiesForThisVersion()
	c.Builtins = slices.DeleteFunc(c.Builtins, func(b *ast.Builtin) bool {
		return b.Name == "http.send" || b.Name == "net.lookup_ip_addr" || b.Name == "opa.runtime"
	})
	return c
}()

func asErrors(err error) ast.Errors {
	var errs ast.Errors
	if errors.As(err, &errs) {
		return errs
	}
	return ast.Errors{{Message: err.Error()}}
}

// regoError is errs, one per line, each "file:line:column: message".
func regoError(errs ast.Errors) error {
	lines := make([]string, 0, len(errs))
	for _, e := range errs {
		msg := e.Message
		if e.Location != nil {
			msg = fmt.Sprintf("%s:%d:%d: %s", e.Location.File, e.Location.Row, e.Location.Col, msg)
		}
		lines = append(lines, msg)
	}
	slices.Sort(lines)
	return errors.New(strings.Join(lines, "\n"))
}

// Evaluate judges in with every policy of s. An error (a rule that fails
// or yields something other than strings) names its policy; the caller
// treats it as a denial.
func (s *Set) Evaluate(ctx context.Context, in model.PolicyInput) (model.PolicyVerdict, error) {
	var v model.PolicyVerdict
	if len(s.policies) == 0 {
		return v, nil
	}
	input, err := inputValue(in)
	if err != nil {
		return v, err
	}
	for _, p := range s.policies {
		for _, r := range p.rules {
			msgs, err := r.eval(ctx, input)
			if err != nil {
				return model.PolicyVerdict{}, fmt.Errorf("policy %s: %s: %w", p.name, r.level, err)
			}
			for _, m := range msgs {
				x := model.Violation{Policy: p.name, Level: r.level, Message: m}
				if r.level == model.PolicyDeny {
					v.Deny = append(v.Deny, x)
				} else {
					v.Warn = append(v.Warn, x)
				}
			}
		}
	}
	return v, nil
}

// inputValue is in as Rego's input document.
func inputValue(in model.PolicyInput) (ast.Value, error) {
	if in.Steps == nil {
		in.Steps = []model.Step{}
	}
	data, err := json.Marshal(in)
	if err != nil {
		return nil, fmt.Errorf("encode the policy input: %w", err)
	}
	var x any
	if err := util.NewJSONDecoder(bytes.NewReader(data)).Decode(&x); err != nil {
		return nil, fmt.Errorf("decode the policy input: %w", err)
	}
	return ast.InterfaceToValue(x)
}

// eval is the rule's messages: none when the rule is undefined.
func (r rule) eval(ctx context.Context, input ast.Value) ([]string, error) {
	rs, err := r.query.Eval(ctx, rego.EvalParsedInput(input))
	if err != nil {
		return nil, err
	}
	if len(rs) == 0 || len(rs[0].Expressions) == 0 {
		return nil, nil
	}
	return messages(rs[0].Expressions[0].Value)
}

// messages are the strings of a set or array.
func messages(x any) ([]string, error) {
	list, ok := x.([]any)
	if !ok {
		return nil, fmt.Errorf("is %s, want a set or an array of strings", kind(x))
	}
	out := make([]string, 0, len(list))
	for _, e := range list {
		s, ok := e.(string)
		if !ok {
			return nil, fmt.Errorf("holds %s, want strings", kind(e))
		}
		out = append(out, s)
	}
	return out, nil
}

// kind names a JSON value's type.
func kind(x any) string {
	switch x.(type) {
	case bool:
		return "a boolean"
	case string:
		return "a string"
	case json.Number, float64, int, int64:
		return "a number"
	case map[string]any:
		return "an object"
	case []any:
		return "an array"
	case nil:
		return "null"
	}
	return fmt.Sprintf("%T", x)
}
