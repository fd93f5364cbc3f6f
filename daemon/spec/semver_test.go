package spec

import "testing"

func TestSemverRanges(t *testing.T) {
	tags := []string{"v0.9.0", "v1.0.0", "v1.2.3", "v1.2.10", "1.3.0", "v1.4.0-rc.1", "v2.0.0", "v2.1.0", "latest", "v01.2.3", "release-3"}
	for _, tc := range []struct{ rng, want string }{
		{">=1.0.0", "v2.1.0"},
		{">=1.0.0 <2.0.0", "1.3.0"},
		{">=1.0.0, <2.0.0", "1.3.0"},
		{"1.2.x", "v1.2.10"},
		{"1.2", "v1.2.10"},
		{"~1.2.3", "v1.2.10"},
		{"^1.2.3", "1.3.0"},
		{"^0.9", "v0.9.0"},
		{"<1.0.0 || >=2.0.0 <2.1.0", "v2.0.0"},
		{"=1.0.0", "v1.0.0"},
		{"1.2.3", "v1.2.3"},
		{">1.2", "v2.1.0"},
		{"<=1.2", "v1.2.10"},
		{"!=2.1.0, >=2.0.0", "v2.0.0"},
		{"*", "v2.1.0"},
		{">=3.0.0", ""},
	} {
		r, err := ParseSemverRange(tc.rng)
		if err != nil {
			t.Errorf("%q: %v", tc.rng, err)
			continue
		}
		got, ok := HighestTag(r, tags)
		if got != tc.want || ok != (tc.want != "") {
			t.Errorf("%q: %q %t, want %q", tc.rng, got, ok, tc.want)
		}
	}
	for _, bad := range []string{"", "abc", ">=1.2.3.4", "1.x.3y", "!=1.2", "||"} {
		if _, err := ParseSemverRange(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}
