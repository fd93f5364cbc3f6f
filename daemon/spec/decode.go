package spec

import (
	"fmt"
	"math"
	"reflect"
	"sort"
	"strings"
	"sync"
	"time"

	"gopkg.in/yaml.v3"
)

// maxNodes bounds how many YAML nodes one load (every document of every
// file) may expand to, so that aliases cannot make small files decode
// into enormous values, one document or twenty.
const maxNodes = 1 << 20

// decoder turns YAML nodes into typed values strictly: unknown fields,
// duplicate keys and type mismatches become diagnostics that carry the
// file, line, column and field path. It never quotes a value in a message.
type decoder struct {
	file  string
	diags Diagnostics
	// src records where each decoded path's value starts. Validation uses
	// it to place problems it finds after decoding.
	src map[string]Pos
	// keys records where each mapping key is written, by path.
	keys map[string]Pos
	// nodes counts the nodes decoded in the whole load; shared by the
	// load's decoders.
	nodes *int
	// rendered is set for a StackSet's rendered template, whose field
	// references of boolean parameters are booleans: a string field then
	// takes a boolean's text too.
	rendered bool
}

// newDecoder decodes one document of file, counting nodes in *nodes.
func newDecoder(file string, nodes *int) *decoder {
	return &decoder{file: file, src: map[string]Pos{}, keys: map[string]Pos{}, nodes: nodes}
}

// nodeDecoder is implemented by types that decode themselves.
type nodeDecoder interface {
	decodeYAML(d *decoder, n *yaml.Node, path string)
}

func (d *decoder) pos(n *yaml.Node) Pos {
	return Pos{File: d.file, Line: n.Line, Col: n.Column}
}

func (d *decoder) errorf(n *yaml.Node, path, format string, args ...any) {
	d.diags = append(d.diags, Diagnostic{Pos: d.pos(n), Path: path, Msg: fmt.Sprintf(format, args...)})
}

func (d *decoder) notef(n *yaml.Node, path, format string, args ...any) {
	d.diags = append(d.diags, Diagnostic{Pos: d.pos(n), Path: path, Msg: fmt.Sprintf(format, args...), Note: true})
}

// hasErrors reports whether any error (not a note) was recorded.
func (d *decoder) hasErrors() bool {
	return len(d.diags.Errors()) > 0
}

func joinPath(path, key string) string {
	switch {
	case path == "":
		return key
	case key == "":
		return path
	}
	return path + "." + key
}

func indexPath(path string, i int) string {
	return fmt.Sprintf("%s[%d]", path, i)
}

// resolve follows aliases and counts nodes; it returns nil when the
// document is too large.
func (d *decoder) resolve(n *yaml.Node, path string) *yaml.Node {
	for n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	*d.nodes++
	if *d.nodes == maxNodes {
		d.errorf(n, path, "document expands to more than %d nodes (counted over the whole config)", maxNodes)
	}
	if *d.nodes >= maxNodes {
		return nil
	}
	return n
}

// decode decodes n into v, which must be settable.
func (d *decoder) decode(n *yaml.Node, path string, v reflect.Value) {
	if n = d.resolve(n, path); n == nil {
		return
	}
	d.src[path] = d.pos(n)
	if v.Type() == nodeType { // kept as written, for shapes decided later
		v.Set(reflect.ValueOf(*n))
		return
	}
	if nd, ok := v.Addr().Interface().(nodeDecoder); ok {
		nd.decodeYAML(d, n, path)
		return
	}
	if isNull(n) && v.Kind() != reflect.Interface {
		v.SetZero()
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		d.decode(n, path, p.Elem())
		v.Set(p)
	case reflect.Struct:
		d.decodeStruct(n, path, v)
	case reflect.Map:
		d.decodeMap(n, path, v)
	case reflect.Slice:
		d.decodeSlice(n, path, v)
	case reflect.String:
		if s, ok := d.scalarString(n, path); ok {
			v.SetString(s)
		}
	case reflect.Bool:
		var b bool
		if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!bool" || n.Decode(&b) != nil {
			d.errorf(n, path, "expected true or false, got %s", describe(n))
			return
		}
		v.SetBool(b)
	case reflect.Int64, reflect.Int:
		d.decodeInt(n, path, v)
	case reflect.Interface:
		if val, ok := d.value(n, path); ok && val != nil {
			v.Set(reflect.ValueOf(val))
		}
	default:
		panic(fmt.Sprintf("spec: cannot decode into %s", v.Type()))
	}
}

func (d *decoder) decodeInt(n *yaml.Node, path string, v reflect.Value) {
	var i int64
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" || n.Decode(&i) != nil {
		d.errorf(n, path, "expected an integer, got %s", describe(n))
		return
	}
	if i < 0 {
		d.errorf(n, path, "must not be negative")
		return
	}
	if v.Kind() == reflect.Int && i > math.MaxInt32 {
		d.errorf(n, path, "too large")
		return
	}
	v.SetInt(i)
}

// scalarString accepts any plain scalar except booleans, which are almost
// always a mistake in a string field (`branch: yes`).
func (d *decoder) scalarString(n *yaml.Node, path string) (string, bool) {
	if n.Kind != yaml.ScalarNode {
		d.errorf(n, path, "expected a string, got %s", describe(n))
		return "", false
	}
	switch n.ShortTag() {
	case "!!str", "!!int", "!!float", "!!timestamp", "!!binary":
		return n.Value, true
	case "!!bool":
		if d.rendered {
			return n.Value, true
		}
		d.errorf(n, path, "expected a string, got a boolean (quote it if it is meant as text)")
	default:
		d.errorf(n, path, "expected a string, got %s", describe(n))
	}
	return "", false
}

func (d *decoder) decodeSlice(n *yaml.Node, path string, v reflect.Value) {
	if n.Kind != yaml.SequenceNode {
		d.errorf(n, path, "expected a list, got %s", describe(n))
		return
	}
	s := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
	for i, item := range n.Content {
		d.decode(item, indexPath(path, i), s.Index(i))
	}
	v.Set(s)
}

// pairs returns the key/value pairs of a mapping, reporting non-scalar,
// duplicate and merge keys.
func (d *decoder) pairs(n *yaml.Node, path string) (keys []string, keyNodes, values []*yaml.Node, ok bool) {
	if n.Kind != yaml.MappingNode {
		d.errorf(n, path, "expected a mapping, got %s", describe(n))
		return nil, nil, nil, false
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		switch {
		case k.Kind != yaml.ScalarNode:
			d.errorf(k, path, "mapping keys must be strings, got %s", describe(k))
			continue
		case k.ShortTag() == "!!merge":
			d.errorf(k, path, "merge keys (<<) are not supported")
			continue
		case seen[k.Value]:
			d.errorf(k, joinPath(path, k.Value), "duplicate key")
			continue
		}
		seen[k.Value] = true
		keys = append(keys, k.Value)
		keyNodes = append(keyNodes, k)
		values = append(values, val)
	}
	return keys, keyNodes, values, true
}

func (d *decoder) decodeMap(n *yaml.Node, path string, v reflect.Value) {
	keys, keyNodes, values, ok := d.pairs(n, path)
	if !ok {
		return
	}
	m := reflect.MakeMapWithSize(v.Type(), len(keys))
	for i, k := range keys {
		d.keys[joinPath(path, k)] = d.pos(keyNodes[i])
		elem := reflect.New(v.Type().Elem()).Elem()
		d.decode(values[i], joinPath(path, k), elem)
		m.SetMapIndex(reflect.ValueOf(k).Convert(v.Type().Key()), elem)
	}
	v.Set(m)
}

func (d *decoder) decodeStruct(n *yaml.Node, path string, v reflect.Value) {
	keys, keyNodes, values, ok := d.pairs(n, path)
	if !ok {
		return
	}
	fields := fieldsOf(v.Type())
	set := map[int]string{} // field number → key used, to catch alias clashes
	for i, k := range keys {
		f, ok := fields.byName[k]
		if !ok {
			d.unknownField(keyNodes[i], path, k, fields)
			continue
		}
		p := joinPath(path, k)
		if other, dup := set[f.num]; dup {
			d.errorf(keyNodes[i], p, "set either %s or %s, not both", other, k)
			continue
		}
		set[f.num] = k
		d.decode(values[i], p, v.FieldByIndex(f.index))
		switch f.kind {
		case "k8s":
			d.notef(keyNodes[i], p, "ignored: Kubernetes-only field")
		case "deprecated":
			d.notef(keyNodes[i], p, "deprecated in PKO v2; still honoured")
		case "noop":
			d.notef(keyNodes[i], p, "ignored: PKO v2 accepts and ignores this field too")
		default:
			if why, ok := strings.CutPrefix(f.kind, "why="); ok {
				d.notef(keyNodes[i], p, "ignored: %s", why)
			}
		}
	}
}

func (d *decoder) unknownField(k *yaml.Node, path, name string, fields *structFields) {
	msg := fmt.Sprintf("unknown field %q", name)
	_, inSpec := fields.byName["projectRepo"] // a Stack spec, where config keys get misplaced
	switch s := Closest(name, fields.names); {
	case s != "":
		msg += fmt.Sprintf(" (did you mean %q?)", s)
	case inSpec:
		msg += fmt.Sprintf(" (a stack config value belongs under config: config.%s)", name)
	}
	d.errorf(k, joinPath(path, name), "%s", msg)
}

// value converts n into a JSON-compatible Go value: map[string]any, []any,
// string, int64, float64, bool or nil.
func (d *decoder) value(n *yaml.Node, path string) (any, bool) {
	if n = d.resolve(n, path); n == nil {
		return nil, false
	}
	switch n.Kind {
	case yaml.MappingNode:
		keys, _, values, ok := d.pairs(n, path)
		if !ok {
			return nil, false
		}
		m := make(map[string]any, len(keys))
		for i, k := range keys {
			v, ok := d.value(values[i], joinPath(path, k))
			if !ok {
				return nil, false
			}
			m[k] = v
		}
		return m, true
	case yaml.SequenceNode:
		s := make([]any, len(n.Content))
		for i, item := range n.Content {
			v, ok := d.value(item, indexPath(path, i))
			if !ok {
				return nil, false
			}
			s[i] = v
		}
		return s, true
	case yaml.ScalarNode:
		return d.scalarValue(n, path)
	}
	d.errorf(n, path, "unsupported YAML node")
	return nil, false
}

func (d *decoder) scalarValue(n *yaml.Node, path string) (any, bool) {
	switch n.ShortTag() {
	case "!!null":
		return nil, true
	case "!!bool":
		var b bool
		err := n.Decode(&b)
		return b, err == nil
	case "!!int":
		var i int64
		if err := n.Decode(&i); err == nil {
			return i, true
		}
		fallthrough // too large for int64: keep it as a float
	case "!!float":
		var f float64
		if err := n.Decode(&f); err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
			d.errorf(n, path, "number out of range")
			return nil, false
		}
		return f, true
	default:
		if strings.Contains(n.Value, "${") {
			// Where a placeholder problem is; other nested values are
			// not recorded, which would cost dearly for large ones.
			d.src[path] = d.pos(n)
		}
		return n.Value, true
	}
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

// describe names a node's kind for messages, without its value.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias"
	}
	switch n.ShortTag() {
	case "!!str":
		return "a string"
	case "!!int", "!!float":
		return "a number"
	case "!!bool":
		return "a boolean"
	case "!!null":
		return "nothing"
	}
	return "a value tagged " + n.ShortTag()
}

func (x *Duration) decodeYAML(d *decoder, n *yaml.Node, path string) {
	if isNull(n) {
		return
	}
	s, ok := d.scalarString(n, path)
	if !ok {
		return
	}
	dur, err := time.ParseDuration(s)
	switch {
	case err != nil:
		d.errorf(n, path, "invalid duration (write it like 90s, 30m or 1h30m)")
	case dur < 0:
		d.errorf(n, path, "must not be negative")
	default:
		x.Duration = dur
	}
}

func (x *Ignored) decodeYAML(d *decoder, n *yaml.Node, path string) {
	x.node = n
}

// decodeYAML accepts both prerequisite shapes (see Prerequisite).
func (x *Prerequisite) decodeYAML(d *decoder, n *yaml.Node, path string) {
	var raw struct {
		Name        string    `yaml:"name"`
		Type        string    `yaml:"type"`
		Requirement yaml.Node `yaml:"requirement"`
		// SucceededWithinDuration belongs to the {type: Stack} shape.
		SucceededWithinDuration *Duration `yaml:"succeededWithinDuration"`
	}
	d.decode(n, path, reflect.ValueOf(&raw).Elem())
	req, reqPath := &raw.Requirement, joinPath(path, "requirement")
	if raw.Type == "" && raw.SucceededWithinDuration == nil {
		x.Name = raw.Name
		if req.Kind != 0 && !isNull(req) {
			x.Requirement = &Requirement{}
			d.decode(req, reqPath, reflect.ValueOf(x.Requirement).Elem())
		}
		return
	}
	// The Argo CD guide's shape: {type: Stack, requirement: NAME, ...}.
	if raw.Type != "Stack" {
		d.errorf(n, joinPath(path, "type"), "unknown prerequisite type (the only type is Stack)")
		return
	}
	if raw.Name != "" {
		d.errorf(n, path, "set the stack's name in requirement, not name, when type is Stack")
		return
	}
	x.argoShape = true
	if req.Kind != 0 {
		x.Name, _ = d.scalarString(req, reqPath)
	}
	if raw.SucceededWithinDuration != nil {
		x.Requirement = &Requirement{SucceededWithinDuration: raw.SucceededWithinDuration}
	}
}

// decodeYAML accepts both forms of a StackOutput reference (see
// ResourceRef).
func (x *ResourceRef) decodeYAML(d *decoder, n *yaml.Node, path string) {
	var raw struct {
		plainRef `yaml:",inline"`
		Stack    string `yaml:"stack"`
		Output   string `yaml:"output"`
	}
	d.decode(n, path, reflect.ValueOf(&raw).Elem())
	*x = ResourceRef(raw.plainRef)
	if raw.Stack == "" && raw.Output == "" {
		return
	}
	switch {
	case x.Type != RefStackOutput:
		d.errorf(n, path, "stack and output belong to type StackOutput")
	case x.StackOutput != nil:
		d.errorf(n, path, "set either stackOutput or stack and output, not both")
	default:
		x.StackOutput = &StackOutputSelect{Stack: raw.Stack, Output: raw.Output}
		x.flat = true
	}
}

// plainRef has ResourceRef's fields without its decoder.
type plainRef ResourceRef

// structFields is the YAML view of a struct type.
type structFields struct {
	byName map[string]fieldInfo
	names  []string
}

type fieldInfo struct {
	index []int
	num   int    // identifies the Go field, shared by a name and its alias
	kind  string // the stackd tag: "", "k8s", "deprecated", "noop" or "why=REASON"
}

var nodeType = reflect.TypeOf(yaml.Node{})

var fieldCache sync.Map // reflect.Type → *structFields

// fieldsOf lists the YAML names of t's fields, following inline embedded
// structs and aliases.
func fieldsOf(t reflect.Type) *structFields {
	if f, ok := fieldCache.Load(t); ok {
		return f.(*structFields)
	}
	sf := &structFields{byName: map[string]fieldInfo{}}
	collectFields(t, nil, sf)
	sort.Strings(sf.names)
	fieldCache.Store(t, sf)
	return sf
}

func collectFields(t reflect.Type, index []int, sf *structFields) {
	for i := range t.NumField() {
		f := t.Field(i)
		idx := append(append([]int(nil), index...), i)
		name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if opts == "inline" {
			collectFields(f.Type, idx, sf)
			continue
		}
		if name == "" || name == "-" || !f.IsExported() {
			continue
		}
		info := fieldInfo{index: idx, num: len(sf.byName)}
		tag := f.Tag.Get("stackd")
		alias, hasAlias := strings.CutPrefix(tag, "alias=")
		if !hasAlias {
			info.kind = tag
		}
		sf.byName[name] = info
		sf.names = append(sf.names, name)
		if hasAlias {
			sf.byName[alias] = info
			sf.names = append(sf.names, alias)
		}
	}
}

// Closest returns the candidate nearest to name by edit distance, when it
// is near enough to be a likely typo; empty otherwise. The command line
// suggests flags with it too.
func Closest(name string, candidates []string) string {
	best, bestDist := "", len(name)/2+1
	for _, c := range candidates {
		if dist := editDistance(strings.ToLower(name), strings.ToLower(c)); dist < bestDist {
			best, bestDist = c, dist
		}
	}
	return best
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
