package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stackd/stackd/cluster/etcdtest"
	"github.com/stackd/stackd/daemon/access"
	"github.com/stackd/stackd/daemon/model"
)

// TestE2EClusterDecideAnyReplica: in a cluster, what only a stack's
// holder can do may be asked of any replica, which passes it on. The
// plan of a stack awaiting approval is approved through the replica
// that does not hold it; the holder applies it, and its audit record
// (the only one) names who approved. A preview now asked of that replica
// runs on the holder, and its result is read through either.
func TestE2EClusterDecideAnyReplica(t *testing.T) {
	t.Parallel()
	toolchainBin(t)
	etcd := etcdtest.Start(t, 1)
	e := newClusterEnv(t, etcd.Endpoints())
	src := newRepo(t)
	src.commit(map[string]string{"Pulumi.yaml": clusterProgram})
	config := "stacks:\n" + stackYAML("c00", src, "    config: {duration: 1s}\n    approval: {required: true}\n")
	tokenFile := filepath.Join(e.dir, "admin-token")
	const token = "cluster-admin-token-0123456789abcdef"
	for file, content := range map[string]string{e.config: config, tokenFile: token + "\n"} {
		if err := os.WriteFile(file, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	n1, n2 := e.start("node-1", "--api-token-file", tokenFile), e.start("node-2", "--api-token-file", tokenFile)
	v := e.waitAll(n1, 1, "the first plan awaiting approval", 3*time.Minute, func(v model.StackView) bool {
		return v.Holder != "" && v.Status.Gate != nil && v.Status.Gate.State == model.GateAwaiting && v.Status.Gate.Plan != nil
	})[0]
	other := n1
	if v.Holder == n1.name {
		other = n2
	}

	post := func(path string, body []byte) (int, string) {
		req, _ := http.NewRequest(http.MethodPost, other.url+path, bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out bytes.Buffer
		_, _ = out.ReadFrom(resp.Body)
		return resp.StatusCode, out.String()
	}
	if code, body := post("/api/v1/stacks/c00/approve", []byte(`{"plan":"`+v.Status.Gate.Plan.ID+`"}`)); code != http.StatusOK {
		t.Fatalf("approval through %s, which does not hold c00: %d %s", other.name, code, body)
	}
	e.waitAll(other, 1, "the approved plan applied", 2*time.Minute, readyWith("1s"))

	var trail struct{ Entries []model.AuditEntry }
	req, _ := http.NewRequest(http.MethodGet, other.url+"/api/v1/audit?stack=c00", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	err = json.NewDecoder(resp.Body).Decode(&trail)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	var approvals []string
	for _, a := range trail.Entries {
		if a.Action == access.ActionApprove {
			approvals = append(approvals, a.Node+" "+a.Principal.Kind+" "+a.Outcome)
		}
	}
	if want := v.Holder + " " + model.PrincipalAdmin + " " + model.AuditAllowed; len(approvals) != 1 || approvals[0] != want {
		t.Errorf("approvals in the audit trail %q, want one: %q", approvals, want)
	}

	// A preview now, asked of the same replica.
	if code, body := post("/api/v1/stacks/c00/preview", nil); code != http.StatusAccepted {
		t.Fatalf("preview now through %s: %d %s", other.name, code, body)
	}
	for _, r := range []*replica{n1, n2} {
		waitFor(t, "the preview's result on "+r.name, 2*time.Minute, func() bool {
			var p model.StackPreview
			code, err := getJSON(r.url+"/api/v1/stacks/c00/preview", &p)
			return err == nil && code == http.StatusOK && p.State == model.UpdateSucceeded
		})
	}
	data, _ := os.ReadFile(other.log.Name())
	if !strings.Contains(string(data), "passing a request on to the replica holding the stack") {
		t.Errorf("%s did not log passing the requests on", other.name)
	}
}
