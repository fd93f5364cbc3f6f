package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stackd/stackd/daemon/model"
)

// TestE2EOneStacksSecretHiddenFromAnother: stack "keeper" holds a secret
// (a Secret reference); stack "leaker"'s program has that value, the
// daemon's API token and a URL with a private_token written into it as
// plain outputs, and stack "failer"'s program fails with the secret in
// its error. None of them shows in the API, the UI, /metrics, the
// notifications, stackd.db or the daemon's log.
func TestE2EOneStacksSecretHiddenFromAnother(t *testing.T) {
	t.Parallel()
	const (
		keeperSecret = "keeper-SENTINEL-3a7d"
		apiToken     = "apitok-SENTINEL-77aa"
		urlToken     = "glpat-SENTINEL-9b9b"
	)
	keeper, leaker, failer := newRepo(t), newRepo(t), newRepo(t)
	keeper.commit(map[string]string{"Pulumi.yaml": "name: keeper\nruntime: yaml\noutputs:\n  ok: yes\n"})
	leaker.commit(map[string]string{"Pulumi.yaml": `name: leaker
runtime: yaml
outputs:
  stolen: ` + keeperSecret + `
  token: "the API token is ` + apiToken + `"
  url: https://git.example/g/app.git?private_token=` + urlToken + `&ref=main
`})
	failer.commit(map[string]string{"Pulumi.yaml": `name: failer
runtime: yaml
resources:
  wait:
    type: stackdtest:index:Sleep
    properties:
      duration: ` + keeperSecret + `
`})
	var mu sync.Mutex
	var notified []string
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		notified = append(notified, string(body))
		mu.Unlock()
	}))
	defer receiver.Close()

	dataDir := filepath.Join(t.TempDir(), "data")
	secrets := filepath.Join(dataDir, "..", "secrets", "keeper")
	if err := os.MkdirAll(secrets, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(secrets, "password"), []byte(keeperSecret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tokenFile := filepath.Join(t.TempDir(), "api-token")
	if err := os.WriteFile(tokenFile, []byte(apiToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	config := "stacks:\n" + stackYAML("keeper", keeper, `    secretsRef:
      password: {type: Secret, secret: {name: keeper, key: password}}
`) + stackYAML("leaker", leaker, "") + stackYAML("failer", failer, "")
	in := startDaemonWith(t, config, dataDir, func(f *runFlags) {
		f.tokenFile = tokenFile
		_ = f.notifyURLs.Set(receiver.URL)
	})
	in.waitStack("keeper", "deployed", time.Minute, isReady)
	v := in.waitStack("leaker", "deployed", time.Minute, isReady)
	in.waitStack("failer", "failed", time.Minute, func(v model.StackView) bool {
		return v.Status.LastUpdate != nil && v.Status.LastUpdate.State == model.UpdateFailed
	})
	if got := output(v, "stolen"); got != "[secret]" {
		t.Errorf("output stolen = %q", got)
	}
	if got := output(v, "token"); got != "the API token is [secret]" {
		t.Errorf("output token = %q", got)
	}
	if got := output(v, "url"); got != "https://git.example/g/app.git?private_token=[secret]&ref=main" {
		t.Errorf("output url = %q", got)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		mu.Lock()
		n := len(notified)
		mu.Unlock()
		if n > 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}

	var bodies []string
	paths := []string{"/api/v1/stacks", "/api/v1/stacks/leaker", "/api/v1/stacks/failer", "/api/v1/config",
		"/metrics", "/", "/stacks/leaker", "/stacks/failer"}
	for _, name := range []string{"leaker", "failer"} {
		paths = append(paths, "/api/v1/stacks/"+name+"/updates")
		for _, u := range in.updates(name) {
			paths = append(paths, "/api/v1/updates/"+u.ID+"/log")
		}
	}
	for _, path := range paths {
		_, body := in.get(path, nil)
		bodies = append(bodies, path+": "+string(body))
	}
	failed := in.stack("failer").Status.LastUpdate
	logs := in.logs.String()
	in.stop()
	db, err := os.ReadFile(filepath.Join(dataDir, "stackd.db"))
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	bodies = append(bodies, "notifications: "+strings.Join(notified, "\n"), "stackd.db: "+string(db), "daemon log: "+logs)
	if len(notified) == 0 {
		t.Error("no notification came: the failure's is not checked")
	}
	mu.Unlock()
	if !strings.Contains(failed.Message, "[secret]") {
		t.Errorf("failer's message %q does not show the masked duration", failed.Message)
	}
	for _, b := range bodies {
		if strings.Contains(b, "SENTINEL") {
			where, _, _ := strings.Cut(b, ":")
			t.Errorf("%s holds a secret", where)
		}
	}
}
