package spec

import (
	"strings"
	"testing"
)

func TestFilterDrift(t *testing.T) {
	res := []DriftedResource{
		{URN: "urn:a::File::one", Type: "t:File", Op: "update", Properties: []string{"content", "mode"}},
		{URN: "urn:a::File::two", Type: "t:File", Op: "delete"},
	}
	tests := []struct {
		rules   []DriftIgnore
		left    int
		ignored int
	}{
		{nil, 2, 0},
		{[]DriftIgnore{{Type: "t:File"}}, 0, 2},
		{[]DriftIgnore{{URN: "*::one"}}, 1, 1},
		{[]DriftIgnore{{URN: "*::one", Properties: []string{"mode"}}}, 2, 0},
		{[]DriftIgnore{{URN: "*::one", Properties: []string{"mode", "content"}}}, 1, 1},
		{[]DriftIgnore{{Type: "other"}}, 2, 0},
	}
	for i, tt := range tests {
		left, ignored := FilterDrift(res, tt.rules)
		if len(left) != tt.left || ignored != tt.ignored {
			t.Errorf("case %d: %d left, %d ignored; want %d, %d", i, len(left), ignored, tt.left, tt.ignored)
		}
	}
	if left, _ := FilterDrift(res, []DriftIgnore{{URN: "*::one", Properties: []string{"mode"}}}); strings.Join(left[0].Properties, ",") != "content" {
		t.Errorf("ignored property kept: %v", left[0].Properties)
	}
	if res[0].Properties[1] != "mode" {
		t.Error("filterDrift changed its input")
	}
}
