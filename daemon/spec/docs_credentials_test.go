package spec

import (
	"os"
	"strings"
	"testing"
)

// TestCredentialsExamplesParse keeps the stacks shown in
// docs/credentials.md valid configs, with the credentials they show.
func TestCredentialsExamplesParse(t *testing.T) {
	doc, err := os.ReadFile("../../docs/credentials.md")
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	for _, block := range strings.Split(string(doc), "```yaml\n")[1:] {
		block, _, _ = strings.Cut(block, "```")
		if !strings.HasPrefix(block, "stacks:") {
			continue
		}
		found++
		cfg, _, err := Parse("docs/credentials.md", []byte(block))
		if err != nil {
			t.Fatalf("%v\n%s", err, block)
		}
		for _, s := range cfg.Stacks {
			if !s.Spec.Credentials.Any() {
				t.Errorf("%s: no credentials", s.Name)
			}
		}
	}
	if found == 0 {
		t.Fatal("docs/credentials.md shows no config")
	}
}
