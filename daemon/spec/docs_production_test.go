package spec

import (
	"os"
	"strings"
	"testing"
)

// docStacks parses each `stacks:` config shown in the doc at path (a
// yaml block) and returns their stacks; a doc that shows none fails.
func docStacks(t *testing.T, path string) []*Stack {
	t.Helper()
	doc, err := os.ReadFile("../../" + path)
	if err != nil {
		t.Fatal(err)
	}
	var stacks []*Stack
	found := 0
	for _, block := range strings.Split(string(doc), "```yaml\n")[1:] {
		block, _, _ = strings.Cut(block, "```")
		if !strings.HasPrefix(block, "stacks:") {
			continue
		}
		found++
		cfg, _, err := Parse(path, []byte(block))
		if err != nil {
			t.Fatalf("%v\n%s", err, block)
		}
		stacks = append(stacks, cfg.Stacks...)
	}
	if found == 0 {
		t.Fatalf("%s shows no config", path)
	}
	return stacks
}

// TestProductionExampleParses keeps the stack shown in docs/production.md
// (an S3 backend with a KMS secrets provider) a valid config.
func TestProductionExampleParses(t *testing.T) {
	for _, s := range docStacks(t, "docs/production.md") {
		if !strings.HasPrefix(s.Spec.Backend, "s3://") || !strings.HasPrefix(s.Spec.SecretsProvider, "awskms://") {
			t.Errorf("%s: backend %q, secrets provider %q", s.Name, s.Spec.Backend, s.Spec.SecretsProvider)
		}
	}
}
