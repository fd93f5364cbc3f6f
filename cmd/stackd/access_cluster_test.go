package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stackd/stackd/cluster/etcdtest"
	"github.com/stackd/stackd/daemon/model"
)

// TestE2EClusterAccess: two replicas share the roles file, the session
// key and the admin token. A sign-in started on one replica finishes on
// the other (behind one URL, the provider's redirect lands on any), and
// the session works on both. Each replica records what it served, and
// either serves the whole trail, each entry naming its replica.
func TestE2EClusterAccess(t *testing.T) {
	t.Parallel()
	toolchainBin(t)
	etcd := etcdtest.Start(t, 1)
	e := newClusterEnv(t, etcd.Endpoints())
	src := newRepo(t)
	src.commit(map[string]string{"Pulumi.yaml": clusterProgram})
	e.writeConfig(src, 2, nil)
	files := map[string]string{
		"roles.yaml":    rolesFile(true),
		"session.key":   strings.Repeat("5e", 32) + "\n",
		"admin-token":   "cluster-admin-token-0123456789abcdef\n",
		"client-secret": "client-secret\n",
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(e.dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	tp := listenTestOP(t)
	var redirect string
	flags := func() []string {
		return []string{"--auth-file", filepath.Join(e.dir, "roles.yaml"), "--session-key-file", filepath.Join(e.dir, "session.key"),
			"--api-token-file", filepath.Join(e.dir, "admin-token"),
			"--oidc-issuer", tp.issuer, "--oidc-client-id", "stackd", "--oidc-client-secret-file", filepath.Join(e.dir, "client-secret"),
			"--oidc-redirect-url", redirect, "--oidc-scope", "openid", "--oidc-scope", "email", "--oidc-scope", "groups"}
	}
	// The provider returns every browser to b, whichever replica it
	// started on: b's address is chosen before b starts.
	addr := freeAddr(t)
	log, err := os.Create(filepath.Join(e.dir, "b.log"))
	if err != nil {
		t.Fatal(err)
	}
	e.replicas["b"] = &replica{name: "b", addr: addr, url: "http://" + addr, dataDir: filepath.Join(e.dir, "b"), log: log}
	redirect = "http://" + addr + "/auth/callback"
	b := e.start("b", flags()...)
	tp.serve(redirect)
	a := e.start("a", flags()...)
	e.waitAll(a, 2, "both stacks deployed", 2*time.Minute, readyWith("1s"))

	bob := "bob"
	tp.user.Store(&bob)
	jar, _ := cookiejar.New(nil) // cookies are per host, not per port: the replicas share them
	browser := &http.Client{Jar: jar, Timeout: 30 * time.Second}
	resp, err := browser.Get(a.url + "/auth/login?return=%2F")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Request.URL.Host != b.addr || !strings.Contains(string(page), "Signed in as <strong>bob@example.com</strong>") {
		t.Fatalf("a sign-in started on a and returned to b: %d at %s\n%s", resp.StatusCode, resp.Request.URL, page)
	}
	resp, err = browser.Get(a.url + "/stacks/c00")
	if err != nil {
		t.Fatal(err)
	}
	page, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(page), "Signed in as <strong>bob@example.com</strong>") || !strings.Contains(string(page), `action="/stacks/c00/sync"`) {
		t.Fatalf("b's session on a: %d\n%s", resp.StatusCode, page)
	}

	post := func(r *replica, path, token string) int {
		req, _ := http.NewRequest(http.MethodPost, r.url+path, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := post(a, "/api/v1/stacks/c00/sync", dashboardToken); code != http.StatusForbidden {
		t.Errorf("the viewer's sync on a: %d", code)
	}
	if code := post(b, "/api/v1/stacks/c01/sync", ciToken); code != http.StatusAccepted {
		t.Errorf("the operator's sync on b: %d", code)
	}

	admin := strings.TrimSpace(files["admin-token"])
	for _, r := range []*replica{a, b} {
		req, _ := http.NewRequest(http.MethodGet, r.url+"/api/v1/audit", nil)
		req.Header.Set("Authorization", "Bearer "+admin)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var out struct{ Entries []model.AuditEntry }
		err = json.NewDecoder(resp.Body).Decode(&out)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("the trail from %s: %d %v", r.name, resp.StatusCode, err)
		}
		var got []string
		for _, e := range out.Entries {
			got = append(got, e.Node+" "+e.Principal.Name+" "+e.Action+" "+e.Stack+" "+e.Outcome)
		}
		want := []string{"b ci sync c01 allowed", "a dashboards sync c00 denied", "b bob@example.com sign-in  allowed"}
		if strings.Join(got, "|") != strings.Join(want, "|") {
			t.Errorf("the trail from %s:\n%s\nwant\n%s", r.name, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
}
