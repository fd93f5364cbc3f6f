package auth

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"regexp"
	"slices"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/stackd/stackd/daemon/spec"
)

const (
	// maxFileSize bounds the roles file: it is read whole.
	maxFileSize = 4 << 20
	// maxNodes bounds the YAML nodes the file may expand to through
	// aliases.
	maxNodes = 1 << 18
)

// PolicyError is returned by Load and Parse for a roles file with
// problems: every one found, each placed at file:line:column with its
// field path, printed one per line like `stackd validate` prints a
// stack config's.
type PolicyError struct {
	Diags spec.Diagnostics
}

func (e *PolicyError) Error() string {
	lines := make([]string, len(e.Diags))
	for i, d := range e.Diags {
		lines[i] = d.String()
	}
	return "invalid roles file:\n" + strings.Join(lines, "\n")
}

// Load reads and checks the roles file at path. A file with problems
// gives a *PolicyError; one that cannot be read, the reading error.
func Load(path string) (*Policy, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("roles file: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("roles file: %w", err)
	}
	return Parse(path, data)
}

// Parse checks the roles file data, named file in diagnostics.
//
// The file holds one YAML document, a mapping of tokens, roles, bindings
// and anonymous, each optional (docs/access.md describes them). Parsing
// is strict: unknown fields, duplicate keys, unknown actions and roles,
// bad hashes, globs and times are all errors, reported together.
func Parse(file string, data []byte) (*Policy, error) {
	p := &parser{file: file}
	pol := &Policy{file: file, digest: sha256.Sum256(data), roles: map[string]*role{},
		users: map[string][]string{}, emails: map[string][]string{}, groups: map[string][]string{}}
	if len(data) > maxFileSize {
		p.diags = append(p.diags, spec.Diagnostic{Pos: spec.Pos{File: file}, Msg: fmt.Sprintf("larger than %d bytes; not a roles file?", maxFileSize)})
		return nil, &PolicyError{Diags: p.diags}
	}
	if root := p.document(data); root != nil {
		p.policy(root, pol)
	}
	if len(p.diags) > 0 {
		return nil, &PolicyError{Diags: p.diags}
	}
	return pol, nil
}

// parser walks the YAML nodes of a roles file, recording problems.
type parser struct {
	file  string
	diags spec.Diagnostics
	nodes int
}

func (p *parser) errorf(n *yaml.Node, path, format string, args ...any) {
	pos := spec.Pos{File: p.file}
	if n != nil {
		pos.Line, pos.Col = n.Line, n.Column
	}
	p.diags = append(p.diags, spec.Diagnostic{Pos: pos, Path: path, Msg: fmt.Sprintf(format, args...)})
}

// document parses data's only document; nil for an empty file or one
// with errors.
func (p *parser) document(data []byte) *yaml.Node {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var root yaml.Node
	err := dec.Decode(&root)
	if errors.Is(err, io.EOF) {
		return nil // an empty file: a policy that grants nothing
	}
	if err == nil {
		var more yaml.Node
		if err2 := dec.Decode(&more); err2 == nil {
			at := &more
			if len(more.Content) > 0 {
				at = more.Content[0]
			}
			p.errorf(at, "", "a roles file holds one YAML document")
			return nil
		} else if !errors.Is(err2, io.EOF) {
			err = err2
		}
	}
	if err != nil {
		p.diags = append(p.diags, spec.SyntaxError(p.file, data, err))
		return nil
	}
	if len(root.Content) == 0 || isNull(root.Content[0]) {
		return nil
	}
	return root.Content[0]
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

// resolve follows aliases and counts nodes; nil once there are too many.
func (p *parser) resolve(n *yaml.Node, path string) *yaml.Node {
	for n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	p.nodes++
	if p.nodes == maxNodes {
		p.errorf(n, path, "the file expands to more than %d YAML nodes", maxNodes)
	}
	if p.nodes >= maxNodes {
		return nil
	}
	return n
}

// field is a mapping's value with the node of its key.
type field struct {
	key, value *yaml.Node
}

// fields returns a mapping's fields by name, reporting keys that are not
// strings, duplicated, merge keys or not among known.
func (p *parser) fields(n *yaml.Node, path string, known ...string) map[string]field {
	if n = p.resolve(n, path); n == nil {
		return nil
	}
	if n.Kind != yaml.MappingNode {
		p.errorf(n, path, "expected a mapping, got %s", kindOf(n))
		return nil
	}
	out := map[string]field{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		switch {
		case k.Kind != yaml.ScalarNode:
			p.errorf(k, path, "mapping keys must be strings, got %s", kindOf(k))
		case k.ShortTag() == "!!merge":
			p.errorf(k, path, "merge keys (<<) are not supported")
		case out[k.Value].key != nil:
			p.errorf(k, join(path, k.Value), "duplicate key (first at line %d)", out[k.Value].key.Line)
		case known != nil && !slices.Contains(known, k.Value):
			p.unknownField(k, path, known)
		default:
			out[k.Value] = field{k, v}
		}
	}
	return out
}

func (p *parser) unknownField(k *yaml.Node, path string, known []string) {
	msg := fmt.Sprintf("unknown field %q", k.Value)
	if s := spec.Closest(k.Value, known); s != "" {
		msg += fmt.Sprintf(" (did you mean %q?)", s)
	} else {
		msg += fmt.Sprintf(" (fields: %s)", strings.Join(known, ", "))
	}
	p.errorf(k, join(path, k.Value), "%s", msg)
}

// str reads a string scalar; booleans are refused as almost always a
// mistake (`name: yes`).
func (p *parser) str(n *yaml.Node, path string) (string, bool) {
	if n = p.resolve(n, path); n == nil {
		return "", false
	}
	if n.Kind != yaml.ScalarNode || isNull(n) {
		p.errorf(n, path, "expected a string, got %s", kindOf(n))
		return "", false
	}
	if n.ShortTag() == "!!bool" {
		p.errorf(n, path, "expected a string, got a boolean (quote it if it is meant as text)")
		return "", false
	}
	return n.Value, true
}

// list returns a sequence's items.
func (p *parser) list(n *yaml.Node, path string) []*yaml.Node {
	if n = p.resolve(n, path); n == nil {
		return nil
	}
	if n.Kind != yaml.SequenceNode {
		p.errorf(n, path, "expected a list, got %s", kindOf(n))
		return nil
	}
	return n.Content
}

// strs reads a list of strings, with the node of each for later errors.
func (p *parser) strs(n *yaml.Node, path string) ([]string, []*yaml.Node) {
	var out []string
	var nodes []*yaml.Node
	for i, item := range p.list(n, path) {
		if s, ok := p.str(item, index(path, i)); ok {
			out = append(out, s)
			nodes = append(nodes, item)
		}
	}
	return out, nodes
}

func kindOf(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	}
	switch n.ShortTag() {
	case "!!null":
		return "nothing"
	case "!!bool":
		return "a boolean"
	case "!!int", "!!float":
		return "a number"
	}
	return "a string"
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func index(path string, i int) string { return fmt.Sprintf("%s[%d]", path, i) }

// policy reads the top-level mapping. Roles come first, whatever the
// order in the file, since the other sections refer to them.
func (p *parser) policy(n *yaml.Node, pol *Policy) {
	fs := p.fields(n, "", "tokens", "roles", "bindings", "anonymous")
	if f, ok := fs["roles"]; ok {
		p.roles(f.value, pol)
	}
	if f, ok := fs["tokens"]; ok {
		p.tokens(f.value, pol)
	}
	if f, ok := fs["bindings"]; ok {
		p.bindings(f.value, pol)
	}
	if f, ok := fs["anonymous"]; ok {
		pol.anonymous = p.roleRefs(f.value, "anonymous", pol)
	}
}

// names are what roles and tokens may be called: they show in audit
// records, logs and messages.
var namePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._@-]*$`)

func (p *parser) roles(n *yaml.Node, pol *Policy) {
	fs := p.fields(n, "roles")
	for _, name := range sortedByLine(fs) {
		f, path := fs[name], join("roles", name)
		switch {
		case name == AdminRole:
			p.errorf(f.key, path, "admin is the built-in role that allows everything; bind it without defining it")
			continue
		case !namePattern.MatchString(name) || len(name) > 100:
			p.errorf(f.key, path, "a role name is letters, digits, '.', '_', '@' and '-', starting with a letter or digit, at most 100 characters")
			continue
		}
		if r := p.role(f.value, path, name); r != nil {
			pol.roles[name] = r
		}
	}
}

// sortedByLine lists a mapping's fields in file order, so that
// diagnostics come out in it.
func sortedByLine(fs map[string]field) []string {
	names := make([]string, 0, len(fs))
	for name := range fs {
		names = append(names, name)
	}
	slices.SortFunc(names, func(a, b string) int {
		return fs[a].key.Line*10000 + fs[a].key.Column - fs[b].key.Line*10000 - fs[b].key.Column
	})
	return names
}

func (p *parser) role(n *yaml.Node, path, name string) *role {
	before := len(p.diags)
	fs := p.fields(n, path, "allow", "stacks", "sources", "labels")
	if fs == nil {
		return nil
	}
	r := &role{name: name}
	if f, ok := fs["allow"]; ok {
		r.allow = p.actions(f.value, join(path, "allow"))
	}
	if len(r.allow) == 0 && len(p.diags) == before {
		p.errorf(n, join(path, "allow"), "a role must allow at least one action (%s)", strings.Join(actions, ", "))
	}
	if f, ok := fs["stacks"]; ok {
		r.stacks = p.globs(f.value, join(path, "stacks"))
	}
	if f, ok := fs["sources"]; ok {
		r.sources = p.sources(f.value, join(path, "sources"))
	}
	if f, ok := fs["labels"]; ok {
		r.labels = p.labels(f.value, join(path, "labels"))
	}
	if len(p.diags) > before {
		return nil
	}
	return r
}

func (p *parser) actions(n *yaml.Node, path string) []string {
	list, nodes := p.strs(n, path)
	for i, a := range list {
		switch {
		case a == "resume":
			p.errorf(nodes[i], path, "resume is allowed together with pause: allow pause")
		case !knownAction(a):
			p.errorf(nodes[i], path, "unknown action %q (actions: %s)", a, strings.Join(actions, ", "))
		}
	}
	return list
}

func (p *parser) globs(n *yaml.Node, at string) []string {
	list, nodes := p.strs(n, at)
	for i, g := range list {
		// path.Match checks the whole pattern even when it does not match.
		if _, err := path.Match(g, ""); err != nil || g == "" {
			p.errorf(nodes[i], at, "not a valid stack name glob (*, ? and [a-z] as in path.Match)")
		}
	}
	return list
}

func (p *parser) sources(n *yaml.Node, path string) []string {
	list, nodes := p.strs(n, path)
	for i, s := range list {
		if s == "" || strings.Contains(strings.TrimSuffix(s, "*"), "*") {
			p.errorf(nodes[i], path, "a source is a config source as given to --config, or a prefix of one followed by *")
		}
	}
	return list
}

func (p *parser) labels(n *yaml.Node, path string) map[string]string {
	fs := p.fields(n, path)
	out := make(map[string]string, len(fs))
	for _, k := range sortedByLine(fs) {
		if v, ok := p.str(fs[k].value, join(path, k)); ok {
			out[k] = v
		}
	}
	return out
}

// roleRefs reads a list of role names, each defined or built in.
func (p *parser) roleRefs(n *yaml.Node, path string, pol *Policy) []string {
	list, nodes := p.strs(n, path)
	for i, name := range list {
		if pol.role(name) == nil {
			p.errorf(nodes[i], path, "unknown role %q%s", name, p.roleHint(name, pol))
		}
	}
	return list
}

func (p *parser) roleHint(name string, pol *Policy) string {
	names := []string{AdminRole}
	for n := range pol.roles {
		names = append(names, n)
	}
	if s := spec.Closest(name, names); s != "" {
		return fmt.Sprintf(" (did you mean %q?)", s)
	}
	return " (define it under roles)"
}

func (p *parser) tokens(n *yaml.Node, pol *Policy) {
	names := map[string]int{}
	hashes := map[[32]byte]int{}
	for i, item := range p.list(n, "tokens") {
		path := index("tokens", i)
		t, nameNode, hashNode := p.token(item, path, pol)
		if t == nil {
			continue
		}
		if line, dup := names[t.name]; dup {
			p.errorf(nameNode, join(path, "name"), "duplicate token name %q (first at line %d)", t.name, line)
			continue
		}
		if line, dup := hashes[t.hash]; dup {
			p.errorf(hashNode, join(path, "sha256"), "the same hash as the token at line %d: one secret, one name", line)
			continue
		}
		names[t.name], hashes[t.hash] = nameNode.Line, nameNode.Line
		pol.tokens = append(pol.tokens, t)
	}
}

// emptyHash is the SHA-256 of nothing, which no token can be.
var emptyHash = sha256.Sum256(nil)

// token reads one token entry; nil when it has a problem.
func (p *parser) token(n *yaml.Node, path string, pol *Policy) (t *token, nameNode, hashNode *yaml.Node) {
	before := len(p.diags)
	fs := p.fields(n, path, "name", "sha256", "roles", "expires")
	if fs == nil {
		return nil, nil, nil
	}
	t = &token{}
	for _, req := range []string{"name", "sha256", "roles"} {
		if _, ok := fs[req]; !ok {
			p.errorf(n, join(path, req), "required")
		}
	}
	if f, ok := fs["name"]; ok {
		nameNode = f.value
		if s, ok := p.str(f.value, join(path, "name")); ok {
			t.name = s
			if !namePattern.MatchString(s) || len(s) > 100 {
				p.errorf(f.value, join(path, "name"), "a token name is letters, digits, '.', '_', '@' and '-', starting with a letter or digit, at most 100 characters")
			}
		}
	}
	if f, ok := fs["sha256"]; ok {
		hashNode = f.value
		p.hash(f.value, join(path, "sha256"), &t.hash)
	}
	if f, ok := fs["roles"]; ok {
		t.roles = p.roleRefs(f.value, join(path, "roles"), pol)
		if len(t.roles) == 0 && len(p.diags) == before {
			p.errorf(f.value, join(path, "roles"), "a token needs at least one role")
		}
	}
	if f, ok := fs["expires"]; ok {
		t.expires = p.time(f.value, join(path, "expires"))
	}
	if len(p.diags) > before {
		return nil, nil, nil
	}
	return t, nameNode, hashNode
}

// hash reads 64 hex digits. Messages never quote the value.
func (p *parser) hash(n *yaml.Node, path string, into *[32]byte) {
	s, ok := p.str(n, path)
	if !ok {
		return
	}
	raw, err := hex.DecodeString(s)
	if err != nil || len(raw) != sha256.Size {
		p.errorf(n, path, "expected 64 hex digits, the SHA-256 of the token (printf %%s \"$TOKEN\" | sha256sum)")
		return
	}
	copy(into[:], raw)
	if *into == emptyHash {
		p.errorf(n, path, "the SHA-256 of an empty token")
	}
}

// time reads an RFC 3339 time, or a date (midnight UTC).
func (p *parser) time(n *yaml.Node, path string) time.Time {
	s, ok := p.str(n, path)
	if !ok {
		return time.Time{}
	}
	if t, err := time.Parse(time.RFC3339, s); err == nil {
		return t
	}
	if t, err := time.Parse(time.DateOnly, s); err == nil {
		return t
	}
	p.errorf(n, path, "expected a time like 2027-01-01T00:00:00Z, or a date like 2027-01-01")
	return time.Time{}
}

func (p *parser) bindings(n *yaml.Node, pol *Policy) {
	for i, item := range p.list(n, "bindings") {
		path := index("bindings", i)
		fs := p.fields(item, path, "user", "group", "roles")
		if fs == nil {
			continue
		}
		user, hasUser := fs["user"]
		group, hasGroup := fs["group"]
		if hasUser == hasGroup {
			p.errorf(item, path, "a binding names either a user or a group")
			continue
		}
		f, ok := fs["roles"]
		if !ok {
			p.errorf(item, join(path, "roles"), "missing: the roles the binding gives")
			continue
		}
		roles := p.roleRefs(f.value, join(path, "roles"), pol)
		if len(roles) == 0 {
			p.errorf(f.value, join(path, "roles"), "a binding needs at least one role")
		}
		pol.bindings++
		if hasUser {
			if name, ok := p.nonEmpty(user.value, join(path, "user")); ok {
				pol.users[name] = append(pol.users[name], roles...)
				key := emailKey(name)
				pol.emails[key] = append(pol.emails[key], roles...)
			}
		} else if name, ok := p.nonEmpty(group.value, join(path, "group")); ok {
			pol.groups[name] = append(pol.groups[name], roles...)
		}
	}
}

func (p *parser) nonEmpty(n *yaml.Node, path string) (string, bool) {
	s, ok := p.str(n, path)
	if ok && strings.TrimSpace(s) == "" {
		p.errorf(n, path, "must not be empty")
		return "", false
	}
	return s, ok
}
