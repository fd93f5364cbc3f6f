package auth

import (
	"os"
	"strings"
	"testing"

	"github.com/stackd/stackd/daemon/access"
	"github.com/stackd/stackd/daemon/model"
)

// TestDocsExample keeps the roles file shown in docs/access.md valid.
func TestDocsExample(t *testing.T) {
	doc, err := os.ReadFile("../docs/access.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "\n## The roles file\n")
	if !ok {
		t.Fatal(`docs/access.md has no "## The roles file" section`)
	}
	_, block, ok := strings.Cut(section, "```yaml\n")
	if !ok {
		t.Fatal("the roles file section shows no YAML")
	}
	block, _, _ = strings.Cut(block, "```")
	pol, err := Parse("docs/access.md", []byte(block))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := pol.Summary(), "2 token(s), 3 role(s), 2 binding(s)"; got != want {
		t.Errorf("the example has %s, want %s", got, want)
	}
	// What the section "Roles" says the example's roles may do.
	ci := model.Principal{Kind: model.PrincipalToken, Name: "ci"} // operator
	bot := model.Principal{Kind: model.PrincipalToken, Name: "deploy-bot"}
	web := &access.StackRef{Name: "web"}
	teamA := &access.StackRef{Name: "team-a-web", Source: "git+https://git.example.com/team-a/stacks.git", Labels: map[string]string{"team": "a"}}
	for _, c := range []struct {
		who    model.Principal
		action string
		stack  *access.StackRef
		want   bool
	}{
		{ci, access.ActionSync, web, true},
		{ci, access.ActionApprove, web, true},
		{ci, access.ActionCancel, web, true},
		{ci, access.ActionPause, web, false},
		{ci, access.ActionReload, nil, false}, // "operator above cannot reload"
		{bot, access.ActionPause, teamA, true},
		{bot, access.ActionApprove, teamA, false},
		{bot, access.ActionSync, web, false},
		{model.Principal{Kind: model.PrincipalAnonymous}, access.ActionRead, web, true},
	} {
		if got, why := pol.Allowed(c.who, c.action, c.stack); got != c.want {
			t.Errorf("%s may %s %v: %v (%s), the docs say %v", c.who, c.action, c.stack, got, why, c.want)
		}
	}
}
