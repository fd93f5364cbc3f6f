package review

import (
	"slices"
	"strings"
	"testing"
	"time"
)

func TestReviewName(t *testing.T) {
	for _, tc := range []struct {
		in   string
		n    int
		want string
	}{
		{"app", 7, "app-pr-7"},
		{"acme/infra/prod", 12, "acme/infra/prod-pr-12"},
		{"dev", 0, "dev-pr-0"},
	} {
		if got := ReviewName(tc.in, tc.n); got != tc.want {
			t.Errorf("ReviewName(%q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
		}
	}
}

func TestPlanEvent(t *testing.T) {
	templates := map[string]Template{
		"app": {Stack: "app", PulumiStack: "acme/app/dev", TTL: time.Hour},
		"net": {Stack: "net", PulumiStack: "net", Max: 1},
		"db":  {Stack: "db", PulumiStack: strings.Repeat("d", 97)},
	}
	ev := func(a Action, n int) Event {
		return Event{Forge: GitHub, Action: a, Repo: "acme/infra", Number: n, HeadSHA: "abc"}
	}
	live := func(template string, n int) Live {
		t := templates[template]
		return Live{Name: ReviewName(template, n), PulumiStack: ReviewName(t.PulumiStack, n), Template: template,
			PullRequest: ev(Opened, n).Key(), Repo: "github:acme/infra", Number: n}
	}
	other := Live{Name: "web-pr-3", PulumiStack: "web-pr-3", Template: "web", PullRequest: "github:acme/web#3", Repo: "github:acme/web", Number: 3}
	fork := ev(Opened, 5)
	fork.Fork = true

	for _, tc := range []struct {
		name    string
		ev      Event
		touched []string
		live    []Live
		taken   []string
		bounds  Bounds
		forks   bool
		steps   []string // "op name pulumiStack"
		refused []string // substrings, one per refused line
	}{
		{name: "open creates one per touched template",
			ev: ev(Opened, 7), touched: []string{"net", "app", "app", "unknown"},
			steps: []string{"create app-pr-7 acme/app/dev-pr-7", "create net-pr-7 net-pr-7"}},
		{name: "push updates the existing and creates the newly touched",
			ev: ev(Pushed, 7), touched: []string{"net"}, live: []Live{live("app", 7), other},
			steps: []string{"update app-pr-7 acme/app/dev-pr-7", "create net-pr-7 net-pr-7"}},
		{name: "push that touches nothing still updates the pull request's review stacks",
			ev: ev(Pushed, 7), live: []Live{live("app", 7), live("app", 8)},
			steps: []string{"update app-pr-7 acme/app/dev-pr-7"}},
		{name: "close destroys only the pull request's review stacks",
			ev: ev(Closed, 7), touched: []string{"app"}, live: []Live{live("net", 7), live("app", 7), live("app", 8), other},
			steps: []string{"destroy app-pr-7 acme/app/dev-pr-7", "destroy net-pr-7 net-pr-7"}},
		{name: "close without review stacks does nothing",
			ev: ev(Closed, 9), live: []Live{live("app", 7)}},
		{name: "a review stack whose template is gone is destroyed",
			ev: ev(Pushed, 3), live: []Live{{Name: "old-pr-3", PulumiStack: "old-pr-3", Template: "old", PullRequest: ev(Opened, 3).Key(), Number: 3}},
			steps: []string{"destroy old-pr-3 old-pr-3"}},
		{name: "forks are refused",
			ev: fork, touched: []string{"app"},
			refused: []string{"`app-pr-5` not deployed: the pull request comes from a fork"}},
		{name: "forks allowed by the operator",
			ev: fork, touched: []string{"app"}, forks: true,
			steps: []string{"create app-pr-5 acme/app/dev-pr-5"}},
		{name: "template maximum",
			ev: ev(Opened, 7), touched: []string{"net", "app"}, live: []Live{live("net", 6)},
			steps:   []string{"create app-pr-7 acme/app/dev-pr-7"},
			refused: []string{"`net-pr-7` not deployed: stack `net` has 1 review stacks, its maximum"}},
		{name: "per-repository maximum counts only the repository and this plan's creations",
			ev: ev(Opened, 7), touched: []string{"app", "net"}, live: []Live{live("app", 6), other}, bounds: Bounds{PerRepo: 2},
			steps:   []string{"create app-pr-7 acme/app/dev-pr-7"},
			refused: []string{"`net-pr-7` not deployed: the repository has 2 review stacks, the maximum per repository"}},
		{name: "total maximum",
			ev: ev(Opened, 7), touched: []string{"app"}, live: []Live{other}, bounds: Bounds{Total: 1},
			refused: []string{"`app-pr-7` not deployed: 1 review stacks exist, the maximum in all"}},
		{name: "an existing review stack is updated beyond the bounds",
			ev: ev(Pushed, 6), touched: []string{"net"}, live: []Live{live("net", 6), other}, bounds: Bounds{Total: 1, PerRepo: 1},
			steps: []string{"update net-pr-6 net-pr-6"}},
		{name: "a name the config uses",
			ev: ev(Opened, 7), touched: []string{"app"}, taken: []string{"app-pr-7"},
			refused: []string{"`app-pr-7` not deployed: the config has a stack of that name"}},
		{name: "a Pulumi stack name too long",
			ev: ev(Opened, 1234), touched: []string{"db"},
			refused: []string{"`db-pr-1234` not deployed: its Pulumi stack name would be longer than 100 characters"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			taken := map[string]bool{}
			for _, n := range tc.taken {
				taken[n] = true
			}
			p := PlanEvent(tc.ev, templates, tc.touched, tc.live, taken, tc.bounds, tc.forks)
			var steps []string
			for _, s := range p.Steps {
				steps = append(steps, string(s.Op)+" "+s.Name+" "+s.PulumiStack)
				if s.Op == Destroy && s.Why == "" {
					t.Errorf("destroy of %s says not why", s.Name)
				}
			}
			if !slices.Equal(steps, tc.steps) {
				t.Errorf("steps %q, want %q", steps, tc.steps)
			}
			if len(p.Refused) != len(tc.refused) {
				t.Fatalf("refused %q, want %q", p.Refused, tc.refused)
			}
			for i, want := range tc.refused {
				if !strings.Contains(p.Refused[i], want) {
					t.Errorf("refused line %q lacks %q", p.Refused[i], want)
				}
			}
		})
	}
}

func TestExpired(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	live := []Live{
		{Name: "a", LastActivity: now.Add(-2 * time.Hour), TTL: time.Hour},         // quiet past its TTL
		{Name: "b", LastActivity: now.Add(-30 * time.Minute), TTL: time.Hour},      // active recently
		{Name: "c", LastActivity: now.Add(-71 * time.Hour)},                        // default TTL not reached
		{Name: "d", LastActivity: now.Add(-72 * time.Hour)},                        // default TTL reached exactly
		{Name: "e", LastActivity: now.Add(-3 * time.Hour), TTL: 3 * time.Hour},     // reached exactly
		{Name: "f", LastActivity: now.Add(-100 * time.Hour), TTL: 200 * time.Hour}, // long TTL
	}
	var got []string
	for _, l := range Expired(live, now) {
		got = append(got, l.Name)
	}
	if want := []string{"d", "e", "a"}; !slices.Equal(got, want) {
		t.Errorf("expired %v, want %v (oldest activity first)", got, want)
	}
	if next, want := NextExpiry(live), now.Add(-time.Hour); !next.Equal(want) {
		t.Errorf("next expiry %v, want %v", next, want)
	}
	if !NextExpiry(nil).IsZero() {
		t.Error("next expiry of none is not zero")
	}
}

func TestCommentReviewStacks(t *testing.T) {
	r := Report{Commit: strings.Repeat("c", 40), ReviewStacks: []ReviewStack{
		{Name: "app-pr-7", Op: Create, Result: Succeeded, Commit: strings.Repeat("c", 40), Outputs: map[string]string{"url": `"http://x|y"`, "key": `"[secret]"`}},
		{Name: "net-pr-7", Op: Update, Result: Failed, Commit: strings.Repeat("c", 40), Error: "error: boom\nmore"},
		{Name: "db-pr-7", Op: Destroy, Result: Succeeded},
		{Name: "old-pr-7", Op: Destroy, Result: Running},
	}, ReviewRefused: []string{"Review stack `x-pr-7` not deployed: 3 review stacks exist, the maximum in all."}}
	c := Comment(r, 65536)
	for _, want := range []string{
		"#### Review stacks",
		"| `app-pr-7` | `cccccccccccc` | ✅ deployed | `key`: `\"[secret]\"`<br>`url`: `\"http://x\\|y\"` |",
		"| `net-pr-7` | `cccccccccccc` | ❌ update failed: error: boom |  |",
		"| `db-pr-7` | `` | 🗑️ destroyed |  |",
		"| `old-pr-7` | `` | ⏳ destroying |  |",
		"\nReview stack `x-pr-7` not deployed: 3 review stacks exist, the maximum in all.\n",
	} {
		if !strings.Contains(c, want) {
			t.Errorf("comment lacks %q:\n%s", want, c)
		}
	}
	if c := Comment(Report{Commit: "abc"}, 65536); strings.Contains(c, "Review stacks") {
		t.Errorf("a comment without review stacks has their section:\n%s", c)
	}
}
