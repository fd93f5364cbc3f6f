package scrub

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stackd/stackd/daemon/model"
)

// TestScrubGate: a held plan's texts and input values lose the secrets
// the daemon knows before they are stored or served.
func TestScrubGate(t *testing.T) {
	const secret = "hunter2-gate-secret"
	r := NewRedactor(secret)
	g := &model.Gate{State: model.GatePolicyDenied, Reason: "denied by policy: files: token " + secret,
		Steps:      []model.Step{{Op: "update", URN: "urn:pulumi:dev::app::stackdtest:index:File::note", New: map[string]any{"content": "x " + secret}}},
		Violations: []model.Violation{{Policy: "files", Level: model.PolicyDeny, Message: secret}}}
	s, changed := Status(model.StackStatus{Gate: g}, r)
	raw, _ := json.Marshal(s.Gate)
	if !changed || strings.Contains(string(raw), secret) || !strings.Contains(s.Gate.Reason, "denied by policy: files: token ") {
		t.Fatalf("changed %v, gate %s", changed, raw)
	}
	if g.Steps[0].New["content"] != "x "+secret || g.Reason != "denied by policy: files: token "+secret {
		t.Error("scrubbing changed the gate it was given")
	}
	if _, changed := Status(model.StackStatus{Gate: &model.Gate{State: model.GateAwaiting, Reason: "fine"}}, r); changed {
		t.Error("a clean gate was changed")
	}
}
