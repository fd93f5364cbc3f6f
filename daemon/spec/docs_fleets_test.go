package spec

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFleetsExamplesParse keeps every config shown in docs/fleets.md a
// valid one, its StackSets rendered (list parameters as written, a fixed
// parameter set for git generators: see testExpander).
func TestFleetsExamplesParse(t *testing.T) {
	doc, err := os.ReadFile("../../docs/fleets.md")
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	for i, block := range strings.Split(string(doc), "```yaml\n")[1:] {
		block, _, _ = strings.Cut(block, "```")
		found++
		file := filepath.Join(t.TempDir(), "fleets.yaml")
		if err := os.WriteFile(file, []byte(block), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg, _, err := LoadInputsExpanding([]Input{{Source: "docs", Path: file, Shown: "fleets.yaml"}}, testExpander)
		if err != nil {
			t.Fatalf("example %d: %v\n%s", i, err, block)
		}
		if len(cfg.StackSets) != 1 {
			t.Errorf("example %d shows %d StackSets", i, len(cfg.StackSets))
		}
		generated := 0
		for _, s := range cfg.Stacks {
			if s.Owner != "" {
				generated++
			}
		}
		if generated == 0 {
			t.Errorf("example %d generates no stack", i)
		}
	}
	if found < 7 {
		t.Fatalf("docs/fleets.md shows %d configs, want every shape and generator", found)
	}
}
