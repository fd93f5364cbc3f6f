package access

import "testing"

// TestLocalPath holds the cases of sign-in's return path (auth) and of
// web's redirects, which checked with copies of LocalPath before.
func TestLocalPath(t *testing.T) {
	for p, want := range map[string]bool{
		"/": true, "/stacks/a": true, "/a?b=c": true,
		"": false, "//x": false, "/\\x": false, "x": false, "https://x": false, "/a b": false, "/\x7f": false,
		"/stacks/app": true, "/?health=Degraded&q=x": true, "/audit?stack=a%2Fb": true,
		"stacks": false, "//evil.example/": false, "/\\evil.example": false,
		"https://evil.example/": false, "/a\nb": false, "javascript:alert(1)": false, "/\t/evil.example": false,
		"/a\\b": false, "/ /evil.example": false,
	} {
		if got := LocalPath(p); got != want {
			t.Errorf("LocalPath(%q) = %v, want %v", p, got, want)
		}
	}
}
