package spec

import (
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestConfigReferenceMatchesParser keeps docs/configuration.md and the
// parser together: each documented type's table lists exactly the fields
// the parser knows.
func TestConfigReferenceMatchesParser(t *testing.T) {
	data, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	types := map[string]reflect.Type{
		"StackSpec":      reflect.TypeOf(StackSpec{}),
		"ResourceRef":    reflect.TypeOf(ResourceRef{}),
		"ConfigMapRef":   reflect.TypeOf(ConfigMapRef{}),
		"GitAuthConfig":  reflect.TypeOf(GitAuthConfig{}),
		"Prerequisite":   reflect.TypeOf(Prerequisite{}),
		"UpdateSpec":     reflect.TypeOf(UpdateSpec{}),
		"ProgramSpec":    reflect.TypeOf(ProgramSpec{}),
		"DriftDetection": reflect.TypeOf(DriftDetection{}),
		"DriftIgnore":    reflect.TypeOf(DriftIgnore{}),
		"Approval":       reflect.TypeOf(Approval{}),
		"ReviewStacks":   reflect.TypeOf(ReviewStacks{}),
		"ChangeWindow":   reflect.TypeOf(ChangeWindow{}),
	}
	row := regexp.MustCompile("^\\| `([A-Za-z]+)` \\|")
	documented := map[string][]string{}
	section := ""
	for _, line := range strings.Split(string(data), "\n") {
		if name, ok := strings.CutPrefix(line, "### "); ok {
			section = strings.TrimSpace(name)
			continue
		}
		if m := row.FindStringSubmatch(line); m != nil && section != "" {
			documented[section] = append(documented[section], m[1])
		}
	}
	for name, typ := range types {
		var want []string
		for i := range typ.NumField() {
			if f := typ.Field(i); f.IsExported() && fieldName(f) != "-" {
				want = append(want, fieldName(f))
			}
		}
		got := documented[name]
		slices.Sort(want)
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("docs/configuration.md, section %s: documents %v, the parser knows %v", name, got, want)
		}
	}
	for section := range documented {
		if types[section] == nil {
			t.Errorf("docs/configuration.md documents %s, which the test does not check", section)
		}
	}
}
