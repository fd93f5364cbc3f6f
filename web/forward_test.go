package web

import (
	"io"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stackd/stackd/daemon/access"
	"github.com/stackd/stackd/daemon/model"
)

// heldElsewhere is an approvals API whose stack db another replica, at
// holder, holds.
type heldElsewhere struct {
	*approvalsAPI
	holder atomic.Pointer[string]
}

func (h *heldElsewhere) HolderURL(stack string) string {
	if u := h.holder.Load(); u != nil && stack == "db" {
		return *u
	}
	return ""
}

// TestForwardToHolder: a decision on the plan of a stack that another
// replica holds is passed to that replica, which authenticates,
// authorizes, decides and audits it; the replica passing it on audits
// nothing, refuses what the caller may not do itself, never passes a
// passed request on again, and answers 502 (audited) when the holder
// cannot be reached.
func TestForwardToHolder(t *testing.T) {
	fa := newFakeAccess()
	fa.grants["ci"] = append(fa.grants["ci"], grant{access.ActionApprove, "*"})
	holder, holderTrail := &heldElsewhere{approvalsAPI: newApprovalsAPI()}, &memAudit{}
	_, holderURL := startWith(t, Options{API: holder, Access: fa, Audit: holderTrail, Node: "node-2"})
	here, trail := &heldElsewhere{approvalsAPI: newApprovalsAPI()}, &memAudit{}
	here.holder.Store(&holderURL)
	_, base := startWith(t, Options{API: here, Access: fa, Audit: trail, Node: "node-1"})
	holder.holder.Store(&base) // each takes the other for the holder

	jsonWith := func(token string) http.Header {
		h := bearer(token)
		h.Set("Content-Type", "application/json")
		return h
	}
	approve := base + "/api/v1/stacks/db/approve"
	code, v := callWith(t, "POST", approve, jsonWith(operatorToken), `{"plan": "`+fakePlan+`"}`)
	if code != http.StatusOK || v["state"] != model.GateApproved {
		t.Fatalf("approval through node-1 = %d %v", code, v)
	}
	if got, want := holder.decided(), []string{"approve " + fakePlan + " by token:ci"}; !slices.Equal(got, want) {
		t.Errorf("the holder decided %q, want %q", got, want)
	}
	if got := here.decided(); len(got) != 0 {
		t.Errorf("node-1 decided %q itself", got)
	}
	if es := holderTrail.all(); len(es) != 1 || es[0].Action != access.ActionApprove || es[0].Outcome != model.AuditAllowed || es[0].Principal.Name != "ci" {
		t.Errorf("the holder's audit trail %+v, want the approval", es)
	}

	// The viewer may not approve: refused here, never passed on.
	if code, _ := callWith(t, "POST", approve, jsonWith(viewerToken), `{"plan": "`+fakePlan+`"}`); code != http.StatusForbidden {
		t.Errorf("the viewer's approval = %d", code)
	}
	if n := len(holder.decided()); n != 1 {
		t.Errorf("the holder decided %d times", n)
	}

	// The holder is gone: 502, audited here.
	gone := "http://127.0.0.1:1"
	here.holder.Store(&gone)
	if code, v := callWith(t, "POST", approve, jsonWith(operatorToken), `{"plan": "`+fakePlan+`"}`); code != http.StatusBadGateway ||
		!strings.Contains(v["error"].(string), "cannot reach the replica holding the stack") {
		t.Errorf("approval with the holder gone = %d %v", code, v)
	}
	es := trail.all()
	if n := len(es); n != 2 || es[1].Outcome != model.AuditFailed || es[1].Status != http.StatusBadGateway {
		t.Errorf("node-1's audit trail %+v, want the viewer's denial and the failure", es)
	}
}

func TestHolderOnly(t *testing.T) {
	form := http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}
	js := http.Header{"Content-Type": {"application/json"}}
	for _, tc := range []struct {
		method, path string
		header       http.Header
		body         string
		want         bool
	}{
		{"POST", "/api/v1/stacks/db/approve", js, `{"plan":"x"}`, true},
		{"POST", "/api/v1/stacks/db/reject", js, `{"plan":"x"}`, true},
		{"POST", "/stacks/db/approve", form, "plan=x", true},
		{"POST", "/stacks/db/reject", form, "plan=x", true},
		{"POST", "/api/v1/stacks/db/preview", nil, "", true},
		{"GET", "/api/v1/stacks/db/preview", nil, "", false}, // the store has it
		{"POST", "/stacks/db/preview", form, "", true},
		{"POST", "/api/v1/stacks/db/sync", nil, "", false},
		{"POST", "/api/v1/stacks/db/sync", js, `{"overrideWindow": true, "reason": "hotfix"}`, true},
		{"POST", "/api/v1/stacks/db/sync", nil, `{"overrideWindow": true, "reason": "hotfix"}`, true},
		{"POST", "/api/v1/stacks/db/sync", js, `{"overrideWindow": false}`, false},
		{"POST", "/stacks/db/sync", form, "overrideWindow=1&reason=hotfix", true},
		{"POST", "/stacks/db/sync", form, "", false},
		{"POST", "/stacks/db/sync", nil, "overrideWindow=1", false},
		{"GET", "/stacks/db", nil, "", false},
		{"GET", "/api/v1/stacks/db", nil, "", false},
	} {
		r, err := http.NewRequest(tc.method, tc.path, strings.NewReader(tc.body))
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range tc.header {
			r.Header[k] = v
		}
		if got := holderOnly(r); got != tc.want {
			t.Errorf("%s %s %q: holderOnly = %v, want %v", tc.method, tc.path, tc.body, got, tc.want)
		}
		if rest := readAll(t, r); rest != tc.body {
			t.Errorf("%s %s: the body left is %q, want %q", tc.method, tc.path, rest, tc.body)
		}
	}
}

func readAll(t *testing.T, r *http.Request) string {
	t.Helper()
	data, err := io.ReadAll(r.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}
