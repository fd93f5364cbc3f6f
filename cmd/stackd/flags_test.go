package main

import (
	"strings"
	"testing"
)

// TestFlagDidYouMean: an unknown flag of any command is answered with the
// nearest one, when one is near, as validate does for config fields.
func TestFlagDidYouMean(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"run", "--confg", "x.yaml"}, `flag provided but not defined: -confg (did you mean --config?)`},
		{[]string{"run", "--data-dri", "d"}, `(did you mean --data-dir?)`},
		{[]string{"status", "--sever", "http://x"}, `(did you mean --server?)`},
		{[]string{"run", "--zzzzzzzz"}, `flag provided but not defined: -zzzzzzzz`},
	}
	for _, c := range cases {
		code, _, stderr := stackd(t, c.args...)
		if code != exitUsage || !strings.Contains(stderr, c.want) {
			t.Errorf("stackd %v: exit %d, %q; want %q", c.args, code, stderr, c.want)
		}
		if strings.HasSuffix(c.want, "zzzzzzzz") && strings.Contains(stderr, "did you mean") {
			t.Errorf("stackd %v: a suggestion for a flag like no other: %q", c.args, stderr)
		}
	}
}
