package early

import (
	"path/filepath"
	"testing"
)

var pathCases = []string{
	"", ".", "..", "/", "//", "///", "a", "a/", "/a", "/a/", "a//b", "/a/b/c", "/a/./b", "/a/../b",
	"/../a", "../a", "../../a/..", "a/b/../../..", "/a/b/../../..", "./a", ".a", "..a", "a/..b/c",
	"/tmp/x/pulumi-resource-y", "/tmp/x/.pulumi-resource-y.real", "/a/b/", "a/./.", "/./", "/a/b/..",
}

func TestPathLikeFilepath(t *testing.T) {
	for _, p := range pathCases {
		checkPath(t, p, "x")
		for _, q := range pathCases {
			checkPath(t, p, q)
		}
	}
}

func FuzzPath(f *testing.F) {
	for _, p := range pathCases {
		f.Add(p, "../b")
	}
	f.Fuzz(checkPath)
}

func checkPath(t *testing.T, p, q string) {
	if got, want := clean(p), filepath.Clean(p); got != want {
		t.Errorf("clean(%q) = %q, want %q", p, got, want)
	}
	if got, want := base(p), filepath.Base(p); got != want {
		t.Errorf("base(%q) = %q, want %q", p, got, want)
	}
	if got, want := dir(p), filepath.Dir(p); got != want {
		t.Errorf("dir(%q) = %q, want %q", p, got, want)
	}
	if got, want := join(p, q), filepath.Join(p, q); got != want {
		t.Errorf("join(%q, %q) = %q, want %q", p, q, got, want)
	}
}
