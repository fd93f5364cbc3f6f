package auth

import (
	"fmt"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/stackd/stackd/daemon/access"
	"github.com/stackd/stackd/daemon/model"
)

// AdminRole is the built-in role that allows every action, on every
// stack and daemon-wide. A roles file binds it without defining it.
const AdminRole = "admin"

// actions are the actions a role may allow, in the order messages list
// them.
var actions = []string{
	access.ActionRead, access.ActionSync, access.ActionPause, access.ActionReload,
	access.ActionApprove, access.ActionCancel, access.ActionOverride, access.ActionAdmin,
}

func knownAction(a string) bool { return slices.Contains(actions, a) }

// Policy is a roles file, parsed and checked: its named tokens, its roles
// and who holds them. It is never changed once made; a reload makes a new
// one. The zero Policy grants nothing to anybody.
type Policy struct {
	file   string
	digest [32]byte // of the file's bytes, to skip reloads that change nothing
	tokens []*token
	roles  map[string]*role
	// users maps a user binding's name, as written, to its roles; emails
	// maps the same names in emailKey form (see userRoles); groups maps a
	// group to its members' roles.
	users     map[string][]string
	emails    map[string][]string
	groups    map[string][]string
	anonymous []string
	bindings  int
}

// token is a named API token: only the SHA-256 of its secret is known.
type token struct {
	name    string
	hash    [32]byte
	roles   []string
	expires time.Time // zero: never
}

// role allows actions on the stacks its selector matches.
type role struct {
	name  string
	allow []string
	// The selector: a stack matches when it matches every kind given (a
	// name glob AND a source AND the labels); within a kind, one entry is
	// enough. A role that gives none covers every stack, and grants its
	// actions daemon-wide too.
	stacks  []string          // path.Match globs on the stack's name
	sources []string          // a config source, or a prefix of one ending in *
	labels  map[string]string // each must be in the stack's labels
}

var adminRole = &role{name: AdminRole, allow: []string{access.ActionAdmin}}

// scoped says whether the role names stacks, sources or labels.
func (r *role) scoped() bool {
	return len(r.stacks) > 0 || len(r.sources) > 0 || len(r.labels) > 0
}

// allows says whether the role allows action somewhere.
func (r *role) allows(action string) bool {
	return slices.Contains(r.allow, action) || slices.Contains(r.allow, access.ActionAdmin)
}

// grants says whether the role allows action on stack; a nil stack is a
// daemon-wide action, which only a role that names no stacks grants.
func (r *role) grants(action string, stack *access.StackRef) bool {
	if !r.allows(action) {
		return false
	}
	if stack == nil {
		return !r.scoped()
	}
	return r.matches(stack)
}

// matches says whether the role's selector covers stack.
func (r *role) matches(s *access.StackRef) bool {
	if len(r.stacks) > 0 && !slices.ContainsFunc(r.stacks, func(g string) bool {
		ok, _ := path.Match(g, s.Name) // patterns are checked when loaded
		return ok
	}) {
		return false
	}
	if len(r.sources) > 0 && !slices.ContainsFunc(r.sources, func(p string) bool { return sourceMatch(p, s.Source) }) {
		return false
	}
	for k, v := range r.labels {
		if got, ok := s.Labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// sourceMatch matches a config source against a sources entry: equal, or
// for an entry ending in *, starting with what precedes it. Sources hold
// slashes, which a path glob's * would not cross.
func sourceMatch(pattern, source string) bool {
	if prefix, ok := strings.CutSuffix(pattern, "*"); ok {
		return strings.HasPrefix(source, prefix)
	}
	return pattern == source
}

// rolesOf lists the roles p holds under the policy, sorted: a token's
// roles, a user's roles (userRoles; byEmail says users are named by
// their email) and their groups' roles, and for everybody the anonymous
// roles (signing in never takes a right away).
func (pol *Policy) rolesOf(p model.Principal, byEmail bool) []string {
	var out []string
	switch p.Kind {
	case model.PrincipalAdmin:
		out = append(out, AdminRole)
	case model.PrincipalToken:
		if t := pol.token(p.Name); t != nil {
			out = append(out, t.roles...)
		}
	case model.PrincipalUser:
		out = append(out, pol.userRoles(p.Name, byEmail)...)
		for _, g := range p.Groups {
			out = append(out, pol.groups[g]...)
		}
	}
	out = append(out, pol.anonymous...)
	slices.Sort(out)
	return slices.Compact(out)
}

// userRoles are the roles bound to a signed-in user's name. How names
// compare follows the claim that names users, since what tells two users
// apart differs between namespaces. With byEmail (the email claim, which
// the provider did not say is unverified) the domain is compared without
// case and the part before it exactly: see emailKey. Any other claim's
// value is compared exactly: a subject is case-sensitive in OpenID
// Connect, and some providers let user names differ by case alone, so
// that folding case would give one user another's roles.
func (pol *Policy) userRoles(name string, byEmail bool) []string {
	if byEmail {
		return pol.emails[emailKey(name)]
	}
	return pol.users[name]
}

// emailKey is how an email is matched: its domain (after the last @)
// lower-cased, since domain names are case-insensitive, and its local
// part as it is, since RFC 5321 lets a mail server deliver Alice@ and
// alice@ to two people, and stackd cannot know that the provider's
// users' servers do not. A name without @ is kept as it is.
func emailKey(email string) string {
	at := strings.LastIndexByte(email, '@')
	if at < 0 {
		return email
	}
	return email[:at+1] + strings.ToLower(email[at+1:])
}

func (pol *Policy) token(name string) *token {
	for _, t := range pol.tokens {
		if t.name == name {
			return t
		}
	}
	return nil
}

func (pol *Policy) role(name string) *role {
	if name == AdminRole {
		return adminRole
	}
	return pol.roles[name]
}

// Allowed says whether p may take action on stack (nil: a daemon-wide
// action) under the policy, and when not, why, in words for the user. A
// user's name must be a user binding's exactly, as for any name claim
// but email; Access.Allowed matches names as its sign-in names users.
func (pol *Policy) Allowed(p model.Principal, action string, stack *access.StackRef) (bool, string) {
	return pol.allowed(p, false, action, stack)
}

// allowed is Allowed, with byEmail saying whether users are named by
// their email (userRoles).
func (pol *Policy) allowed(p model.Principal, byEmail bool, action string, stack *access.StackRef) (bool, string) {
	if !knownAction(action) {
		return false, fmt.Sprintf("unknown action %q", action)
	}
	roles := pol.rolesOf(p, byEmail)
	for _, name := range roles {
		if r := pol.role(name); r != nil && r.grants(action, stack) {
			return true, ""
		}
	}
	return false, denial(p, action, stack, roles)
}

// RolesAllowing lists, sorted, the roles of the policy that would allow
// action on stack (nil: daemon-wide): what a refusal can point to.
func (pol *Policy) RolesAllowing(action string, stack *access.StackRef) []string {
	out := []string{AdminRole}
	for name, r := range pol.roles {
		if name != AdminRole && r.grants(action, stack) {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

// denial words a refusal: who, what was refused, and what would help.
func denial(p model.Principal, action string, stack *access.StackRef, roles []string) string {
	what := action + " stack " + nameOf(stack)
	if stack == nil {
		what = action + " (a daemon-wide action, which only a role that names no stacks, sources or labels grants)"
	}
	who := describe(p)
	switch {
	case p.Kind == model.PrincipalAnonymous || p.Kind == "":
		return fmt.Sprintf("sign in or give an API token: requests without one may not %s", what)
	case len(roles) == 0:
		return fmt.Sprintf("%s holds no role in the roles file, so may not %s", who, what)
	}
	return fmt.Sprintf("%s (roles: %s) may not %s", who, strings.Join(roles, ", "), what)
}

func nameOf(s *access.StackRef) string {
	if s == nil {
		return ""
	}
	return s.Name
}

// describe names p for messages.
func describe(p model.Principal) string {
	switch p.Kind {
	case model.PrincipalToken:
		return fmt.Sprintf("token %q", p.Name)
	case model.PrincipalUser:
		return fmt.Sprintf("user %q", p.Name)
	case model.PrincipalAdmin:
		return "the admin token"
	}
	return "an anonymous request"
}

// Summary counts the policy's tokens, roles (the built-in admin role
// aside) and bindings, for logs.
func (pol *Policy) Summary() string {
	return fmt.Sprintf("%d token(s), %d role(s), %d binding(s)", len(pol.tokens), len(pol.roles), pol.bindings)
}

// bindsGroup says whether the policy gives group a role.
func (pol *Policy) bindsGroup(group string) bool {
	_, ok := pol.groups[group]
	return ok
}
