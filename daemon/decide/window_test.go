package decide

import (
	"testing"

	"github.com/stackd/stackd/daemon/model"
	"github.com/stackd/stackd/daemon/spec"
)

func TestChangeOf(t *testing.T) {
	const sha, newSHA = "1111111111111111111111111111111111111111", "2222222222222222222222222222222222222222"
	last := &model.LastUpdate{Generation: 2, LastSuccessfulCommit: sha, State: model.UpdateSucceeded}
	same := Observation{Generation: 2, Commit: sha}
	up, destroy, preview := Decision{Run: true, Type: model.UpdateUp}, Decision{Run: true, Type: model.UpdateDestroy}, Decision{Run: true, Type: model.UpdatePreview}
	cases := []struct {
		name        string
		last        *model.LastUpdate
		obs         Observation
		dec         Decision
		remediating bool
		want        string
	}{
		{"first deploy", nil, same, up, false, spec.ChangeCommit},
		{"new commit", last, Observation{Generation: 2, Commit: newSHA}, up, false, spec.ChangeCommit},
		{"sync request", last, same, up, false, spec.ChangeCommit},
		{"remediation", last, same, up, true, spec.ChangeDrift},
		{"remediation at a skipped commit", last, Observation{Generation: 2, Commit: newSHA, SkippedCommit: newSHA}, up, true, spec.ChangeDrift},
		{"remediation with a new commit", last, Observation{Generation: 2, Commit: newSHA}, up, true, spec.ChangeCommit},
		{"remediation with a new spec", last, Observation{Generation: 3, Commit: sha}, up, true, spec.ChangeCommit},
		{"remediation never deployed", nil, same, up, true, spec.ChangeCommit},
		{"destroy", last, Observation{Removed: true}, destroy, false, spec.ChangeDestroy},
		{"preview changes nothing", last, same, preview, false, ""},
	}
	for _, c := range cases {
		if got := ChangeOf(c.last, c.obs, c.dec, c.remediating); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}

func TestWindowRule(t *testing.T) {
	cases := []struct {
		name                        string
		change                      string
		open, overridden, unchecked bool
		want                        WindowAction
	}{
		{"nothing changes", "", false, false, true, WindowLets},
		{"open", spec.ChangeCommit, true, false, true, WindowLets},
		{"overridden", spec.ChangeCommit, false, true, true, WindowLets},
		{"a commit known to change the stack", spec.ChangeCommit, false, false, false, WindowHolds},
		{"a commit that may change nothing of the stack", spec.ChangeCommit, false, false, true, WindowChecksPaths},
		{"drift remediation", spec.ChangeDrift, false, false, false, WindowHolds},
		{"drift remediation, commit unchecked", spec.ChangeDrift, false, false, true, WindowHolds},
		{"destroy", spec.ChangeDestroy, false, false, true, WindowHolds},
		{"open destroy", spec.ChangeDestroy, true, false, false, WindowLets},
	}
	for _, c := range cases {
		if got := WindowRule(c.change, c.open, c.overridden, c.unchecked); got != c.want {
			t.Errorf("%s: %d, want %d", c.name, got, c.want)
		}
	}
}

// TestManualToken: a manual sync's token carries its mark to the
// stack's holder, which takes it off; other tokens have none.
func TestManualToken(t *testing.T) {
	for _, c := range []struct {
		in, token string
		manual    bool
	}{
		{ManualToken("2026-01-07T12:00:00Z"), "2026-01-07T12:00:00Z", true},
		{"2026-01-07T12:00:00Z", "2026-01-07T12:00:00Z", false},
		{"after-app", "after-app", false},
		{"", "", false},
	} {
		if token, manual := SplitManual(c.in); token != c.token || manual != c.manual {
			t.Errorf("SplitManual(%q) = %q, %v", c.in, token, manual)
		}
	}
}
