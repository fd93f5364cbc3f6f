package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// tool finds a program the tests need from Debian's packages: missing is a
// failure, except under -short.
func tool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if testing.Short() {
			t.Skipf("%s not installed", name)
		}
		t.Fatalf("%s not installed (.ci/run installs it): %v", name, err)
	}
	return p
}

// TestE2EPrometheusScrapesDaemon: promtool accepts the daemon's /metrics,
// and a real Prometheus server scraping it answers a PromQL query about
// the stack.
func TestE2EPrometheusScrapesDaemon(t *testing.T) {
	t.Parallel()
	promtool, prometheus := tool(t, "promtool"), tool(t, "prometheus")
	r := newRepo(t)
	r.commit(map[string]string{"Pulumi.yaml": program("v1")})
	in := startDaemon(t, "stacks:\n"+stackYAML("app", r, pathConfig(filepath.Join(outDir(t), "note.txt"))), "")
	in.waitStack("app", "deployed", time.Minute, isReady)

	code, body := in.get("/metrics", nil)
	if code != http.StatusOK || !strings.Contains(string(body), `stackd_stack_ready{stack="app"} 1`) {
		t.Fatalf("/metrics: %d\n%s", code, body)
	}
	check := exec.Command(promtool, "check", "metrics")
	check.Stdin = strings.NewReader(string(body))
	if out, err := check.CombinedOutput(); err != nil {
		t.Fatalf("promtool check metrics: %v\n%s", err, out)
	}

	prom := startPrometheus(t, prometheus, in)
	prom.waitFor(`stackd_stack_ready{stack="app"}`, "1")
}

// promServer is a real Prometheus scraping a daemon every second.
type promServer struct {
	t    *testing.T
	addr string
	logs *syncBuffer
}

func startPrometheus(t *testing.T, prometheus string, in *instance) *promServer {
	t.Helper()
	dir := t.TempDir()
	target := strings.TrimPrefix(in.url, "http://")
	cfg := fmt.Sprintf("global: {scrape_interval: 1s}\nscrape_configs:\n  - job_name: stackd\n    static_configs:\n      - targets: [%q]\n", target)
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	p := &promServer{t: t, addr: freeAddr(t), logs: &syncBuffer{}}
	ctx, cancel := context.WithCancel(context.Background())
	srv := exec.CommandContext(ctx, prometheus, "--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+p.addr)
	srv.Stdout, srv.Stderr = p.logs, p.logs
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); _ = srv.Wait() })
	return p
}

// waitFor polls an instant query until its first sample has value want.
func (p *promServer) waitFor(query, want string) {
	p.t.Helper()
	u := "http://" + p.addr + "/api/v1/query?query=" + url.QueryEscape(query)
	deadline := time.Now().Add(time.Minute)
	last := "no sample"
	for {
		if v, ok := promValue(u); ok {
			if v == want {
				return
			}
			last = v
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("Prometheus: %s = %s, want %s; its log:\n%s", query, last, want, p.logs)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// promValue runs an instant query and returns the first sample's value.
func promValue(query string) (string, bool) {
	resp, err := http.Get(query)
	if err != nil {
		return "", false
	}
	defer resp.Body.Close()
	var out struct {
		Data struct {
			Result []struct {
				Value []any `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if json.NewDecoder(resp.Body).Decode(&out) != nil || len(out.Data.Result) == 0 || len(out.Data.Result[0].Value) != 2 {
		return "", false
	}
	v, _ := out.Data.Result[0].Value[1].(string)
	return v, true
}

// TestAlertRules: promtool accepts the alerting rules, their unit tests
// (configs/stackd.rules.test.yml) pass, every alert is tested there, and
// the rules cover the series that deserve an alert.
func TestAlertRules(t *testing.T) {
	promtool := tool(t, "promtool")
	dir := filepath.Join("..", "..", "configs")
	if out, err := exec.Command(promtool, "check", "rules", filepath.Join(dir, "stackd.rules.yml")).CombinedOutput(); err != nil {
		t.Fatalf("promtool check rules: %v\n%s", err, out)
	}
	test := exec.Command(promtool, "test", "rules", "stackd.rules.test.yml")
	test.Dir = dir
	if out, err := test.CombinedOutput(); err != nil {
		t.Fatalf("promtool test rules: %v\n%s", err, out)
	}
	rules, err := os.ReadFile(filepath.Join(dir, "stackd.rules.yml"))
	if err != nil {
		t.Fatal(err)
	}
	tests, err := os.ReadFile(filepath.Join(dir, "stackd.rules.test.yml"))
	if err != nil {
		t.Fatal(err)
	}
	alerts := regexp.MustCompile(`(?m)^\s*- alert: (\w+)$`).FindAllStringSubmatch(string(rules), -1)
	if len(alerts) == 0 {
		t.Fatal("no alert found in the rules")
	}
	for _, a := range alerts {
		fired := regexp.MustCompile(`alertname: ` + a[1] + `\n\s*exp_alerts:`)
		if !fired.Match(tests) {
			t.Errorf("stackd.rules.test.yml never fires %s", a[1])
		}
	}
	for _, m := range []string{"stackd_stack_stalled", "stackd_stack_failing", "stackd_config_last_reload_successful",
		"stackd_stack_last_success_timestamp_seconds", "stackd_stack_ready", "stackd_stack_drifted", "stackd_drift_checks_total",
		"stackd_tls_certificate_expiry_timestamp_seconds", "stackd_tls_certificate_last_reload_successful",
		"stackd_config_source_failing", "stackd_config_source_last_poll_timestamp_seconds", "stackd_paused",
		"stackd_queue_depth", "stackd_git_polls_total", "stackd_audit_dropped_total", "stackd_cluster_session",
		"stackd_cluster_leader", "stackd_policy_last_reload_successful", "stackd_stacks_awaiting_approval",
		"stackd_sandbox_enforced", "stackd_review_stacks", "stackd_oidc_signing_key_age_seconds",
		"stackd_rollout_halted", "stackd_stackset_generator_failing"} {
		if !strings.Contains(string(rules), m) {
			t.Errorf("the rules do not use %s", m)
		}
	}
}
