package spec

import (
	"strings"
	"testing"
)

func TestSpecHash(t *testing.T) {
	hash := func(src string) string {
		t.Helper()
		cfg, _ := mustParse(t, src)
		return cfg.Stack("app").SpecHash()
	}
	base := hash(minimalStack + "  config: {a: 1, b: {c: [1, 2]}}\n")
	if got := hash(minimalStack + "  config: {b: {c: [1, 2]}, a: 1}\n"); got != base {
		t.Error("key order changed the hash")
	}
	if got := hash(minimalStack + "  config: {a: 2, b: {c: [1, 2]}}\n"); got == base {
		t.Error("a config change kept the hash")
	}
	annotated := strings.Replace(minimalStack, "  name: app", "  name: app\n  annotations: {pulumi.com/reconciliation-request: x}", 1)
	if got := hash(annotated + "  config: {a: 1, b: {c: [1, 2]}}\n"); got != base {
		t.Error("an annotation changed the hash")
	}
	k8s := strings.Replace(minimalStack, "spec:\n", "spec:\n  serviceAccountName: pulumi\n", 1)
	if k8s == minimalStack {
		t.Fatal("fixture changed: no spec line")
	}
	if got := hash(k8s + "  config: {a: 1, b: {c: [1, 2]}}\n"); got != base {
		t.Error("a Kubernetes-only field changed the hash")
	}
	if len(base) != 64 {
		t.Errorf("hash %q", base)
	}
}
