package gitwatch

import (
	"context"
	"strings"
	"testing"

	"github.com/stackd/stackd/daemon/model"
)

// TestCommitInfo reads the commit of a real checkout, and fails for a
// commit the checkout does not hold and for a dir that is no checkout.
func TestCommitInfo(t *testing.T) {
	fx := sharedFixture(t)
	f := New(Options{})
	dir := t.TempDir() + "/co"
	if _, err := f.Checkout(context.Background(), model.GitSource{URL: fx.fileURL(), Ref: "main", Shallow: true}, fx.c3, dir); err != nil {
		t.Fatal(err)
	}
	c, err := f.CommitInfo(dir, fx.c3)
	if err != nil {
		t.Fatal(err)
	}
	if c.SHA != fx.c3 || c.Subject != "c3" || c.Author == "" || c.Time.IsZero() {
		t.Errorf("CommitInfo = %+v", c)
	}
	if _, err := f.CommitInfo(dir, fx.c1); err == nil {
		t.Error("a shallow checkout described a commit it does not hold")
	}
	if _, err := f.CommitInfo(t.TempDir(), fx.c3); err == nil {
		t.Error("a dir that is no checkout described a commit")
	}
}

func TestSubject(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"fix: the thing\n\nbody", "fix: the thing"},
		{"  one line  ", "one line"},
		{"", ""},
		{strings.Repeat("é", 150), strings.Repeat("é", 100) + "…"},
	} {
		if got := subject(tc.in); got != tc.want {
			t.Errorf("subject(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
