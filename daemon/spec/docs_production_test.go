package spec

import (
	"os"
	"strings"
	"testing"
)

// TestProductionExampleParses keeps the stack shown in docs/production.md
// (an S3 backend with a KMS secrets provider) a valid config.
func TestProductionExampleParses(t *testing.T) {
	doc, err := os.ReadFile("../../docs/production.md")
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
		cfg, _, err := Parse("docs/production.md", []byte(block))
		if err != nil {
			t.Fatalf("%v\n%s", err, block)
		}
		for _, s := range cfg.Stacks {
			if !strings.HasPrefix(s.Spec.Backend, "s3://") || !strings.HasPrefix(s.Spec.SecretsProvider, "awskms://") {
				t.Errorf("%s: backend %q, secrets provider %q", s.Name, s.Spec.Backend, s.Spec.SecretsProvider)
			}
		}
	}
	if found == 0 {
		t.Fatal("docs/production.md shows no config")
	}
}
