package web

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stackd/stackd/daemon"
	"github.com/stackd/stackd/daemon/model"
	"github.com/stackd/stackd/web/webtest"
)

// approvalsAPI is the UI's fake daemon whose stack "db" has a plan
// awaiting approval; it records the decisions, and refuses one that
// names another plan, as the daemon does.
type approvalsAPI struct {
	*uiFakeAPI
	mu        sync.Mutex
	decisions []string
}

const fakePlan = "0123456789abcdef"

func newApprovalsAPI() *approvalsAPI {
	a := &approvalsAPI{uiFakeAPI: newUIFakeAPI()}
	db := &a.stacks[1]
	db.Status.Gate = &model.Gate{State: model.GateAwaiting, Reason: "approval is required: 1 resource(s) change",
		Commit: "0123456789abcdef0123456789abcdef01234567", Update: "db-9",
		Plan:    &model.Plan{ID: fakePlan, Digest: "feedfacecafebeef0000"},
		Changes: map[string]int{"update": 1},
		Steps:   []model.Step{{Op: "update", URN: "urn:pulumi:prod::db::aws:rds/instance:Instance::main", Type: "aws:rds/instance:Instance", Diffs: []string{"<size>"}}},
		Created: time.Now(), Expires: time.Now().Add(time.Hour)}
	return a
}

func (a *approvalsAPI) decide(name, plan, who, what string) error {
	switch name {
	case "web":
		return fmt.Errorf("stack web: %w", daemon.ErrNotOwner)
	case "db":
	default:
		return daemon.ErrUnknownStack
	}
	if plan != fakePlan {
		return fmt.Errorf("stack db: %w (plan %s)", daemon.ErrPlanMoved, fakePlan)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.decisions = append(a.decisions, what+" "+plan+" by "+who)
	return nil
}

func (a *approvalsAPI) Approve(name, plan, who string) error {
	return a.decide(name, plan, who, "approve")
}
func (a *approvalsAPI) Reject(name, plan, who, reason string) error {
	return a.decide(name, plan, who, "reject("+reason+")")
}

func (a *approvalsAPI) decided() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.decisions)
}

// TestUIApproval: the stack page shows the plan awaiting approval, its
// steps and forms that approve or reject exactly that plan, without
// JavaScript; a form from another site is refused.
func TestUIApproval(t *testing.T) {
	api := newApprovalsAPI()
	base := startUI(t, api)
	page := getPage(t, base+"/stacks/db", http.StatusOK)
	webtest.WantContains(t, page, "Plan awaiting approval", "approval is required: 1 resource(s) change",
		"urn:pulumi:prod::db::aws:rds/instance:Instance::main", "&lt;size&gt;",
		`action="/stacks/db/approve"`, `action="/stacks/db/reject"`, `name="plan" value="`+fakePlan+`"`,
		`href="/api/v1/updates/db-9/log"`)
	webtest.WantLacks(t, page, "<size>")

	form := func(path string, values url.Values, header http.Header) *http.Response {
		req, err := http.NewRequest(http.MethodPost, base+path, strings.NewReader(values.Encode()))
		if err != nil {
			t.Fatal(err)
		}
		req.Header = header.Clone()
		if req.Header == nil {
			req.Header = http.Header{}
		}
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	if resp := form("/stacks/db/approve", url.Values{"plan": {fakePlan}}, nil); resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/stacks/db" {
		t.Fatalf("approve form: %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	if resp := form("/stacks/db/approve", url.Values{"plan": {"fedcba9876543210"}}, nil); resp.StatusCode != http.StatusConflict {
		t.Errorf("approving another plan: %d, want 409", resp.StatusCode)
	}
	if resp := form("/stacks/db/reject", url.Values{"plan": {fakePlan}, "reason": {"too big"}}, http.Header{"Sec-Fetch-Site": {"cross-site"}}); resp.StatusCode != http.StatusForbidden {
		t.Errorf("a cross-site rejection: %d, want 403", resp.StatusCode)
	}
	if resp := form("/stacks/db/reject", url.Values{"plan": {fakePlan}, "reason": {"too big"}}, nil); resp.StatusCode != http.StatusSeeOther {
		t.Errorf("reject form: %d", resp.StatusCode)
	}
	want := []string{"approve " + fakePlan + " by anonymous", "reject(too big) " + fakePlan + " by anonymous"}
	if got := api.decided(); !slices.Equal(got, want) {
		t.Errorf("decisions %q, want %q", got, want)
	}
}

// TestAPIApproval: the API's approve and reject need the plan named, and
// answer 409 for another one or a stack another replica holds, 404 for
// an unknown stack, and 404 when the daemon decides no plans.
func TestAPIApproval(t *testing.T) {
	api := newApprovalsAPI()
	base := startUI(t, api)
	post := func(path, body string) int {
		resp, err := http.Post(base+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, tc := range []struct {
		path, body string
		want       int
	}{
		{"/api/v1/stacks/db/approve", `{"plan":"` + fakePlan + `"}`, http.StatusOK},
		{"/api/v1/stacks/db/reject", `{"plan":"` + fakePlan + `","reason":"no"}`, http.StatusOK},
		{"/api/v1/stacks/db/approve", `{}`, http.StatusBadRequest},
		{"/api/v1/stacks/db/approve", `{"plan":"x","extra":1}`, http.StatusBadRequest},
		{"/api/v1/stacks/db/approve", `{"plan":"fedcba9876543210"}`, http.StatusConflict},
		{"/api/v1/stacks/nope/approve", `{"plan":"` + fakePlan + `"}`, http.StatusNotFound},
		{"/api/v1/stacks/web/approve", `{"plan":"` + fakePlan + `"}`, http.StatusConflict},
	} {
		if got := post(tc.path, tc.body); got != tc.want {
			t.Errorf("POST %s %s: %d, want %d", tc.path, tc.body, got, tc.want)
		}
	}
	if got := len(api.decided()); got != 2 {
		t.Errorf("%d decisions, want 2", got)
	}
	plain := startUI(t, newUIFakeAPI())
	resp, err := http.Post(plain+"/api/v1/stacks/db/approve", "application/json", strings.NewReader(`{"plan":"`+fakePlan+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("approve on a daemon that decides no plans: %d, want 404", resp.StatusCode)
	}
}

// TestUIApprovalDestroy: a removed stack's destroy awaiting approval is
// titled as a destroy, says what approving does, and shows no commit.
func TestUIApprovalDestroy(t *testing.T) {
	api := newApprovalsAPI()
	g := api.stacks[1].Status.Gate
	g.Type, g.Commit = model.UpdateDestroy, ""
	g.Steps = []model.Step{{Op: "delete", URN: "urn:pulumi:prod::db::aws:rds/instance:Instance::main", Type: "aws:rds/instance:Instance"}}
	page := getPage(t, startUI(t, api)+"/stacks/db", http.StatusOK)
	webtest.WantContains(t, page, "Destroy awaiting approval", "approving destroys the resources below",
		"urn:pulumi:prod::db::aws:rds/instance:Instance::main", `action="/stacks/db/approve"`, `name="plan" value="`+fakePlan+`"`)
	webtest.WantLacks(t, page, "Plan awaiting approval", "<dt>Commit</dt>")
}
