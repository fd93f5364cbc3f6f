package spec

import (
	"fmt"
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

// TestRedactedHidesURLCredentials: the spec view never shows the user
// info or query of a backend, secrets provider or repository URL.
func TestRedactedHidesURLCredentials(t *testing.T) {
	for in, want := range map[string]string{
		"postgres://stackd:CANARY@db.internal:5432/pulumi?sslmode=disable": "postgres://[redacted]@db.internal:5432/pulumi?[redacted]",
		"hashivault://key?token=CANARY":                                    "hashivault://key?[redacted]",
		"s3://bucket/prefix":                                               "s3://bucket/prefix",
		"file:///var/lib/stackd/backend":                                   "file:///var/lib/stackd/backend",
		"https://user:CANARY@git.example/x.git":                            "https://[redacted]@git.example/x.git",
		"postgres://u:CAN ARY%zz@host/db":                                  "postgres://[redacted]",
		"git@github.com:acme/infra.git":                                    "git@github.com:acme/infra.git",
	} {
		if got := RedactURL(in); got != want {
			t.Errorf("RedactURL(%q) = %q, want %q", in, got, want)
		}
	}
	lit := ResourceRef{Type: RefLiteral, Literal: &LiteralRef{Value: "CANARY"}}
	m := Redacted(&StackSpec{Backend: "postgres://u:CANARY@h/db", SecretsProvider: "awskms://alias/x?region=CANARY", ProjectRepo: "https://git.example/x.git",
		SecretsRef: map[string]ResourceRef{"a": lit}, Secrets: map[string]string{"b": "CANARY"},
		ReviewStacks: &ReviewStacks{Enabled: true, Config: map[string]any{"c": "shown"}, SecretsRef: map[string]ResourceRef{"d": lit}}})
	if fmt.Sprint(m["reviewStacks"]) != "map[config:map[c:shown] enabled:true secretsRef:map[d:map[literal:map[value:[secret]] type:Literal]]]" {
		t.Errorf("reviewStacks = %v", m["reviewStacks"])
	}
	for k, v := range m {
		if strings.Contains(fmt.Sprint(v), "CANARY") {
			t.Errorf("%s shows the credential: %v", k, v)
		}
	}
}
