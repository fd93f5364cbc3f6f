package spec

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzParse feeds the parser arbitrary bytes, seeded with every config
// fixture. The parser must never panic, must return a config exactly when
// it reports no error, and must place every diagnostic in the file.
func FuzzParse(f *testing.F) {
	seeds := 0
	err := filepath.WalkDir("../../testdata/config", func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() || (filepath.Ext(p) != ".yaml" && filepath.Ext(p) != ".yml") {
			return err
		}
		data, err := os.ReadFile(p)
		if err == nil {
			f.Add(data)
			seeds++
		}
		return err
	})
	if err != nil || seeds == 0 {
		f.Fatalf("no seed corpus (%d files): %v", seeds, err)
	}
	f.Add([]byte(minimalStack))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, diags, err := Parse("fuzz.yaml", data)
		if (err == nil) != (cfg != nil) {
			t.Fatalf("err = %v with config %v", err, cfg != nil)
		}
		if err == nil && len(diags.Errors()) > 0 {
			t.Fatalf("errors without err:\n%s", list(diags))
		}
		lines := len(lineEnds(data)) + 1
		for _, d := range diags {
			if d.Pos.File != "fuzz.yaml" || d.Pos.Line > lines || d.Pos.Line < 0 || d.Pos.Col < 0 {
				t.Fatalf("misplaced diagnostic %q in %d lines", d, lines)
			}
			if !strings.HasPrefix(d.String(), "fuzz.yaml") {
				t.Fatalf("malformed diagnostic %q", d)
			}
		}
	})
}
