package auth

import (
	"os"
	"strings"
	"testing"
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
}
