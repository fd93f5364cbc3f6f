package view

import (
	"strings"
	"testing"

	"github.com/stackd/stackd/daemon/model"
	"github.com/stackd/stackd/web/webtest"
)

func TestBuildResources(t *testing.T) {
	for _, tc := range []struct {
		name, query        string
		n                  int
		roots, matches     int
		open, groupVisible bool
	}{
		{name: "small tree opens whole", n: 5, roots: 1, open: true, groupVisible: true},
		{name: "large tree opens its first level", n: 500, roots: 1, open: false, groupVisible: true},
		{name: "search keeps matches and ancestors", query: "FILE-497", n: 500, roots: 1, matches: 1, open: true, groupVisible: true},
		{name: "search without match", query: "nothing", n: 500, roots: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := BuildResources(webtest.Resources(tc.n), tc.query)
			if len(v.Roots) != tc.roots || v.Matches != tc.matches || v.Total != tc.n {
				t.Fatalf("roots %d, matches %d, total %d; want %d, %d, %d", len(v.Roots), v.Matches, v.Total, tc.roots, tc.matches, tc.n)
			}
			if tc.roots == 0 {
				return
			}
			stack := v.Roots[0]
			if !stack.Open || len(stack.Children) != 1 {
				t.Fatalf("stack node open %v with %d children, want open with the group", stack.Open, len(stack.Children))
			}
			group := stack.Children[0]
			if group.Open != tc.open || group.Name != "group" {
				t.Errorf("group %q open = %v, want %v", group.Name, group.Open, tc.open)
			}
			if tc.query == "" && (group.Total != tc.n-2 || group.Worst != model.ResourceDeleted) {
				t.Errorf("group total %d worst %q, want %d and deleted", group.Total, group.Worst, tc.n-2)
			}
			if tc.query != "" && (len(group.Children) != 1 || group.Children[0].Name != "file-497") {
				t.Errorf("search found %d children of the group", len(group.Children))
			}
		})
	}
	Counts := BuildResources(webtest.Resources(500), "").Counts
	if len(Counts) != 3 || Counts[0] != (TypeCount{"stackdtest:index:File", 498}) {
		t.Errorf("counts = %v", Counts)
	}
}

func TestRenderGraph(t *testing.T) {
	small := BuildResources(webtest.Resources(5), "")
	svg := string(RenderGraph(small.Roots))
	webtest.WantContains(t, svg, `<svg `, `class="node node-stack"`, `class="node node-drifted"`, `class="node node-deleted"`,
		`href="#`+AnchorOf(small.Snapshot.Resources[2].URN)+`"`, `<path class="edge"`)
	if n := strings.Count(svg, "<rect"); n != 5 {
		t.Errorf("small graph draws %d boxes, want 5", n)
	}
	// 500 resources: the component is folded into one node, coloured by
	// its worst descendant.
	big := BuildResources(webtest.Resources(500), "")
	svg = string(RenderGraph(big.Roots))
	if n := strings.Count(svg, "<rect"); n != 2 {
		t.Errorf("a graph of 500 draws %d boxes, want 2 (the stack and the folded group)", n)
	}
	webtest.WantContains(t, svg, "group (+498)", `class="node node-deleted"`)
	webtest.WantLacks(t, svg, "more not drawn")
	// A search draws the matches and their ancestors only.
	found := BuildResources(webtest.Resources(500), "file-49")
	svg = string(RenderGraph(found.Roots))
	if n := strings.Count(svg, "<rect"); n != 11 {
		t.Errorf("a graph of 9 matches draws %d boxes, want 11 (with the stack and the group)", n)
	}
	webtest.WantLacks(t, svg, "more not drawn")
	// A name is escaped.
	rs := webtest.Resources(3)
	rs.Resources[2].Name = `<script>x</script>`
	v := BuildResources(rs, "")
	webtest.WantLacks(t, string(RenderGraph(v.Roots)), "<script>")
}
