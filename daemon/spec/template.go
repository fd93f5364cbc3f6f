package spec

import (
	"errors"
	"reflect"
	"regexp"
	"strings"
	"text/template"
	"text/template/parse"

	"gopkg.in/yaml.v3"
)

// maxTemplateNodes bounds a StackSet template's size, aliases expanded:
// it is rendered once per generated stack.
const maxTemplateNodes = 1 << 14

// StackTemplate is a StackSet's template as written: metadata (name,
// labels, annotations) and a stack spec, every string of which, keys
// included, is a Go text/template over a generator's parameters. The
// templates are parsed when the config loads; the spec is decoded and
// checked once per parameter set, when rendered.
type StackTemplate struct {
	node *yaml.Node
	// texts are the parsed templates of the strings holding "{{", by node.
	texts map[*yaml.Node]*stringTemplate
	// dynamic holds the nodes with a template at or below them; the
	// others are shared by every rendering.
	dynamic map[*yaml.Node]bool
}

// stringTemplate is one string's template.
type stringTemplate struct {
	t *template.Template
	// field is set when the string is a single field reference,
	// "{{ .replicas }}" or "{{ .path.depth }}": a parameter that is a
	// number or a boolean keeps its type, so that it may fill such a
	// field.
	field []string
}

// templateShape is what the load checks of a template: the spec is
// checked once rendered.
type templateShape struct {
	Metadata templateMeta `yaml:"metadata"`
	Spec     yaml.Node    `yaml:"spec"`
}

type templateMeta struct {
	Name        string            `yaml:"name"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
}

// renderedTemplate is a rendered template, decoded as a stack.
type renderedTemplate struct {
	Metadata templateMeta `yaml:"metadata"`
	Spec     StackSpec    `yaml:"spec"`
}

// decodeYAML checks the template's shape and metadata strictly and parses
// every string's template, reporting a syntax error at its string.
func (x *StackTemplate) decodeYAML(d *decoder, n *yaml.Node, path string) {
	if isNull(n) {
		return
	}
	var shape templateShape
	before := len(d.diags.Errors())
	d.decode(n, path, reflect.ValueOf(&shape).Elem())
	if len(d.diags.Errors()) > before {
		return
	}
	if shape.Metadata.Name == "" {
		p := joinPath(path, "metadata.name")
		d.errorf(nodeAt(d, p), p, "missing name (a template of the stacks' names, such as app-{{.path.basename}})")
	}
	x.node = n
	x.texts = map[*yaml.Node]*stringTemplate{}
	x.dynamic = map[*yaml.Node]bool{}
	count := 0
	x.parse(d, n, path, &count)
}

// parse parses the templates of n and below, reporting at each string
// that does not parse; it reports whether n holds any template.
func (x *StackTemplate) parse(d *decoder, n *yaml.Node, path string, count *int) bool {
	for n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if *count++; *count > maxTemplateNodes {
		if *count == maxTemplateNodes+1 {
			d.errorf(n, path, "template expands to more than %d nodes", maxTemplateNodes)
		}
		return false
	}
	dynamic := false
	switch n.Kind {
	case yaml.ScalarNode:
		dynamic = x.parseString(d, n, path)
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			p := joinPath(path, n.Content[i].Value)
			dynamic = x.parseString(d, n.Content[i], p) || dynamic
			dynamic = x.parse(d, n.Content[i+1], p, count) || dynamic
		}
	case yaml.SequenceNode:
		for i, item := range n.Content {
			dynamic = x.parse(d, item, indexPath(path, i), count) || dynamic
		}
	}
	if dynamic {
		x.dynamic[n] = true
	}
	return dynamic
}

// parseString parses a string scalar holding "{{"; it reports whether n
// is a template.
func (x *StackTemplate) parseString(d *decoder, n *yaml.Node, path string) bool {
	if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!str" || !strings.Contains(n.Value, "{{") {
		return false
	}
	t, err := template.New("").Option("missingkey=error").Parse(n.Value)
	if err != nil {
		d.errorf(n, path, "invalid template: %s", secretSafe(path, templateMessage(err)))
		return false
	}
	x.texts[n] = &stringTemplate{t: t, field: fieldRef(t)}
	x.dynamic[n] = true
	return true
}

// fieldRef returns the field chain of a template that is one field
// reference and spaces, "{{ .a.b }}"; nil otherwise.
func fieldRef(t *template.Template) []string {
	var field []string
	for _, node := range t.Tree.Root.Nodes {
		switch n := node.(type) {
		case *parse.TextNode:
			if strings.TrimSpace(string(n.Text)) != "" {
				return nil
			}
		case *parse.ActionNode:
			if field != nil || len(n.Pipe.Decl) > 0 || len(n.Pipe.Cmds) != 1 || len(n.Pipe.Cmds[0].Args) != 1 {
				return nil
			}
			f, ok := n.Pipe.Cmds[0].Args[0].(*parse.FieldNode)
			if !ok {
				return nil
			}
			field = f.Ident
		default:
			return nil
		}
	}
	return field
}

// typedParam reports whether the parameter at field is a number or a
// boolean.
func typedParam(params map[string]any, field []string) bool {
	var v any = params
	for _, name := range field {
		m, ok := v.(map[string]any)
		if !ok {
			return false
		}
		v = m[name]
	}
	switch v.(type) {
	case int, int32, int64, uint, uint32, uint64, float32, float64, bool:
		return true
	}
	return false
}

// templateDetail strips text/template's own location from its messages:
// the diagnostic's position is the string's.
var templateDetail = regexp.MustCompile(`^template: [^:]*:\d+(:\d+)?: (executing "[^"]*" at <[^>]*>: )?`)

func templateMessage(err error) string {
	return templateDetail.ReplaceAllString(err.Error(), "")
}

// secretSafe returns msg, a template's error, unless path may hold a
// secret (a literal reference or a secrets value), whose template text
// the message could quote.
func secretSafe(path, msg string) string {
	if strings.Contains(path, ".literal") || strings.Contains(path, "secrets.") || strings.Contains(path, "secretsRef.") {
		return "(details withheld: the value may be a secret)"
	}
	return msg
}

// renderError is a string of the template that failed to execute.
type renderError struct {
	node *yaml.Node
	err  error
}

func (e *renderError) Error() string { return "executing template: " + templateMessage(e.err) }

// render returns the template with every string executed over params; the
// subtrees without templates are shared with the template, and are not
// to be changed. Rendered nodes keep their positions. filled holds the
// strings, keys included, that the parameters filled in.
func (x *StackTemplate) render(params map[string]any) (n *yaml.Node, filled map[*yaml.Node]bool, err error) {
	filled = map[*yaml.Node]bool{}
	n, err = x.renderNode(x.node, params, filled)
	return n, filled, err
}

func (x *StackTemplate) renderNode(n *yaml.Node, params map[string]any, filled map[*yaml.Node]bool) (*yaml.Node, error) {
	for n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if !x.dynamic[n] {
		return n, nil
	}
	if st := x.texts[n]; st != nil {
		r, err := st.render(n, params)
		if err == nil {
			filled[r] = true
		}
		return r, err
	}
	c := *n
	c.Content = make([]*yaml.Node, len(n.Content))
	for i, child := range n.Content {
		r, err := x.renderNode(child, params, filled)
		if err != nil {
			return nil, err
		}
		c.Content[i] = r
	}
	return &c, nil
}

// filledPaths lists the paths of the rendered template n's spec (relative
// to it: "backend", "envRefs.TOKEN.env.name") whose strings are in
// filled. A filled mapping key stands for its whole value.
func filledPaths(n *yaml.Node, filled map[*yaml.Node]bool) map[string]bool {
	out := map[string]bool{}
	var walk func(n *yaml.Node, path string, depth int)
	walk = func(n *yaml.Node, path string, depth int) {
		for n.Kind == yaml.AliasNode && depth < 64 {
			n, depth = n.Alias, depth+1
		}
		switch {
		case depth >= 64:
		case filled[n]:
			out[path] = true
		case n.Kind == yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				p := joinPath(path, n.Content[i].Value)
				if filled[n.Content[i]] {
					out[p] = true
					continue
				}
				walk(n.Content[i+1], p, depth+1)
			}
		case n.Kind == yaml.SequenceNode:
			for i, item := range n.Content {
				walk(item, indexPath(path, i), depth+1)
			}
		}
	}
	if spec := mappingValue(n, "spec"); spec != nil {
		walk(spec, "", 0)
	}
	return out
}

// mappingValue is the value of key in the mapping n, or nil.
func mappingValue(n *yaml.Node, key string) *yaml.Node {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}

// render executes one string. A string that is one field reference of a
// parameter that is a number or a boolean becomes a plain scalar of that
// type; any other result stays a string.
func (st *stringTemplate) render(n *yaml.Node, params map[string]any) (*yaml.Node, error) {
	var b strings.Builder
	if err := st.t.Execute(&b, params); err != nil {
		return nil, &renderError{node: n, err: err}
	}
	c := *n
	c.Value, c.Tag = b.String(), "!!str"
	if st.field != nil && typedParam(params, st.field) {
		plain := yaml.Node{Kind: yaml.ScalarNode, Value: strings.TrimSpace(c.Value)}
		switch plain.ShortTag() {
		case "!!int", "!!float", "!!bool":
			c.Value, c.Tag, c.Style = plain.Value, "", 0
		}
	}
	return &c, nil
}

// pathOf finds the path of target in the template, path being the
// template's; empty when it is not there.
func (x *StackTemplate) pathOf(target *yaml.Node, path string) string {
	var find func(n *yaml.Node, path string, depth int) (string, bool)
	find = func(n *yaml.Node, path string, depth int) (string, bool) {
		for n.Kind == yaml.AliasNode {
			n = n.Alias
		}
		if n == target {
			return path, true
		}
		if depth > 64 || !x.dynamic[n] {
			return "", false
		}
		for i, child := range n.Content {
			p := indexPath(path, i)
			if n.Kind == yaml.MappingNode {
				p = joinPath(path, n.Content[i-i%2].Value)
			}
			if r, ok := find(child, p, depth+1); ok {
				return r, ok
			}
		}
		return "", false
	}
	p, _ := find(x.node, path, 0)
	return p
}

// renderDiagnostic reports an error of rendering as a diagnostic at the string
// that failed.
func (x *StackTemplate) renderDiagnostic(err error, file, path string) Diagnostic {
	var re *renderError
	if !errors.As(err, &re) {
		return Diagnostic{Pos: Pos{File: file}, Path: path, Msg: err.Error()}
	}
	p := x.pathOf(re.node, path)
	return Diagnostic{
		Pos:  Pos{File: file, Line: re.node.Line, Col: re.node.Column},
		Path: p,
		Msg:  "executing template: " + secretSafe(p, templateMessage(re.err)),
	}
}
