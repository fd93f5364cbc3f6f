package main

import (
	"strings"
	"testing"
)

func TestValidatePolicies(t *testing.T) {
	code, stdout, _ := stackd(t, "validate", "--policy", "../../testdata/policy/good")
	if code != exitOK || !strings.Contains(stdout, "ok: 1 policy file(s), policies stackd.files") {
		t.Fatalf("good policies: exit %d\n%s", code, stdout)
	}
	code, stdout, _ = stackd(t, "validate", "--policy", "../../testdata/policy/bad", "../../testdata/config/good/pko-basic.yaml")
	if code != exitFail || !strings.Contains(stdout, "../../testdata/policy/bad/files.rego:4:1: ") || !strings.Contains(stdout, "ok: ") {
		t.Fatalf("bad policies, good config: exit %d\n%s", code, stdout)
	}
}
