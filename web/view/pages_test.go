package view

import (
	"bytes"
	"testing"

	"github.com/stackd/stackd/daemon/livelog"
)

func TestHelpers(t *testing.T) {
	for in, want := range map[string][2]string{
		"https://github.com/acme/web.git@main":     {"github.com/acme/web", "main"},
		"git@github.com:acme/db.git@v1.2":          {"github.com/acme/db", "v1.2"},
		"ssh://git@host:22/acme/x@refs/heads/main": {"host:22/acme/x", "refs/heads/main"},
		"program queue":                            {"program queue", ""},
	} {
		if repo, ref := splitTracking(in); repo != want[0] || ref != want[1] {
			t.Errorf("splitTracking(%q) = %q, %q", in, repo, ref)
		}
	}
	if got := ShortSHA("0123456789abcdef0123456789abcdef01234567"); got != "0123456" {
		t.Errorf("ShortSHA = %q", got)
	}
	if got := ShortSHA("main"); got != "main" {
		t.Errorf("ShortSHA(main) = %q", got)
	}
	if got := ShortCommit("0123456789abcdef0123456789abcdef01234567"); got != "0123456789ab" {
		t.Errorf("ShortCommit = %q", got)
	}
	if got := ShortCommit("v1.2"); got != "v1.2" {
		t.Errorf("ShortCommit(v1.2) = %q", got)
	}
	long := bytes.Repeat([]byte("0123456789\n"), 10)
	if got, cut := Tail(long, 25); string(got) != "0123456789\n0123456789\n" || !cut {
		t.Errorf("Tail = %q, %v", got, cut)
	}
	live := livelog.New()
	_, _ = live.Write(long)
	if got, cut := LiveTail(live, 25); string(got) != "0123456789\n0123456789\n" || !cut {
		t.Errorf("LiveTail = %q, %v", got, cut)
	}
}

func TestClip(t *testing.T) {
	if got := Clip("short", 10); got != "short" {
		t.Errorf("Clip = %q", got)
	}
	if got := Clip("héllo", 2); got != "h…" {
		t.Errorf("Clip cut a rune: %q", got)
	}
}
