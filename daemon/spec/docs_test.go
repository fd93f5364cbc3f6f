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
		"Credentials":    reflect.TypeOf(Credentials{}),
	}
	documented := documentedFields(t, "../../docs/configuration.md")
	checkDocumented(t, "docs/configuration.md", documented, types)
	for section := range documented {
		if types[section] == nil {
			t.Errorf("docs/configuration.md documents %s, which the test does not check", section)
		}
	}
}

// TestCredentialsReferenceMatchesParser keeps the tables of
// docs/credentials.md, one per cloud of spec.credentials, and the parser
// together.
func TestCredentialsReferenceMatchesParser(t *testing.T) {
	checkDocumented(t, "docs/credentials.md", documentedFields(t, "../../docs/credentials.md"), map[string]reflect.Type{
		"credentials.aws":   reflect.TypeOf(AWSCredentials{}),
		"credentials.gcp":   reflect.TypeOf(GCPCredentials{}),
		"credentials.azure": reflect.TypeOf(AzureCredentials{}),
		"credentials.token": reflect.TypeOf(TokenCredentials{}),
	})
}

// documentedFields are the fields a Markdown page's tables list, by the
// ### heading of their section (without its backticks): the rows whose
// first cell is a field name in backticks.
func documentedFields(t *testing.T, path string) map[string][]string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("^\\| `([A-Za-z]+)` \\|")
	documented := map[string][]string{}
	section := ""
	for _, line := range strings.Split(string(data), "\n") {
		if name, ok := strings.CutPrefix(line, "### "); ok {
			section = strings.Trim(strings.TrimSpace(name), "`")
			continue
		}
		if strings.HasPrefix(line, "## ") {
			section = ""
			continue
		}
		if m := row.FindStringSubmatch(line); m != nil && section != "" {
			documented[section] = append(documented[section], m[1])
		}
	}
	return documented
}

// checkDocumented checks that each of types is documented in its section
// with exactly the fields the parser knows.
func checkDocumented(t *testing.T, page string, documented map[string][]string, types map[string]reflect.Type) {
	t.Helper()
	for name, typ := range types {
		var want []string
		for i := range typ.NumField() {
			if f := typ.Field(i); f.IsExported() && fieldName(f) != "-" {
				want = append(want, fieldName(f))
			}
		}
		got := slices.Clone(documented[name])
		slices.Sort(want)
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("%s, section %s: documents %v, the parser knows %v", page, name, got, want)
		}
	}
}
