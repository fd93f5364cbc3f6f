package review

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stackd/stackd/daemon/spec"
)

func TestAffected(t *testing.T) {
	stack := func(name, repo, branch, repoDir string, paths ...string) *spec.Stack {
		return &spec.Stack{Name: name, Spec: spec.StackSpec{ProjectRepo: repo, Branch: branch, RepoDir: repoDir, Paths: paths}}
	}
	cfg := &spec.Config{Stacks: []*spec.Stack{
		stack("app", "https://github.com/acme/infra.git", "main", "app"),
		stack("net", "git@github.com:acme/infra", "refs/heads/main", "net"),
		stack("root", "https://github.com/acme/infra", "main", ""),
		stack("other-branch", "https://github.com/acme/infra", "dev", "app"),
		stack("other-repo", "https://github.com/acme/web", "main", "app"),
		stack("globs", "https://github.com/acme/infra", "main", "app", "shared/**", "*.md"),
	}}
	ev := Event{URLs: []string{"https://GitHub.com/acme/infra"}, BaseBranch: "main"}
	for _, tc := range []struct {
		files []string
		want  []string
	}{
		{[]string{"app/index.yaml"}, []string{"app", "root"}},
		{[]string{"net/Pulumi.yaml"}, []string{"net", "root"}},
		{[]string{"shared/lib/x.ts"}, []string{"root", "globs"}},
		{[]string{"README.md"}, []string{"root", "globs"}},
		{[]string{"docs/README.md"}, []string{"root"}},
		{nil, nil},
	} {
		var got []string
		for _, s := range Affected(cfg, ev, tc.files) {
			got = append(got, s.Name)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("files %v: got %v, want %v", tc.files, got, tc.want)
		}
	}
}

func TestConfigChanges(t *testing.T) {
	mk := func(name, src, branch string) *spec.Stack {
		return &spec.Stack{Name: name, Source: src, Spec: spec.StackSpec{Stack: "dev", ProjectRepo: "r", Branch: branch}}
	}
	cur := &spec.Config{Stacks: []*spec.Stack{mk("a", "git", "main"), mk("b", "git", "main"), mk("c", "git", "main"), mk("local", "dir", "main")}}
	next := &spec.Config{Stacks: []*spec.Stack{mk("a", "git", "main"), mk("b", "git", "release"), mk("d", "git", "main"), mk("local", "dir", "dev")}}
	changed, added, removed := ConfigChanges(cur, next, "git")
	var names []string
	for _, s := range changed {
		names = append(names, s.Name)
	}
	if !slices.Equal(names, []string{"b", "d"}) || !added["d"] || added["b"] || !slices.Equal(removed, []string{"c"}) {
		t.Errorf("changed %v added %v removed %v", names, added, removed)
	}
}

func TestComment(t *testing.T) {
	r := Report{Commit: strings.Repeat("a", 40), Previews: []Preview{
		{Stack: "app", Result: Succeeded, Changes: map[string]int{"update": 1, "same": 3}, Diff: "  ~ test:index:Thing x update\n"},
		{Stack: "net", Result: Failed, Error: "error: boom ``` here", New: true},
	}, Removed: []string{"old"}, LinkOf: func(p Preview) string { return "http://stackd/previews/" + p.Stack }}
	c := Comment(r, 65536)
	for _, want := range []string{
		Marker, "`aaaaaaaaaaaa`",
		"| [`app`](http://stackd/previews/app) | 0 | 1 | 0 | 0 |  | ✅ succeeded |",
		"| [`net` (new)](http://stackd/previews/net) | 0 | 0 | 0 | 0 |  | ❌ failed |",
		"<details><summary>app: ✅ succeeded</summary>", "~ test:index:Thing x update",
		"````\nerror: boom ``` here\n````", "Merging removes stack `old` from the config; its resources stay (no `destroyOnFinalize`).",
	} {
		if !strings.Contains(c, want) {
			t.Errorf("comment lacks %q:\n%s", want, c)
		}
	}
}

// TestCommentRemovedDestroyed: a removed stack with destroyOnFinalize is
// said to be destroyed by the merge, with what may hold the destroy.
func TestCommentRemovedDestroyed(t *testing.T) {
	r := Report{Removed: []string{"db", "cache", "old"}, Destroying: map[string]string{"db": "once approved", "cache": ""}}
	c := Comment(r, 65536)
	for _, want := range []string{
		"Merging removes stack `db` from the config and **destroys its resources** (`destroyOnFinalize`) once approved.\n",
		"Merging removes stack `cache` from the config and **destroys its resources** (`destroyOnFinalize`).\n",
		"Merging removes stack `old` from the config; its resources stay (no `destroyOnFinalize`).\n",
	} {
		if !strings.Contains(c, want) {
			t.Errorf("comment lacks %q:\n%s", want, c)
		}
	}
}

// TestCommentUnresolved: a stack's section lists the references its
// preview did not resolve, even without a diff, each in code.
func TestCommentUnresolved(t *testing.T) {
	r := Report{Previews: []Preview{{Stack: "app", Result: Failed, Unresolved: []string{"envRefs.DB", "secretsRef.a`b"}}}}
	c := Comment(r, 65536)
	if !strings.Contains(c, "<details><summary>app: ❌ failed</summary>") ||
		!strings.Contains(c, "**Not resolved in a preview** (the config in force does not grant them to this stack; a placeholder stands in): `envRefs.DB`, `secretsRef.a'b`\n") {
		t.Errorf("the comment does not list what was not resolved:\n%s", c)
	}
}

func TestCommentWithinLimit(t *testing.T) {
	big := strings.Repeat("  ~ test:index:Thing update é\n", 5000)
	r := Report{Previews: []Preview{
		{Stack: "a", Result: Succeeded, Diff: big},
		{Stack: "b", Result: Succeeded, Diff: "small diff"},
	}, LinkOf: func(p Preview) string { return "http://stackd/previews/" + p.Stack }}
	for _, limit := range []int{65536, 4000, 600} {
		c := Comment(r, limit)
		if len(c) > limit {
			t.Errorf("limit %d: comment of %d bytes", limit, len(c))
		}
		if !strings.Contains(c, Marker) {
			t.Errorf("limit %d: marker lost", limit)
		}
		if limit >= 4000 && (!strings.Contains(c, "small diff") || !strings.Contains(c, "[full log](http://stackd/previews/a)")) {
			t.Errorf("limit %d: the short diff or the link to the full log is missing:\n%s", limit, c)
		}
	}
}

// TestCommentApproval: the comment says which stacks will wait for
// approval after merge, and why.
func TestCommentApproval(t *testing.T) {
	r := Report{Previews: []Preview{
		{Stack: "app", Result: Succeeded, Changes: map[string]int{"delete": 1}, Approval: "the plan has steps of approval.when: delete"},
		{Stack: "net", Result: Succeeded, Changes: map[string]int{"update": 1}},
	}}
	c := Comment(r, 65536)
	if !strings.Contains(c, "After merge, `app` waits for approval: the plan has steps of approval.when: delete.") || strings.Contains(c, "`net` waits") {
		t.Errorf("the comment does not say which stacks wait for approval:\n%s", c)
	}
}

// TestCommentWindows: the comment lists the stacks that change windows
// would hold back after merge, with the time each may change.
func TestCommentWindows(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	r := Report{Commit: strings.Repeat("a", 40), Previews: []Preview{{Stack: "app", Result: Succeeded}, {Stack: "db", Result: Succeeded}},
		Waits: []WindowWait{
			{Stack: "app", Windows: []string{`deny window "freeze"`}, Until: time.Date(2026, 11, 30, 8, 0, 0, 0, berlin)},
			{Stack: "db", Windows: []string{`allow window "never"`, `deny window "x"`}},
		}}
	c := Comment(r, 65536)
	for _, want := range []string{
		"\nMerged now, `app` waits for change windows until 2026-11-30 08:00 CET: deny window \"freeze\".\n",
		"\nMerged now, `db` waits for change windows (no window opens within a year): allow window \"never\", deny window \"x\".\n",
	} {
		if !strings.Contains(c, want) {
			t.Errorf("comment lacks %q:\n%s", want, c)
		}
	}
	if c := Comment(Report{Previews: r.Previews}, 65536); strings.Contains(c, "change windows") {
		t.Errorf("a comment without waits mentions windows:\n%s", c)
	}
}

// TestCommentPolicies: a denied preview says so in the table, and the
// comment lists each stack's denials and warnings.
func TestCommentPolicies(t *testing.T) {
	r := Report{Previews: []Preview{
		{Stack: "app", Result: Succeeded, Changes: map[string]int{"delete": 1}, Diff: "  - stackdtest:index:File note delete\n",
			Denied:   []Violation{{Policy: "stackd.files", Message: "deleting out/note.txt\nis not allowed"}},
			Warnings: []Violation{{Policy: "org.`budget`", Message: "a large change"}}},
		{Stack: "web", Result: Succeeded, Warnings: []Violation{{Policy: "stackd.files", Message: "web is replaced"}}},
	}}
	c := Comment(r, 65536)
	for _, want := range []string{
		"| `app` | 0 | 0 | 1 | 0 |  | 🚫 denied by policy |",
		"| `web` | 0 | 0 | 0 | 0 |  | ✅ succeeded |",
		"**Policies deny the change of `app`; it will not be applied:**\n\n- `stackd.files`: deleting out/note.txt is not allowed\n",
		"**Policy warnings for `app`:**\n\n- `org.'budget'`: a large change\n",
		"**Policy warnings for `web`:**\n\n- `stackd.files`: web is replaced\n",
		"<details><summary>app: 🚫 denied by policy</summary>",
	} {
		if !strings.Contains(c, want) {
			t.Errorf("comment lacks %q:\n%s", want, c)
		}
	}
	if strings.Contains(c, "Policies deny the change of `web`") {
		t.Errorf("comment denies web:\n%s", c)
	}
}

func TestWorkKey(t *testing.T) {
	for _, tc := range []struct {
		ev   Event
		want string
		// round is whether a record with Done want says that the round
		// of the event's head commit ended.
		round bool
	}{
		{Event{HeadSHA: "abc", Action: Opened}, "abc", true},
		{Event{HeadSHA: "abc", Action: Pushed}, "abc", true},
		{Event{HeadSHA: "abc", Action: Closed}, "abc/closed", true},
		{Event{HeadSHA: "abc", Sweep: 1700000000}, "abc/sweep-1700000000", true},
		{Event{HeadSHA: "abc", Action: Closed, Sweep: 7}, "abc/closed/sweep-7", true},
		{Event{HeadSHA: "abc", Action: Pushed, Touch: 1700000001}, "abc/touch-1700000001", true},
		{Event{HeadSHA: "abc", Sweep: 7, Touch: 8}, "abc/sweep-7/touch-8", true},
	} {
		if got := tc.ev.WorkKey(); got != tc.want {
			t.Errorf("%+v: WorkKey = %q, want %q", tc.ev, got, tc.want)
		}
		if got := RoundDone(tc.want, tc.ev.HeadSHA); got != tc.round {
			t.Errorf("RoundDone(%q, %q) = %v", tc.want, tc.ev.HeadSHA, got)
		}
	}
	for _, tc := range []struct {
		done, head string
		want       bool
	}{
		{"", "abc", false},
		{"abc", "", false},
		{"abcd", "abc", false},
		{"abd/closed", "abc", false},
		{"abc/sweep-1", "abc", true},
	} {
		if got := RoundDone(tc.done, tc.head); got != tc.want {
			t.Errorf("RoundDone(%q, %q) = %v, want %v", tc.done, tc.head, got, tc.want)
		}
	}
}
