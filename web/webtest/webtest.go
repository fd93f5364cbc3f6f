// Package webtest holds what the tests of package web and of its own
// packages share: a scrape of GET /metrics that promtool checks.
package webtest

import (
	"io"
	"net/http"
	"os/exec"
	"strings"
	"testing"
)

// Scrape gets url's /metrics, failing unless promtool accepts it.
func Scrape(t testing.TB, url string) string {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		t.Fatalf("/metrics = %d %s", resp.StatusCode, body)
	}
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		if testing.Short() {
			t.Logf("promtool not installed; not checking the exposition format")
			return string(body)
		}
		t.Fatalf("promtool not installed: %v", err)
	}
	check := exec.Command(promtool, "check", "metrics")
	check.Stdin = strings.NewReader(string(body))
	if out, err := check.CombinedOutput(); err != nil {
		t.Fatalf("promtool check metrics: %v\n%s", err, out)
	}
	return string(body)
}
