package policy

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
)

// TestDocsExamplesCompile: the Rego examples of docs/change-control.md
// compile, and the first denies deleting a File as the page says.
func TestDocsExamplesCompile(t *testing.T) {
	data, err := os.ReadFile("../docs/change-control.md")
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	for i, block := range strings.Split(string(data), "```rego\n")[1:] {
		src, _, ok := strings.Cut(block, "\n```")
		if !ok {
			t.Fatalf("rego block %d is not closed", i+1)
		}
		files[fmt.Sprintf("example%d.rego", i+1)] = src
	}
	if len(files) < 2 {
		t.Fatalf("%d rego examples, want the page's two", len(files))
	}
	set, err := Compile(context.Background(), files)
	if err != nil {
		t.Fatal(err)
	}
	del := step("delete", "note")
	del.Old = map[string]any{"path": "out/note.txt"}
	v, err := set.Evaluate(context.Background(), daemonInput("app", del))
	if err != nil || len(v.Deny) != 1 || v.Deny[0].Message != "deleting out/note.txt is not allowed (stack app)" {
		t.Errorf("verdict %+v, %v; want the page's denial", v, err)
	}
}
