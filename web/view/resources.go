package view

import (
	"cmp"
	"fmt"
	"hash/fnv"
	"html/template"
	"slices"
	"strings"

	"github.com/stackd/stackd/daemon/model"
)

// The stack page shows the resources of the stack's last exported state
// twice: as a tree of <details> that works without JavaScript, and as a
// server-rendered SVG picture whose nodes link to the tree's rows. Both
// stay readable at hundreds of resources: beyond treeOpenLimit the tree
// opens only its first level, beyond graphLimit the picture collapses
// components into one node each, and a search (?q=, a GET form) narrows
// both to the matching resources and their ancestors.

const (
	// treeOpenLimit is how many resources a tree shows opened whole.
	treeOpenLimit = 60
	// graphLimit is how many nodes the picture draws at most.
	graphLimit = 80
)

// ResNode is one resource in the tree.
type ResNode struct {
	model.Resource
	// Anchor is the id of its row, which the picture links to.
	Anchor   string
	Status   string // a CSS class: in-sync, drifted, deleted, unknown, stack, provider
	Children []*ResNode
	// Open says the node's <details> starts opened.
	Open bool
	// Total counts its descendants.
	Total int
	// Worst is the worst status among it and its descendants.
	Worst string
}

// TypeCount is how many resources of one type the stack has.
type TypeCount struct {
	Type  string
	Count int
}

// Resources is what the stack page renders of the resources.
type Resources struct {
	Snapshot model.Resources
	Roots    []*ResNode
	Counts   []TypeCount
	Total    int
	// Query is the search; Matches how many resources it found.
	Query   string
	Matches int
	Graph   template.HTML
	Err     string
}

// statusOf is r's CSS status.
func statusOf(r model.Resource) string {
	switch {
	case r.Type == model.StackType:
		return "stack"
	case strings.HasPrefix(r.Type, model.ProviderTypePrefix):
		return "provider"
	case r.Drift == "":
		return "unknown"
	}
	return r.Drift
}

// severity orders statuses for a collapsed node's colour.
func severity(status string) int {
	switch status {
	case model.ResourceDeleted:
		return 3
	case model.ResourceDrifted:
		return 2
	case model.ResourceInSync:
		return 1
	}
	return 0
}

// AnchorOf is a short, stable HTML id for a URN.
func AnchorOf(urn string) string {
	h := fnv.New64a()
	_, _ = h.Write([]byte(urn))
	return fmt.Sprintf("r-%016x", h.Sum64())
}

// BuildResources makes the tree of rs, narrowed to the resources whose
// name, type or URN holds query (case-insensitive) and their ancestors.
func BuildResources(snap model.Resources, query string) Resources {
	v := Resources{Snapshot: snap, Total: len(snap.Resources), Query: strings.TrimSpace(query)}
	v.Counts = countTypes(snap.Resources)
	nodes := make(map[string]*ResNode, len(snap.Resources))
	for _, r := range snap.Resources {
		nodes[r.URN] = &ResNode{Resource: r, Anchor: AnchorOf(r.URN), Status: statusOf(r)}
	}
	keep := matching(snap.Resources, nodes, strings.ToLower(v.Query))
	for _, r := range snap.Resources {
		n := nodes[r.URN]
		if !keep[r.URN] {
			continue
		}
		if p := nodes[r.Parent]; p != nil && keep[r.Parent] {
			p.Children = append(p.Children, n)
		} else {
			v.Roots = append(v.Roots, n)
		}
	}
	if v.Query != "" {
		for _, r := range snap.Resources {
			if matches(r, strings.ToLower(v.Query)) {
				v.Matches++
			}
		}
	}
	openAll := v.Query != "" || len(keep) <= treeOpenLimit
	for _, n := range v.Roots {
		summarizeNode(n, 0, openAll)
	}
	return v
}

// countTypes counts rs by type, most first.
func countTypes(rs []model.Resource) []TypeCount {
	m := map[string]int{}
	for _, r := range rs {
		m[r.Type]++
	}
	out := make([]TypeCount, 0, len(m))
	for t, n := range m {
		out = append(out, TypeCount{t, n})
	}
	slices.SortFunc(out, func(a, b TypeCount) int { return cmp.Or(b.Count-a.Count, strings.Compare(a.Type, b.Type)) })
	return out
}

func matches(r model.Resource, q string) bool {
	return strings.Contains(strings.ToLower(r.Name), q) || strings.Contains(strings.ToLower(r.Type), q) ||
		strings.Contains(strings.ToLower(r.URN), q)
}

// matching is the set of URNs to show: all without a query, else those
// that match and their ancestors.
func matching(rs []model.Resource, nodes map[string]*ResNode, q string) map[string]bool {
	keep := make(map[string]bool, len(rs))
	for _, r := range rs {
		if q != "" && !matches(r, q) {
			continue
		}
		for urn := r.URN; urn != "" && !keep[urn]; {
			keep[urn] = true
			n := nodes[urn]
			if n == nil {
				break
			}
			urn = n.Parent
		}
	}
	return keep
}

// summarizeNode fills in Total, Worst and Open of n's subtree.
func summarizeNode(n *ResNode, depth int, openAll bool) {
	n.Worst, n.Total = n.Status, 0
	for _, c := range n.Children {
		summarizeNode(c, depth+1, openAll)
		n.Total += 1 + c.Total
		if severity(c.Worst) > severity(n.Worst) {
			n.Worst = c.Worst
		}
	}
	n.Open = openAll || depth == 0
}

// ShortType is the last part of a type token ("index:File" of
// "stackdtest:index:File").
func ShortType(t string) string {
	if i := strings.IndexByte(t, ':'); i >= 0 && i < len(t)-1 {
		return t[i+1:]
	}
	return t
}

// graphNode is one box of the picture.
type graphNode struct {
	n         *ResNode
	depth     int
	row       int
	collapsed int // descendants folded into it
	parent    *graphNode
}

// Layout of the picture: one column per depth, one row per node.
const (
	colWidth  = 230
	boxWidth  = 200
	rowHeight = 34
	boxHeight = 26
	margin    = 8
)

// layoutGraph lays out the nodes the picture draws, in tree order: all
// of them when they fit in limit, else components below the top level
// folded, and the rest cut at limit.
func layoutGraph(roots []*ResNode, limit int) []*graphNode {
	count := 0
	for _, r := range roots {
		count += 1 + r.Total
	}
	fold := count > limit
	var out []*graphNode
	var walk func(n *ResNode, depth int, parent *graphNode)
	walk = func(n *ResNode, depth int, parent *graphNode) {
		if len(out) >= limit {
			return
		}
		g := &graphNode{n: n, depth: depth, row: len(out), parent: parent}
		out = append(out, g)
		if fold && depth >= 1 && len(n.Children) > 0 {
			g.collapsed = n.Total
			return
		}
		for _, c := range n.Children {
			walk(c, depth+1, g)
		}
	}
	for _, r := range roots {
		walk(r, 0, nil)
	}
	return out
}

// RenderGraph draws the picture as inline SVG: boxes coloured by status
// (a folded component by its worst descendant), elbow edges from parent
// to child, each box a link to the resource's row in the tree. Every
// text is escaped; styling is by class (the page's CSP allows no inline
// style).
func RenderGraph(roots []*ResNode) template.HTML {
	total := 0
	for _, r := range roots {
		total += 1 + r.Total
	}
	nodes := layoutGraph(roots, graphLimit)
	if len(nodes) == 0 {
		return ""
	}
	maxDepth := 0
	for _, g := range nodes {
		maxDepth = max(maxDepth, g.depth)
	}
	width := margin*2 + maxDepth*colWidth + boxWidth
	height := margin*2 + len(nodes)*rowHeight
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" class="resource-graph" role="img" width="%d" height="%d" viewBox="0 0 %d %d" aria-label="%d resources">`,
		width, height, width, height, total)
	for _, g := range nodes {
		if g.parent == nil {
			continue
		}
		x1, y1 := margin+g.parent.depth*colWidth+boxWidth, margin+g.parent.row*rowHeight+boxHeight/2
		x2, y2 := margin+g.depth*colWidth, margin+g.row*rowHeight+boxHeight/2
		mid := x1 + (x2-x1)/2
		fmt.Fprintf(&b, `<path class="edge" d="M%d %d H%d V%d H%d"/>`, x1, y1, mid, y2, x2)
	}
	for _, g := range nodes {
		writeGraphNode(&b, g)
	}
	if shown := countShown(nodes); shown < total {
		fmt.Fprintf(&b, `<text class="more" x="%d" y="%d">%d more not drawn: search to narrow</text>`, margin, height-2, total-shown)
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String()) // every interpolated text is escaped above
}

// countShown counts the resources the drawn nodes stand for.
func countShown(nodes []*graphNode) int {
	n := 0
	for _, g := range nodes {
		n += 1 + g.collapsed
	}
	return n
}

func writeGraphNode(b *strings.Builder, g *graphNode) {
	n := g.n
	x, y := margin+g.depth*colWidth, margin+g.row*rowHeight
	status := n.Status
	label := n.Name
	if g.collapsed > 0 {
		status = n.Worst
		label = fmt.Sprintf("%s (+%d)", n.Name, g.collapsed)
	}
	esc := template.HTMLEscapeString
	title := n.Type + " " + n.Name
	if n.Drift != "" {
		title += ": " + n.Drift
	}
	fmt.Fprintf(b, `<a href="#%s" class="node node-%s"><title>%s</title>`, n.Anchor, status, esc(title))
	fmt.Fprintf(b, `<rect x="%d" y="%d" width="%d" height="%d" rx="4"/>`, x, y, boxWidth, boxHeight)
	fmt.Fprintf(b, `<text x="%d" y="%d">%s <tspan class="type">%s</tspan></text></a>`,
		x+8, y+17, esc(Clip(label, 22)), esc(Clip(ShortType(n.Type), max(4, 26-len(label)))))
}
