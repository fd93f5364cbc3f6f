package review

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Review stacks: a stack of its own per pull request and template stack,
// deployed at the pull request's head commit, updated on each push and
// destroyed when the pull request closes or goes quiet. What follows
// decides which review stacks an event creates, updates, destroys or
// refuses; it does no I/O.

// DefaultTTL is how long a review stack lives after the last activity on
// its pull request when its template names no TTL.
const DefaultTTL = 72 * time.Hour

// MaxStackNameLen is the longest stack name the Pulumi service takes.
const MaxStackNameLen = 100

// Template is a stack whose pull requests get review stacks.
type Template struct {
	// Stack is the template's stackd name; PulumiStack its Pulumi stack
	// name (possibly "org/project/stack").
	Stack       string
	PulumiStack string
	// TTL is how long a review stack lives after the last activity on
	// its pull request; zero means DefaultTTL.
	TTL time.Duration
	// Max bounds the review stacks of this template; zero for no bound
	// of its own.
	Max int
}

// Live is a review stack that exists.
type Live struct {
	// Name is its stackd name, ReviewName(Template, Number).
	Name        string
	PulumiStack string
	Template    string
	// PullRequest is the Event.Key of its pull request; Repo the forge
	// and repository part of it, which the per-repository bound counts.
	PullRequest string
	Repo        string
	Number      int
	// HeadSHA is the commit it was last deployed at.
	HeadSHA string
	// LastActivity is the time of the newest event of its pull request;
	// the TTL counts from it.
	LastActivity time.Time
	TTL          time.Duration
}

// Bounds are the operator's limits on review stacks; zero is no bound.
type Bounds struct {
	Total   int // in all
	PerRepo int // per forge repository
}

// Op is what a plan does to one review stack.
type Op string

// The operations on a review stack.
const (
	Create  Op = "create"
	Update  Op = "update"
	Destroy Op = "destroy"
)

// Step is one review stack's operation.
type Step struct {
	Op          Op
	Name        string // stackd name
	PulumiStack string // Pulumi stack name
	Template    string
	// Why says why a Destroy happens, for the log and the comment.
	Why string
}

// Plan is what one pull-request event does to review stacks.
type Plan struct {
	Steps []Step
	// Refused are lines for the pull request's comment, one per review
	// stack that is not deployed, each saying why.
	Refused []string
}

// ReviewName is the name of the review stack of template for pull
// request number: "<template>-pr-<number>". It names both the stackd
// stack and, from the template's Pulumi stack name, the Pulumi stack: of
// a fully qualified "org/project/stack" only the stack part changes.
func ReviewName(template string, number int) string {
	return template + "-pr-" + strconv.Itoa(number)
}

// PlanEvent decides what ev does to review stacks. templates are all the
// template stacks of the config by stackd name; touched the names of
// those ev's changed files concern; live the review stacks that exist
// (of every pull request); taken the stack names the config already uses.
// forks says whether the operator lets pull requests from forks have
// review stacks.
//
// A closed pull request destroys its review stacks. Otherwise each
// touched template gets its review stack created, or updated when it
// exists, and the pull request's other review stacks are updated too
// (their program is the same head commit), unless their template is gone,
// which destroys them. A creation beyond a bound, a fork's pull request
// without forks, or a name in use or too long, is refused with a line
// saying so.
func PlanEvent(ev Event, templates map[string]Template, touched []string, live []Live, taken map[string]bool, b Bounds, forks bool) Plan {
	var p Plan
	key := ev.Key()
	mine := map[string]Live{}
	for _, l := range live {
		if l.PullRequest == key {
			mine[l.Template] = l
		}
	}
	if ev.Action == Closed {
		for _, l := range sortedLive(mine) {
			p.Steps = append(p.Steps, destroyStep(l, "the pull request was closed"))
		}
		return p
	}
	for _, l := range sortedLive(mine) {
		t, ok := templates[l.Template]
		if !ok {
			p.Steps = append(p.Steps, destroyStep(l, "its template stack no longer has review stacks"))
			continue
		}
		p.Steps = append(p.Steps, Step{Op: Update, Name: l.Name, PulumiStack: ReviewName(t.PulumiStack, ev.Number), Template: t.Stack})
	}
	count := newCounts(live, repoOf(key))
	for _, name := range sortedUnique(touched) {
		t, ok := templates[name]
		if !ok {
			continue
		}
		if _, ok := mine[name]; ok {
			continue
		}
		rs := ReviewName(name, ev.Number)
		if why := refuseCreate(ev, t, rs, taken, count, b, forks); why != "" {
			p.Refused = append(p.Refused, fmt.Sprintf("Review stack `%s` not deployed: %s.", rs, why))
			continue
		}
		count.add(name)
		p.Steps = append(p.Steps, Step{Op: Create, Name: rs, PulumiStack: ReviewName(t.PulumiStack, ev.Number), Template: name})
	}
	return p
}

// refuseCreate says why the review stack rs of template t is not created
// for ev, or "".
func refuseCreate(ev Event, t Template, rs string, taken map[string]bool, c counts, b Bounds, forks bool) string {
	last := t.PulumiStack[strings.LastIndexByte(t.PulumiStack, '/')+1:]
	switch {
	case ev.Fork && !forks:
		return "the pull request comes from a fork, and the operator allows no review stacks for forks"
	case taken[rs]:
		return "the config has a stack of that name"
	case len(ReviewName(last, ev.Number)) > MaxStackNameLen:
		return fmt.Sprintf("its Pulumi stack name would be longer than %d characters", MaxStackNameLen)
	case t.Max > 0 && c.template[t.Stack] >= t.Max:
		return fmt.Sprintf("stack `%s` has %d review stacks, its maximum", t.Stack, c.template[t.Stack])
	case b.PerRepo > 0 && c.repo >= b.PerRepo:
		return fmt.Sprintf("the repository has %d review stacks, the maximum per repository", c.repo)
	case b.Total > 0 && c.total >= b.Total:
		return fmt.Sprintf("%d review stacks exist, the maximum in all", c.total)
	}
	return ""
}

// counts are the review stacks that exist, in all, of one repository and
// per template.
type counts struct {
	total, repo int
	template    map[string]int
}

func newCounts(live []Live, repo string) counts {
	c := counts{template: map[string]int{}}
	for _, l := range live {
		c.total++
		c.template[l.Template]++
		if l.Repo == repo {
			c.repo++
		}
	}
	return c
}

func (c *counts) add(template string) {
	c.total++
	c.repo++
	c.template[template]++
}

// repoOf is the forge and repository part of a pull request's key.
func repoOf(key string) string {
	if i := strings.LastIndexByte(key, '#'); i >= 0 {
		return key[:i]
	}
	return key
}

// Expired lists the review stacks whose pull request has been quiet for
// their TTL at now, oldest activity first.
func Expired(live []Live, now time.Time) []Live {
	var out []Live
	for _, l := range live {
		if !now.Before(ExpiresAt(l)) {
			out = append(out, l)
		}
	}
	slices.SortStableFunc(out, func(a, b Live) int { return a.LastActivity.Compare(b.LastActivity) })
	return out
}

// ExpiresAt is when l expires unless its pull request sees activity.
func ExpiresAt(l Live) time.Time {
	ttl := l.TTL
	if ttl <= 0 {
		ttl = DefaultTTL
	}
	return l.LastActivity.Add(ttl)
}

// NextExpiry is the earliest time one of live expires; zero when live is
// empty.
func NextExpiry(live []Live) time.Time {
	var next time.Time
	for _, l := range live {
		if at := ExpiresAt(l); next.IsZero() || at.Before(next) {
			next = at
		}
	}
	return next
}

func destroyStep(l Live, why string) Step {
	return Step{Op: Destroy, Name: l.Name, PulumiStack: l.PulumiStack, Template: l.Template, Why: why}
}

func sortedLive(m map[string]Live) []Live {
	out := make([]Live, 0, len(m))
	for _, l := range m {
		out = append(out, l)
	}
	slices.SortFunc(out, func(a, b Live) int { return strings.Compare(a.Name, b.Name) })
	return out
}

func sortedUnique(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return slices.Compact(out)
}
