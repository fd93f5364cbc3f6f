package storetest

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/stackd/stackd/daemon/model"
)

// Resources is a snapshot of n resources of stack: a stack resource, a
// component and the rest its children, every field set on some.
func Resources(stack string, n int) model.Resources {
	root := "urn:pulumi:dev::" + stack + "::pulumi:pulumi:Stack::" + stack + "-dev"
	comp := "urn:pulumi:dev::" + stack + "::stackd:index:Group::group"
	rs := []model.Resource{
		{URN: root, Type: "pulumi:pulumi:Stack", Name: stack + "-dev", Created: T0, Modified: T0},
		{URN: comp, Type: "stackd:index:Group", Name: "group", Parent: root, Created: T0, Modified: T0, ChangedBy: stack + "-1"},
	}
	for i := range max(0, n-2) {
		name := fmt.Sprintf("file-%d", i)
		rs = append(rs, model.Resource{
			URN: "urn:pulumi:dev::" + stack + "::stackd:index:Group$stackdtest:index:File::" + name, Type: "stackdtest:index:File",
			Name: name, ID: "/srv/" + name, Parent: comp, Provider: "urn:pulumi:dev::" + stack + "::pulumi:providers:stackdtest::default",
			Custom: true, Protect: i%2 == 0, RetainOnDelete: i%3 == 0, Created: T0, Modified: T0.Add(1e9), ChangedBy: stack + "-2",
		})
	}
	return model.Resources{Update: stack + "-2", Time: T0, Resources: rs[:min(n, len(rs))]}
}

// testResources: resources and the last preview are kept per stack,
// replaced whole, and deleted with their stack.
func testResources(t *testing.T, open Factory) {
	s, hold := open(t, Limits{})
	holdAll(hold, "a", "b")
	_, err := s.Resources("a")
	WantNotFound(t, "Resources(a) before any", err)
	for _, name := range []string{"a", "b"} {
		if err := s.PutStack(Record(name, 1)); err != nil {
			t.Fatal(err)
		}
		if err := s.PutResources(name, Resources(name, 5)); err != nil {
			t.Fatal(err)
		}
	}
	_, err = s.Preview("a")
	WantNotFound(t, "Preview(a) before any", err)
	preview := model.StackPreview{Commit: "c0ffee", Time: T0, Duration: 1500 * time.Millisecond, State: model.UpdateSucceeded,
		Changes: map[string]int{"update": 1}, Diff: "  ~ stackdtest:index:File b update [diff: ~content]\n"}
	for _, p := range []model.StackPreview{{Time: T0, State: model.UpdateRunning}, preview} {
		if err := s.PutPreview("a", p); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := s.Preview("a"); err != nil || !reflect.DeepEqual(got, preview) {
		t.Errorf("Preview(a) = %+v, %v; want %+v", got, err, preview)
	}
	want := Resources("a", 500)
	if err := s.PutResources("a", want); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Resources("a"); err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("Resources(a): %v; got %d resources, want %d equal ones", err, len(got.Resources), len(want.Resources))
	}
	if err := s.DeleteStack("a"); err != nil {
		t.Fatal(err)
	}
	_, err = s.Resources("a")
	WantNotFound(t, "Resources(a) after DeleteStack", err)
	_, err = s.Preview("a")
	WantNotFound(t, "Preview(a) after DeleteStack", err)
	if got, err := s.Resources("b"); err != nil || !reflect.DeepEqual(got, Resources("b", 5)) {
		t.Errorf("Resources(b) = %+v, %v", got, err)
	}
}
