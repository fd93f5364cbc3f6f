package auth

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stackd/stackd/daemon/access"
	"github.com/stackd/stackd/daemon/model"
)

// BenchmarkBearer resolves a named token among 100, every hash compared.
func BenchmarkBearer(b *testing.B) {
	var src strings.Builder
	src.WriteString("tokens:\n")
	for i := range 100 {
		fmt.Fprintf(&src, "  - {name: t%d, sha256: %s, roles: [admin]}\n", i, HashToken(fmt.Sprint("secret-", i)))
	}
	pol, err := Parse("roles.yaml", []byte(src.String()))
	if err != nil {
		b.Fatal(err)
	}
	a, _ := New(Options{AdminToken: "admin"})
	a.SetPolicy(pol)
	for b.Loop() {
		if _, err := a.Bearer("secret-99"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSession checks a session cookie of a user in 20 groups.
func BenchmarkSession(b *testing.B) {
	a, _ := New(Options{SessionKey: testKey(1)})
	p := model.Principal{Kind: model.PrincipalUser, Name: "alice@example.com", Subject: "u1"}
	for i := range 20 {
		p.Groups = append(p.Groups, fmt.Sprint("group-", i))
	}
	cookie, _ := newSession(a.sessions, p, time.Now(), time.Hour)
	b.ReportMetric(float64(len(cookie)), "cookie-bytes")
	for b.Loop() {
		if _, err := a.Session(cookie); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAllowed decides for a user in a group bound to a scoped role.
func BenchmarkAllowed(b *testing.B) {
	pol, err := Parse("roles.yaml", []byte(examplePolicy))
	if err != nil {
		b.Fatal(err)
	}
	bob := model.Principal{Kind: model.PrincipalUser, Name: "bob@example.com", Groups: []string{"x", "y", "team-a"}}
	stack := &access.StackRef{Name: "team-a-web", Source: "git+https://git.example.com/team-a/stacks", Labels: map[string]string{"team": "a"}}
	for b.Loop() {
		if ok, _ := pol.Allowed(bob, access.ActionPause, stack); !ok {
			b.Fatal("refused")
		}
	}
}
