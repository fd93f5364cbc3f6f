package web

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/stackd/stackd/daemon/access"
	"github.com/stackd/stackd/daemon/audit"
	"github.com/stackd/stackd/daemon/model"
	"github.com/stackd/stackd/web/metrics"
	"github.com/stackd/stackd/web/webtest"
)

func TestParseSince(t *testing.T) {
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	for in, want := range map[string]time.Time{
		"2026-11-01T00:00:00Z": time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC),
		"90m":                  now.Add(-90 * time.Minute),
		"24h":                  now.Add(-24 * time.Hour),
		"7d":                   now.AddDate(0, 0, -7),
		"0s":                   now,
	} {
		if got, err := parseSince(in, now); err != nil || !got.Equal(want) {
			t.Errorf("parseSince(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"yesterday", "-1h", "-2d", "2026-11-01", "d"} {
		if _, err := parseSince(in, now); err == nil {
			t.Errorf("parseSince(%q) accepted", in)
		}
	}
}

func TestAuditQuery(t *testing.T) {
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	q := url.Values{"stack": {"app"}, "actor": {"ci"}, "since": {"1h"}, "before": {"42"}, "limit": {"5000"}}
	f, err := auditQuery(q, now)
	want := audit.Filter{Stack: "app", Actor: "ci", Since: now.Add(-time.Hour), Before: 42, Limit: maxAuditPage}
	if err != nil || f != want {
		t.Errorf("auditQuery = %+v, %v; want %+v", f, err, want)
	}
	if f, _ := auditQuery(url.Values{}, now); f.Limit != defaultAuditPage {
		t.Errorf("default limit %d", f.Limit)
	}
	for _, bad := range []url.Values{{"before": {"x"}}, {"limit": {"0"}}, {"limit": {"-3"}}, {"since": {"soon"}}} {
		if _, err := auditQuery(bad, now); err == nil {
			t.Errorf("auditQuery(%v) accepted", bad)
		}
	}
}

// TestAuditAPI: the whole trail needs admin; a stack's trail needs read
// on it granted by a role, even while reads are open; filters and pages
// work; the answer holds no credential.
func TestAuditAPI(t *testing.T) {
	trail := &memAudit{}
	for i, e := range []model.AuditEntry{
		{Principal: model.Principal{Kind: model.PrincipalToken, Name: "ci"}, Action: "sync", Stack: "app", Outcome: "allowed"},
		{Principal: model.Principal{Kind: model.PrincipalUser, Name: "alice"}, Action: "sync", Stack: "db", Outcome: "denied"},
		{Principal: model.Principal{Kind: model.PrincipalToken, Name: "ci"}, Action: "sync", Stack: "app", Outcome: "allowed"},
		{Principal: model.Principal{Kind: model.PrincipalAdmin}, Action: "reload", Outcome: "allowed"},
	} {
		e.Time = time.Now().Add(time.Duration(i-10) * time.Hour)
		if _, err := trail.PutAudit(e); err != nil {
			t.Fatal(err)
		}
	}
	acc := newFakeAccess()
	acc.grants["ci-viewer"] = []grant{{access.ActionRead, "app"}}
	_, base := startWith(t, Options{API: twoStacks(), Access: acc, Audit: trail})
	if _, v := callWith(t, "GET", base+"/api/v1/audit?limit=2", bearer(adminToken), ""); v["next"] != "3" {
		t.Errorf("next = %v, want 3", v["next"])
	}
	if _, v := callWith(t, "GET", base+"/api/v1/audit?limit=2&before=3", bearer(adminToken), ""); v["next"] != nil {
		t.Errorf("next on the last page = %v", v["next"])
	}
	// The refusals below are recorded too, after the entries above.
	for _, c := range []struct {
		who    http.Header
		query  string
		status int
		seqs   string
	}{
		{bearer(adminToken), "", 200, "[4 3 2 1]"},
		{bearer(adminToken), "?stack=app", 200, "[3 1]"},
		{bearer(adminToken), "?actor=ci", 200, "[3 1]"},
		{bearer(adminToken), "?since=8h30m", 200, "[4 3]"},
		{bearer(adminToken), "?limit=2", 200, "[4 3]"},
		{bearer(adminToken), "?limit=2&before=3", 200, "[2 1]"},
		{bearer(viewerToken), "?stack=app", 200, "[3 1]"},
		{bearer(viewerToken), "?stack=db", 403, ""},
		{bearer(viewerToken), "", 403, ""},
		{nil, "?stack=app", 401, ""},
	} {
		code, v := callWith(t, "GET", base+"/api/v1/audit"+c.query, c.who, "")
		if code != c.status {
			t.Errorf("%v %s = %d %v", c.who, c.query, code, v)
			continue
		}
		if code != 200 {
			continue
		}
		var seqs []any
		for _, e := range v["entries"].([]any) {
			seqs = append(seqs, e.(map[string]any)["seq"])
		}
		if fmt.Sprint(seqs) != c.seqs {
			t.Errorf("%s: entries %v, want %s", c.query, seqs, c.seqs)
		}
	}
	if code, v := callWith(t, "GET", base+"/api/v1/audit?since=soon", bearer(adminToken), ""); code != 400 {
		t.Errorf("a bad since = %d %v", code, v)
	}
	_, none := startWith(t, Options{API: twoStacks(), Access: acc})
	if code, v := callWith(t, "GET", none+"/api/v1/audit", bearer(adminToken), ""); code != 404 {
		t.Errorf("without a trail = %d %v", code, v)
	}
}

// TestAuditPage: the UI's page lists the entries with who, what, which
// stack and the outcome, and filters.
func TestAuditPage(t *testing.T) {
	trail := &memAudit{}
	_, _ = trail.PutAudit(model.AuditEntry{Time: time.Now(), Principal: model.Principal{Kind: model.PrincipalUser, Name: "alice",
		Groups: []string{"dev"}}, Action: "sync", Stack: "db", Outcome: "denied", Method: "POST", Path: "/stacks/db/sync",
		Status: 403, Remote: "192.0.2.7", Reason: "user alice may not sync stack db", Node: "node-2"})
	_, _ = trail.PutAudit(model.AuditEntry{Time: time.Now(), Principal: model.Principal{Kind: model.PrincipalToken, Name: "ci"},
		Action: "sync", Stack: "app", Outcome: "allowed", Method: "POST", Path: "/api/v1/stacks/app/sync", Status: 202})
	_, base := startWith(t, Options{API: twoStacks(), Access: newFakeAccess(), Audit: trail})
	resp, page := fetch(t, "GET", base+"/audit", bearer(adminToken))
	if resp.StatusCode != 200 {
		t.Fatalf("audit page = %d\n%s", resp.StatusCode, page)
	}
	wantNav(t, page, "Audit")
	webtest.WantContains(t, page, "alice", "dev", "token:ci", `href="/stacks/db"`, "outcome-denied", "POST /stacks/db/sync</code> 403",
		"192.0.2.7", "replica node-2", "user alice may not sync stack db")
	_, page = fetch(t, "GET", base+"/audit?stack=app", bearer(adminToken))
	webtest.WantContains(t, page, "token:ci", `value="app"`)
	webtest.WantLacks(t, page, "alice")
	if resp, _ := fetch(t, "GET", base+"/audit", bearer(operatorToken)); resp.StatusCode != 403 {
		t.Errorf("the operator's audit page = %d", resp.StatusCode)
	}
	_, page = fetch(t, "GET", base+"/stacks/app", nil)
	webtest.WantContains(t, page, `href="/audit?stack=app"`)
}

// TestAuditMetrics: stackd_audit_total counts by action and outcome,
// with no name as a label value.
func TestAuditMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	api := twoStacks()
	m := metrics.New(reg, api, "test")
	_, base := startWith(t, Options{API: api, Access: newFakeAccess(), Audit: &memAudit{}, Registry: reg, Metrics: m})
	send(t, "POST", base+"/api/v1/stacks/app/sync", bearer(viewerToken), "")
	send(t, "POST", base+"/api/v1/stacks/app/sync", bearer(operatorToken), "")
	send(t, "POST", base+"/api/v1/stacks/app/sync", bearer(operatorToken), "")
	send(t, "POST", base+"/api/v1/reload", nil, "")
	text := webtest.Scrape(t, base)
	for _, want := range []string{
		`stackd_audit_total{action="sync",outcome="denied"} 1`,
		`stackd_audit_total{action="sync",outcome="allowed"} 2`,
		`stackd_audit_total{action="reload",outcome="unauthenticated"} 1`,
		`stackd_audit_total{action="sign-in",outcome="allowed"} 0`,
		`stackd_audit_dropped_total 0`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	if strings.Contains(text, "ci-viewer") || strings.Contains(text, `"ci"`) {
		t.Error("a token's name is a label value")
	}
}

// TestAuditWriteFails: a trail that cannot be written does not undo or
// refuse the request.
func TestAuditWriteFails(t *testing.T) {
	api := twoStacks()
	_, base := startWith(t, Options{API: api, Access: newFakeAccess(), Audit: &memAudit{err: errors.New("disk full")}})
	if code, v := callWith(t, "POST", base+"/api/v1/stacks/app/sync", bearer(operatorToken), ""); code != 202 {
		t.Errorf("sync = %d %v", code, v)
	}
}

// TestAuditUnauthenticatedLimit: beyond a burst, unauthenticated
// refusals are kept at one a second; the rest are counted.
func TestAuditUnauthenticatedLimit(t *testing.T) {
	var b bucket
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	kept := 0
	for range 200 {
		if b.allow(now, unauthBurst, unauthEvery) {
			kept++
		}
	}
	if kept != unauthBurst {
		t.Errorf("a burst kept %d, want %d", kept, unauthBurst)
	}
	if b.allow(now.Add(500*time.Millisecond), unauthBurst, unauthEvery) || !b.allow(now.Add(1100*time.Millisecond), unauthBurst, unauthEvery) || b.allow(now.Add(1200*time.Millisecond), unauthBurst, unauthEvery) {
		t.Error("after the burst, not one a second")
	}
	if !b.allow(now.Add(time.Hour), unauthBurst, unauthEvery) {
		t.Error("the bucket does not refill")
	}

	reg := prometheus.NewRegistry()
	api := twoStacks()
	m := metrics.New(reg, api, "test")
	trail := &memAudit{}
	_, base := startWith(t, Options{API: api, Access: newFakeAccess(), Audit: trail, Registry: reg, Metrics: m})
	for range unauthBurst + 5 {
		send(t, "POST", base+"/api/v1/reload", nil, "")
	}
	send(t, "POST", base+"/api/v1/stacks/app/sync", bearer(viewerToken), "") // denied: always kept
	if n := len(trail.all()); n != unauthBurst+1 {
		t.Errorf("%d records, want %d", n, unauthBurst+1)
	}
	text := webtest.Scrape(t, base)
	if !strings.Contains(text, "stackd_audit_dropped_total 5") {
		t.Error("the dropped refusals are not counted")
	}
}
