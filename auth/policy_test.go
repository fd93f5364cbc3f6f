package auth

import (
	"errors"
	"strings"
	"testing"

	"github.com/stackd/stackd/daemon/access"
	"github.com/stackd/stackd/daemon/model"
)

// examplePolicy is the roles file of docs/access.md's example.
const examplePolicy = `
tokens:
  - name: ci
    sha256: 5e884898da28047151d0e56f8dc6292773603d0d6aabbdd62a11ef721d1542d8
    roles: [operator]
  - name: deploy-bot
    sha256: 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08
    roles: [team-a]
    expires: 2027-01-01T00:00:00Z
roles:
  operator: {allow: [read, sync], stacks: ["*"]}
  viewer:   {allow: [read]}
  reloader: {allow: [reload]}
  team-a:
    allow: [read, sync, pause]
    stacks: ["team-a-*"]
    sources: ["git+https://git.example.com/team-a/*"]
    labels: {team: a}
  labelled: {allow: [cancel], labels: {tier: prod, team: b}}
bindings:
  - group: platform-admins
    roles: [admin]
  - user: Alice@Example.com
    roles: [operator]
  - group: team-a
    roles: [team-a]
anonymous: [viewer]
`

func mustParse(t *testing.T, src string) *Policy {
	t.Helper()
	pol, err := Parse("roles.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	return pol
}

func TestAllowed(t *testing.T) {
	pol := mustParse(t, examplePolicy)
	teamA := &access.StackRef{Name: "team-a-web", Source: "git+https://git.example.com/team-a/stacks//prod?ref=main", Labels: map[string]string{"team": "a"}}
	teamAOtherSource := &access.StackRef{Name: "team-a-web", Source: "/etc/stackd/stacks", Labels: map[string]string{"team": "a"}}
	teamANoLabel := &access.StackRef{Name: "team-a-web", Source: teamA.Source}
	db := &access.StackRef{Name: "db", Source: "/etc/stackd/stacks", Labels: map[string]string{"tier": "prod", "team": "b"}}

	ci := model.Principal{Kind: model.PrincipalToken, Name: "ci"}
	bot := model.Principal{Kind: model.PrincipalToken, Name: "deploy-bot"}
	revoked := model.Principal{Kind: model.PrincipalToken, Name: "gone"}
	alice := model.Principal{Kind: model.PrincipalUser, Name: "Alice@Example.com"}
	bob := model.Principal{Kind: model.PrincipalUser, Name: "bob@example.com", Groups: []string{"team-a"}}
	root := model.Principal{Kind: model.PrincipalUser, Name: "carol@example.com", Groups: []string{"x", "platform-admins"}}
	nobody := model.Principal{Kind: model.PrincipalUser, Name: "dave@example.com"}
	admin := model.Principal{Kind: model.PrincipalAdmin}
	anon := model.Principal{Kind: model.PrincipalAnonymous}

	cases := []struct {
		name   string
		p      model.Principal
		action string
		stack  *access.StackRef
		want   bool
		reason string // a part of the reason for a refusal
	}{
		{"operator token reads", ci, access.ActionRead, db, true, ""},
		{"operator token syncs any stack", ci, access.ActionSync, db, true, ""},
		{"operator token may not pause", ci, access.ActionPause, db, false, `token "ci" (roles: operator, viewer) may not pause stack db`},
		{"stacks [*] is a selector: not daemon-wide", ci, access.ActionSync, nil, false, "daemon-wide"},
		{"viewer role has no selector: reads daemon-wide", ci, access.ActionRead, nil, true, ""},
		{"token of a role scoped by name, source and labels", bot, access.ActionPause, teamA, true, ""},
		{"another source is outside the role", bot, access.ActionPause, teamAOtherSource, false, "may not pause stack team-a-web"},
		{"a missing label is outside the role", bot, access.ActionSync, teamANoLabel, false, ""},
		{"another name is outside the role", bot, access.ActionSync, db, false, ""},
		{"anonymous roles apply to tokens too", bot, access.ActionRead, db, true, ""},
		{"a token not in the file holds only the anonymous roles", revoked, access.ActionSync, db, false, ""},
		{"user bound by name", alice, access.ActionSync, teamA, true, ""},
		{"user bound by a group", bob, access.ActionPause, teamA, true, ""},
		{"group role does not reach other stacks", bob, access.ActionPause, db, false, ""},
		{"admin role through a group: daemon-wide", root, access.ActionReload, nil, true, ""},
		{"admin role: every action on every stack", root, access.ActionApprove, db, true, ""},
		{"unbound user reads as anonymous", nobody, access.ActionRead, db, true, ""},
		{"unbound user may not sync", nobody, access.ActionSync, db, false, `user "dave@example.com" (roles: viewer) may not sync stack db`},
		{"admin token may do everything", admin, access.ActionReload, nil, true, ""},
		{"admin token on a stack", admin, access.ActionCancel, db, true, ""},
		{"anonymous reads", anon, access.ActionRead, db, true, ""},
		{"anonymous may not sync", anon, access.ActionSync, db, false, "sign in or give an API token"},
		{"empty principal is anonymous", model.Principal{}, access.ActionSync, db, false, "sign in"},
		{"unknown action", admin, "deploy", db, false, `unknown action "deploy"`},
	}
	for _, c := range cases {
		got, why := pol.Allowed(c.p, c.action, c.stack)
		if got != c.want {
			t.Errorf("%s: Allowed = %v (%s), want %v", c.name, got, why, c.want)
			continue
		}
		if got && why != "" {
			t.Errorf("%s: allowed with a reason %q", c.name, why)
		}
		if !got && (why == "" || !strings.Contains(why, c.reason)) {
			t.Errorf("%s: reason %q, want it to hold %q", c.name, why, c.reason)
		}
	}
}

// TestUserBindingNames: how a signed-in user's name matches a user
// binding follows the name claim. An email's domain is compared without
// case, the part before it exactly; any other claim's value exactly.
func TestUserBindingNames(t *testing.T) {
	pol := mustParse(t, "roles: {r: {allow: [sync]}}\nbindings:\n  - {user: alice@Example.com, roles: [r]}\n  - {user: bob, roles: [r]}\n")
	cases := []struct {
		name    string
		byEmail bool
		want    bool
	}{
		{"alice@Example.com", true, true},
		{"alice@example.com", true, true},
		{"alice@EXAMPLE.COM", true, true},
		{"Alice@example.com", true, false},
		{"ALICE@EXAMPLE.COM", true, false},
		{"alice@example.co", true, false},
		{"bob", true, true},
		{"Bob", true, false},
		{"alice@Example.com", false, true},
		{"alice@example.com", false, false},
		{"Alice@Example.com", false, false},
		{"bob", false, true},
		{"BOB", false, false},
	}
	for _, c := range cases {
		p := model.Principal{Kind: model.PrincipalUser, Name: c.name}
		if got, _ := pol.allowed(p, c.byEmail, access.ActionSync, nil); got != c.want {
			t.Errorf("user %q (byEmail %v): allowed = %v, want %v", c.name, c.byEmail, got, c.want)
		}
	}
	if got, _ := pol.Allowed(model.Principal{Kind: model.PrincipalUser, Name: "alice@example.com"}, access.ActionSync, nil); got {
		t.Error("Policy.Allowed folded a name's case")
	}
}

func TestAllowedLabelsAllMustMatch(t *testing.T) {
	pol := mustParse(t, "roles: {labelled: {allow: [cancel], labels: {tier: prod, team: b}}}\nbindings: [{user: u, roles: [labelled]}]")
	u := model.Principal{Kind: model.PrincipalUser, Name: "u"}
	for _, c := range []struct {
		labels map[string]string
		want   bool
	}{
		{map[string]string{"tier": "prod", "team": "b"}, true},
		{map[string]string{"tier": "prod", "team": "b", "extra": "x"}, true},
		{map[string]string{"tier": "prod"}, false},
		{map[string]string{"tier": "prod", "team": "a"}, false},
		{nil, false},
	} {
		if got, _ := pol.Allowed(u, access.ActionCancel, &access.StackRef{Name: "s", Labels: c.labels}); got != c.want {
			t.Errorf("labels %v: Allowed = %v, want %v", c.labels, got, c.want)
		}
	}
}

func TestEmptyPolicyGrantsNothing(t *testing.T) {
	for _, pol := range []*Policy{{}, mustParse(t, ""), mustParse(t, "# nothing yet\n")} {
		for _, p := range []model.Principal{{Kind: model.PrincipalUser, Name: "a"}, {Kind: model.PrincipalToken, Name: "ci"}, {}} {
			if ok, _ := pol.Allowed(p, access.ActionRead, &access.StackRef{Name: "s"}); ok {
				t.Errorf("%+v may read under an empty policy", p)
			}
		}
		if ok, _ := pol.Allowed(model.Principal{Kind: model.PrincipalAdmin}, access.ActionReload, nil); !ok {
			t.Error("the admin token may not reload under an empty policy")
		}
	}
}

func TestSourceMatch(t *testing.T) {
	cases := []struct {
		pattern, source string
		want            bool
	}{
		{"/etc/stackd", "/etc/stackd", true},
		{"/etc/stackd", "/etc/stackd/more", false},
		{"/etc/stackd*", "/etc/stackd/more", true},
		{"git+https://h/org/*", "git+https://h/org/repo//dir?ref=main", true},
		{"git+https://h/org/*", "git+https://h/other/repo", false},
		{"*", "anything", true},
	}
	for _, c := range cases {
		if got := sourceMatch(c.pattern, c.source); got != c.want {
			t.Errorf("sourceMatch(%q, %q) = %v, want %v", c.pattern, c.source, got, c.want)
		}
	}
}

func TestParseErrors(t *testing.T) {
	const hash = "5e884898da28047151d0e56f8dc6292773603d0d6aabbdd62a11ef721d1542d8"
	cases := []struct {
		name, src string
		want      []string // each a whole diagnostic line
	}{
		{"unknown top-level field", "rolez: {}\n",
			[]string{`roles.yaml:1:1: rolez: unknown field "rolez" (did you mean "roles"?)`}},
		{"unknown role field", "roles:\n  r: {allow: [read], stack: [a]}\n",
			[]string{`roles.yaml:2:22: roles.r.stack: unknown field "stack" (did you mean "stacks"?)`}},
		{"unknown action", "roles:\n  r: {allow: [read, deploy]}\n",
			[]string{`roles.yaml:2:21: roles.r.allow: unknown action "deploy" (actions: read, sync, pause, reload, approve, cancel, override, admin)`}},
		{"resume", "roles:\n  r: {allow: [resume]}\n",
			[]string{`roles.yaml:2:15: roles.r.allow: resume is allowed together with pause: allow pause`}},
		{"no actions", "roles:\n  r: {allow: []}\n  s: {stacks: [a]}\n",
			[]string{
				`roles.yaml:2:6: roles.r.allow: a role must allow at least one action (read, sync, pause, reload, approve, cancel, override, admin)`,
				`roles.yaml:3:6: roles.s.allow: a role must allow at least one action (read, sync, pause, reload, approve, cancel, override, admin)`,
			}},
		{"bad glob", "roles:\n  r: {allow: [read], stacks: [\"team-[a\"]}\n",
			[]string{`roles.yaml:2:31: roles.r.stacks: not a valid stack name glob (*, ? and [a-z] as in path.Match)`}},
		{"bad source", "roles:\n  r: {allow: [read], sources: [\"a*b\"]}\n",
			[]string{`roles.yaml:2:32: roles.r.sources: a source is a config source as given to --config, or a prefix of one followed by *`}},
		{"admin redefined", "roles:\n  admin: {allow: [read]}\n",
			[]string{`roles.yaml:2:3: roles.admin: admin is the built-in role that allows everything; bind it without defining it`}},
		{"bad role name", "roles:\n  \"a b\": {allow: [read]}\n",
			[]string{`roles.yaml:2:3: roles.a b: a role name is letters, digits, '.', '_', '@' and '-', starting with a letter or digit, at most 100 characters`}},
		{"unknown role in a token", "roles: {viewer: {allow: [read]}}\ntokens:\n  - {name: ci, sha256: " + hash + ", roles: [veiwer]}\n",
			[]string{`roles.yaml:3:98: tokens[0].roles: unknown role "veiwer" (did you mean "viewer"?)`}},
		{"unknown role in a binding", "bindings:\n  - {group: g, roles: [ops]}\n",
			[]string{`roles.yaml:2:24: bindings[0].roles: unknown role "ops" (define it under roles)`}},
		{"unknown anonymous role", "anonymous: [viewer]\n",
			[]string{`roles.yaml:1:13: anonymous: unknown role "viewer" (define it under roles)`}},
		{"bad hex", "tokens:\n  - name: ci\n    sha256: xyz\n    roles: [admin]\n",
			[]string{`roles.yaml:3:13: tokens[0].sha256: expected 64 hex digits, the SHA-256 of the token (printf %s "$TOKEN" | sha256sum)`}},
		{"short hash", "tokens:\n  - {name: ci, sha256: abcd, roles: [admin]}\n",
			[]string{`roles.yaml:2:24: tokens[0].sha256: expected 64 hex digits, the SHA-256 of the token (printf %s "$TOKEN" | sha256sum)`}},
		{"hash of nothing", "tokens:\n  - {name: ci, sha256: e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855, roles: [admin]}\n",
			[]string{`roles.yaml:2:24: tokens[0].sha256: the SHA-256 of an empty token`}},
		{"duplicate token name", "tokens:\n  - {name: ci, sha256: " + hash + ", roles: [admin]}\n  - {name: ci, sha256: " + strings.Repeat("a", 64) + ", roles: [admin]}\n",
			[]string{`roles.yaml:3:12: tokens[1].name: duplicate token name "ci" (first at line 2)`}},
		{"duplicate token hash", "tokens:\n  - {name: ci, sha256: " + hash + ", roles: [admin]}\n  - {name: cd, sha256: " + strings.ToUpper(hash) + ", roles: [admin]}\n",
			[]string{`roles.yaml:3:24: tokens[1].sha256: the same hash as the token at line 2: one secret, one name`}},
		{"token fields missing", "tokens:\n  - {name: ci}\n",
			[]string{`roles.yaml:2:5: tokens[0].sha256: required`, `roles.yaml:2:5: tokens[0].roles: required`}},
		{"bad token name", "tokens:\n  - {name: \"c i\", sha256: " + hash + ", roles: [admin]}\n",
			[]string{`roles.yaml:2:12: tokens[0].name: a token name is letters, digits, '.', '_', '@' and '-', starting with a letter or digit, at most 100 characters`}},
		{"bad expiry", "tokens:\n  - {name: ci, sha256: " + hash + ", roles: [admin], expires: next year}\n",
			[]string{`roles.yaml:2:115: tokens[0].expires: expected a time like 2027-01-01T00:00:00Z, or a date like 2027-01-01`}},
		{"binding with user and group", "bindings:\n  - {user: a, group: b, roles: [admin]}\n",
			[]string{`roles.yaml:2:5: bindings[0]: a binding names either a user or a group`}},
		{"binding without roles", "bindings:\n  - {user: a}\n",
			[]string{`roles.yaml:2:5: bindings[0].roles: missing: the roles the binding gives`}},
		{"empty user", "bindings:\n  - {user: \"\", roles: [admin]}\n",
			[]string{`roles.yaml:2:12: bindings[0].user: must not be empty`}},
		{"boolean as a name", "bindings:\n  - {user: true, roles: [admin]}\n",
			[]string{`roles.yaml:2:12: bindings[0].user: expected a string, got a boolean (quote it if it is meant as text)`}},
		{"duplicate key", "roles:\n  r: {allow: [read]}\n  r: {allow: [sync]}\n",
			[]string{`roles.yaml:3:3: roles.r: duplicate key (first at line 2)`}},
		{"a list where a mapping goes", "roles: [a]\n",
			[]string{`roles.yaml:1:8: roles: expected a mapping, got a list`}},
		{"two documents", "roles: {}\n---\nroles: {}\n",
			[]string{`roles.yaml:3:1: a roles file holds one YAML document`}},
		{"syntax error", "roles:\n  r: {allow: [read]\n",
			[]string{`roles.yaml:2: yaml: syntax error: did not find expected ',' or '}'`}},
	}
	for _, c := range cases {
		_, err := Parse("roles.yaml", []byte(c.src))
		var perr *PolicyError
		if !errors.As(err, &perr) {
			t.Errorf("%s: Parse error %v, want a *PolicyError", c.name, err)
			continue
		}
		var got []string
		for _, d := range perr.Diags {
			got = append(got, d.String())
		}
		if strings.Join(got, "\n") != strings.Join(c.want, "\n") {
			t.Errorf("%s:\n got: %s\nwant: %s", c.name, strings.Join(got, "\n      "), strings.Join(c.want, "\n      "))
		}
	}
}

func TestParseNeverQuotesAHash(t *testing.T) {
	secretish := strings.Repeat("f", 63) + "g"
	_, err := Parse("roles.yaml", []byte("tokens:\n  - {name: ci, sha256: "+secretish+", roles: [nope]}\n"))
	if err == nil || strings.Contains(err.Error(), secretish) {
		t.Fatalf("error %v quotes the hash", err)
	}
}

func TestParseExample(t *testing.T) {
	pol := mustParse(t, examplePolicy)
	if got, want := pol.Summary(), "2 token(s), 5 role(s), 3 binding(s)"; got != want {
		t.Errorf("Summary = %q, want %q", got, want)
	}
	bot := pol.token("deploy-bot")
	if bot == nil || bot.expires.Format("2006-01-02") != "2027-01-01" {
		t.Errorf("deploy-bot token = %+v", bot)
	}
	// A date alone is midnight UTC.
	pol = mustParse(t, "tokens: [{name: a, sha256: "+strings.Repeat("1", 64)+", roles: [admin], expires: 2027-03-04}]")
	if got := pol.tokens[0].expires.Format("2006-01-02T15:04:05Z07:00"); got != "2027-03-04T00:00:00Z" {
		t.Errorf("a date expires at %s", got)
	}
}

func TestParseAliasBomb(t *testing.T) {
	// Aliases of a long list, many times: small to write, large to walk.
	var b strings.Builder
	b.WriteString("roles: {viewer: {allow: [read]}}\nbindings:\n  - {group: g0, roles: &r [")
	b.WriteString(strings.TrimSuffix(strings.Repeat("viewer, ", 2000), ", "))
	b.WriteString("]}\n")
	for i := 1; i < 200; i++ {
		b.WriteString("  - {group: g, roles: *r}\n")
	}
	_, err := Parse("roles.yaml", []byte(b.String()))
	if err == nil || !strings.Contains(err.Error(), "YAML nodes") {
		t.Fatalf("Parse = %v, want a refusal of the expansion", err)
	}
}

// TestRolesAllowing: the roles a refusal can point to, admin always.
func TestRolesAllowing(t *testing.T) {
	pol := mustParse(t, examplePolicy)
	teamA := &access.StackRef{Name: "team-a-web", Source: "git+https://git.example.com/team-a/stacks", Labels: map[string]string{"team": "a"}}
	db := &access.StackRef{Name: "db", Labels: map[string]string{"tier": "prod", "team": "b"}}
	cases := []struct {
		action string
		stack  *access.StackRef
		want   string
	}{
		{access.ActionSync, teamA, "admin operator team-a"},
		{access.ActionPause, teamA, "admin team-a"},
		{access.ActionCancel, db, "admin labelled"},
		{access.ActionRead, db, "admin operator viewer"},
		{access.ActionReload, nil, "admin reloader"},
		{access.ActionSync, nil, "admin"},
	}
	for _, c := range cases {
		if got := strings.Join(pol.RolesAllowing(c.action, c.stack), " "); got != c.want {
			t.Errorf("RolesAllowing(%s, %v) = %q, want %q", c.action, c.stack, got, c.want)
		}
	}
}
