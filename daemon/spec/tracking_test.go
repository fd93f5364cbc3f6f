package spec

import (
	"testing"
)

func TestCommitURL(t *testing.T) {
	for _, tc := range []struct{ repo, want string }{
		{"https://github.com/acme/web.git", "https://github.com/acme/web/commit/{sha}"},
		{"https://user:token@gitlab.example.com/group/sub/app/", "https://gitlab.example.com/group/sub/app/commit/{sha}"},
		{"git@github.com:acme/web.git", "https://github.com/acme/web/commit/{sha}"},
		{"ssh://git@gitea.example.com:2222/acme/web.git", "https://gitea.example.com/acme/web/commit/{sha}"},
		{"file:///srv/repo", ""},
		{"/srv/repo", ""},
		{"../repo", ""},
		{"", ""},
		{"https://example.com", ""},
	} {
		if got := CommitURL(tc.repo); got != tc.want {
			t.Errorf("CommitURL(%q) = %q, want %q", tc.repo, got, tc.want)
		}
	}
}
