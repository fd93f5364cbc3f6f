package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stackd/stackd/daemon/model"
)

// Named API tokens of the roles file the access tests use.
const (
	ciToken        = "ci-4f1c9a7e2b8d4c6f9e0a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f6"
	dashboardToken = "dash-0a9b8c7d6e5f4a3b2c1d0e9f8a7b6c5d4e3f2a1b0c9d8e7f6a5b4c3d2e1f0a"
	appToken       = "app-5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c"
)

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// rolesFile is a roles file: the token ci holds operator (read and sync
// every stack), the token dashboards viewer (read), unless revoked, and
// the token app-team reads the stack app only.
func rolesFile(dashboards bool) string {
	s := "tokens:\n  - name: ci\n    sha256: " + sha256Hex(ciToken) + "\n    roles: [operator]\n" +
		"  - name: app-team\n    sha256: " + sha256Hex(appToken) + "\n    roles: [app-reader]\n"
	if dashboards {
		s += "  - name: dashboards\n    sha256: " + sha256Hex(dashboardToken) + "\n    roles: [viewer]\n"
	}
	return s + `roles:
  operator: {allow: [read, sync], stacks: ["*"]}
  viewer:   {allow: [read]}
  app-reader: {allow: [read], stacks: [app]}
bindings:
  - user: alice@example.com
    roles: [viewer]
  - group: platform-team
    roles: [operator]
  - group: platform-admins
    roles: [admin]
`
}

// as sends a request with a bearer token and returns the status and
// body.
func (in *instance) as(method, path, token string) (int, []byte) {
	in.t.Helper()
	req, err := http.NewRequest(method, in.url+path, nil)
	if err != nil {
		in.t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		in.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, body
}

// audit is the audit trail the API serves, newest first, read with the
// admin token.
func (in *instance) audit(query string) []model.AuditEntry {
	in.t.Helper()
	code, body := in.as(http.MethodGet, "/api/v1/audit"+query, in.token)
	var out struct{ Entries []model.AuditEntry }
	if err := json.Unmarshal(body, &out); code != http.StatusOK || err != nil {
		in.t.Fatalf("GET /api/v1/audit%s: %d %v %s", query, code, err, body)
	}
	return out.Entries
}

// TestE2ERolesAndAudit: with a roles file, a token bound to viewer gets
// 403 on a sync, which runs nothing and is in the audit trail; a token
// bound to operator syncs, and the trail names it ci. A token removed
// from the file is refused within seconds, without a restart.
func TestE2ERolesAndAudit(t *testing.T) {
	t.Parallel()
	r := newRepo(t)
	r.commit(map[string]string{"Pulumi.yaml": program("v1")})
	out := filepath.Join(outDir(t), "note.txt")
	authFile := filepath.Join(t.TempDir(), "roles.yaml")
	if err := os.WriteFile(authFile, []byte(rolesFile(true)), 0o600); err != nil {
		t.Fatal(err)
	}
	config := "stacks:\n" + strings.Replace(stackYAML("app", r, pathConfig(out)), "resyncFrequencySeconds: 1", "resyncFrequencySeconds: 600", 1)
	in := startDaemonWith(t, config, "", func(f *runFlags) { f.authFile, f.minResync = authFile, time.Minute })
	in.waitStack("app", "first deploy", time.Minute, isReady)

	code, body := in.as(http.MethodPost, "/api/v1/stacks/app/sync", dashboardToken)
	var refusal struct{ Error, Action, Stack string }
	if err := json.Unmarshal(body, &refusal); code != http.StatusForbidden || err != nil || refusal.Action != "sync" || refusal.Stack != "app" ||
		!strings.Contains(refusal.Error, `token "dashboards" (roles: viewer) may not sync stack app`) {
		t.Fatalf("the viewer's sync: %d %s", code, body)
	}
	time.Sleep(200 * time.Millisecond)
	if n := len(in.updates("app")); n != 1 {
		t.Fatalf("a refused sync ran an update (%d updates)", n)
	}
	if code, body := in.as(http.MethodPost, "/api/v1/stacks/app/sync", ciToken); code != http.StatusAccepted {
		t.Fatalf("the operator's sync: %d %s", code, body)
	}
	in.waitStack("app", "the sync", time.Minute, func(v model.StackView) bool {
		return isReady(v) && v.Status.LastUpdate.Name == "app-2"
	})

	entries := in.audit("?stack=app")
	if len(entries) != 2 {
		t.Fatalf("the trail of app: %+v", entries)
	}
	synced, refused := entries[0], entries[1]
	if refused.Principal.Kind != model.PrincipalToken || refused.Principal.Name != "dashboards" || refused.Action != "sync" ||
		refused.Outcome != model.AuditDenied || refused.Status != http.StatusForbidden || refused.Path != "/api/v1/stacks/app/sync" ||
		refused.Remote != "127.0.0.1" || !strings.Contains(refused.Reason, "may not sync stack app") {
		t.Errorf("the refusal's record: %+v", refused)
	}
	if synced.Principal.Name != "ci" || synced.Outcome != model.AuditAllowed || synced.Status != http.StatusAccepted || synced.Seq <= refused.Seq {
		t.Errorf("the sync's record: %+v", synced)
	}
	// The viewer may read app's trail (read on app); the whole trail is
	// the admin's.
	if code, _ := in.as(http.MethodGet, "/api/v1/audit?stack=app", dashboardToken); code != http.StatusOK {
		t.Errorf("the viewer's read of app's trail: %d", code)
	}
	if code, _ := in.as(http.MethodGet, "/api/v1/audit", dashboardToken); code != http.StatusForbidden {
		t.Errorf("the viewer's read of the whole trail: %d", code)
	}
	ciFile := filepath.Join(t.TempDir(), "ci-token")
	if err := os.WriteFile(ciFile, []byte(ciToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, stdout, stderr := stackd(t, "audit", "--server", in.url, "--api-token-file", ciFile, "--stack", "app"); code != exitOK ||
		!strings.Contains(stdout, "token:ci") || !strings.Contains(stdout, "token:dashboards") || !strings.Contains(stdout, "denied") {
		t.Errorf("stackd audit --stack app: exit %d\n%s%s", code, stdout, stderr)
	}

	// Revoked: removed from the file, refused once the file is reloaded.
	if err := os.WriteFile(authFile, []byte(rolesFile(false)), 0o600); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		code, _ := in.as(http.MethodGet, "/api/v1/stacks/app", dashboardToken)
		if code == http.StatusUnauthorized {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the revoked token still reads: %d", code)
		}
		time.Sleep(100 * time.Millisecond)
	}
	last := in.audit("?limit=1")[0]
	if last.Outcome != model.AuditUnauthenticated || !strings.Contains(last.Reason, "revoked") || strings.Contains(fmt.Sprint(last), dashboardToken) {
		t.Errorf("the revoked token's record: %+v", last)
	}
}
