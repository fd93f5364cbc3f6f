package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stackd/stackd/daemon/model"
	"github.com/stackd/stackd/daemon/review"
)

// reviewProgram writes a file named after its Pulumi stack, so that a
// template and its review stacks each have their own.
func reviewProgram(version string) string {
	return `name: e2e
runtime: yaml
configuration:
  dir:
    type: String
resources:
  note:
    type: stackdtest:index:File
    properties:
      path: ${dir}/${pulumi.stack}.txt
      content: review ` + version + `
outputs:
  content: ${note.content}
`
}

// templateStack is a template stack of the programs repository at url,
// its program in repoDir name.
func templateStack(name, url, out, ttl string) string {
	return fmt.Sprintf(`  - name: %s
    stack: %s
    projectRepo: %s
    branch: main
    repoDir: %s
    resyncFrequencySeconds: 1
    config:
      dir: %s
    reviewStacks: {enabled: true, ttl: %s}
`, name, name, url, name, out, ttl)
}

// openReviewed opens pr with app's program at v2 and waits until its
// review stack is deployed: the comment says so. It returns the review
// stack's file in out.
func (g *forgeRig) openReviewed(programs *repo, pr *pullRequest, out string) string {
	g.t.Helper()
	g.push(programs, pr, map[string]string{"app/Pulumi.yaml": reviewProgram("v2")})
	g.hook(pr, "opened")
	file := filepath.Join(out, fmt.Sprintf("app-pr-%d.txt", pr.number))
	waitFile(g.t, g, file, "review v2")
	g.waitCommentWith(pr, "✅ deployed")
	return file
}

// TestE2EReviewStacks is the acceptance of review stacks: a pull request
// that touches a template stack gets its review stack deployed (its file
// exists, its outputs are in the comment; one more is refused beyond the
// bound), kept over a restart, updated
// on a push, destroyed
// on close (the file is gone, the Pulumi stack removed), and one whose
// pull request goes quiet past the TTL is destroyed too. The template
// stacks never change.
func TestE2EReviewStacks(t *testing.T) {
	t.Parallel()
	toolchainBin(t)
	g := newForgeRig(t, review.GitHub)
	programs := g.repo("infra")
	programs.commit(map[string]string{"app/Pulumi.yaml": reviewProgram("v1"), "quick/Pulumi.yaml": reviewProgram("v1")})
	out := outDir(t)
	g.start("stacks:\n"+templateStack("app", g.url("infra"), out, "1h")+templateStack("quick", g.url("infra"), out, "5s"),
		func(f *runFlags) { f.reviewMax = 1 })
	for _, name := range []string{"app", "quick"} {
		g.in.waitStack(name, "first deploy", 2*time.Minute, isReady)
	}
	dataDir := g.in.flags.dataDir

	pr := &pullRequest{repo: "acme/infra", name: "infra", number: 1}
	g.push(programs, pr, map[string]string{"app/Pulumi.yaml": reviewProgram("v2")})
	if acc := g.hook(pr, "opened"); acc.Ignored != "" {
		t.Fatalf("pull request ignored: %s", acc.Ignored)
	}
	reviewFile := filepath.Join(out, "app-pr-1.txt")
	waitFile(t, g, reviewFile, "review v2")
	if n := len(stackStates(dataDir, "app-pr-1")); n != 1 {
		t.Errorf("%d Pulumi stacks app-pr-1, want one", n)
	}
	c := g.waitCommentWith(pr, "✅ deployed")
	if !strings.Contains(c, "| `app-pr-1` | `"+pr.head[:12]+"` | ✅ deployed | `content`: `\"review v2\"` |") {
		t.Errorf("the comment does not show the review stack and its output:\n%s", c)
	}
	t.Logf("the comment:\n%s", c)
	g.checkReviewAPI(pr.number, "app-pr-1")
	g.wait("the review stack counted", func() bool {
		_, m := g.in.get("/metrics", nil)
		return strings.Contains(string(m), `stackd_review_stacks{state="deployed"} 1`+"\n") &&
			strings.Contains(string(m), `stackd_pull_requests{state="open"} 1`+"\n")
	})

	// Beyond --review-stacks-max, a review stack is refused in the comment.
	over := &pullRequest{repo: "acme/infra", name: "infra", number: 3}
	g.push(programs, over, map[string]string{"quick/Pulumi.yaml": reviewProgram("v9")})
	g.hook(over, "opened")
	g.waitCommentWith(over, "Review stack `quick-pr-3` not deployed: 1 review stacks exist, the maximum in all.")
	if _, err := os.Stat(filepath.Join(out, "quick-pr-3.txt")); !os.IsNotExist(err) {
		t.Errorf("the refused review stack quick-pr-3 was deployed: %v", err)
	}
	g.hook(over, "closed")

	// It outlives a restart: listed again, and still destroyed on close.
	g.restart()
	g.checkReviewAPI(pr.number, "app-pr-1")

	// A push updates it.
	g.push(programs, pr, map[string]string{"app/Pulumi.yaml": reviewProgram("v3")})
	g.hook(pr, "synchronize")
	waitFile(t, g, reviewFile, "review v3")
	g.waitCommentWith(pr, "✅ deployed")

	// Closing destroys it and removes its Pulumi stack.
	g.hook(pr, "closed")
	waitFile(t, g, reviewFile, "")
	g.wait("the Pulumi stack app-pr-1 removed", func() bool { return len(stackStates(dataDir, "app-pr-1")) == 0 })
	g.wait("the comment saying it is destroyed", func() bool {
		cs := g.forge.Comments(pr.repo, pr.number)
		return len(cs) == 1 && strings.Contains(cs[0].Body, "| `app-pr-1` | `"+pr.head[:12]+"` | 🗑️ destroyed |")
	})

	// A pull request that goes quiet past the template's TTL of 5s.
	quiet := &pullRequest{repo: "acme/infra", name: "infra", number: 2}
	g.push(programs, quiet, map[string]string{"quick/Pulumi.yaml": reviewProgram("v2")})
	opened := time.Now()
	g.hook(quiet, "opened")
	quietFile := filepath.Join(out, "quick-pr-2.txt")
	waitFile(t, g, quietFile, "review v2")
	// Until then, events that repeat its head commit are activity: it
	// lives on past its TTL counted from the opening.
	last := opened
	for i := range 6 {
		quiet.delivery = i + 1
		last = time.Now() // the activity is later
		g.hook(quiet, "synchronize")
		time.Sleep(1500 * time.Millisecond)
	}
	if _, err := os.Stat(quietFile); err != nil {
		t.Fatalf("the review stack was destroyed %v after the opening while its pull request was active: %v", time.Since(opened).Round(time.Millisecond), err)
	}
	waitFile(t, g, quietFile, "")
	if took := time.Since(last); took < 5*time.Second {
		t.Errorf("the quiet review stack was destroyed %v after the pull request's last event, before its TTL", took)
	}
	g.wait("the Pulumi stack quick-pr-2 removed", func() bool { return len(stackStates(dataDir, "quick-pr-2")) == 0 })
	// Since the restart: the update of app-pr-1 (kept over the restart, not
	// created again), the creation of quick-pr-2, and both destroys.
	g.wait("the review stacks' operations counted", func() bool {
		_, m := g.in.get("/metrics", nil)
		return strings.Contains(string(m), `stackd_review_stack_operations_total{op="create",result="succeeded"} 1`) &&
			strings.Contains(string(m), `stackd_review_stack_operations_total{op="update",result="succeeded"} 1`) &&
			strings.Contains(string(m), `stackd_review_stack_operations_total{op="destroy",result="succeeded"} 2`) &&
			strings.Contains(string(m), `stackd_review_stacks{state="deployed"} 0`+"\n")
	})

	// The templates are untouched, and the review stacks are no stacks
	// of the config.
	for _, name := range []string{"app", "quick"} {
		if got := readFile(t, filepath.Join(out, name+".txt")); got != "review v1" {
			t.Errorf("template %s's file holds %q, want review v1", name, got)
		}
	}
	var stacks struct {
		Stacks []model.StackView `json:"stacks"`
	}
	g.in.get("/api/v1/stacks", &stacks)
	for _, s := range stacks.Stacks {
		if strings.Contains(s.Name, "-pr-") {
			t.Errorf("the config's stacks list review stack %s", s.Name)
		}
	}
}

// overrideProgram writes config label into the file named by config
// file, and the secret config token into a file beside it.
const overrideProgram = `name: e2e
runtime: yaml
configuration:
  dir:
    type: String
  file:
    type: String
  label:
    type: String
  token:
    type: String
resources:
  note:
    type: stackdtest:index:File
    properties:
      path: ${dir}/${file}
      content: ${label}
  secretNote:
    type: stackdtest:index:File
    properties:
      path: ${dir}/${file}.token
      content: ${token}
  envNote:
    type: stackdtest:index:File
    properties:
      path: ${dir}/${file}.env
      content:
        fn::invoke:
          function: stackdtest:index:getEnv
          arguments: {name: REGION}
          return: value
outputs:
  label: ${note.content}
  token: ${token}
`

// TestE2EReviewStackOverrides: a template's review stack runs with the
// config and environment its reviewStacks override, placeholders expanded (label written
// with the project's namespace, which sorts before the template's
// spelling and still wins), and with a secret of its own that stays
// secret, while the template keeps its own config; the closing destroys
// the review stack with the same overrides.
func TestE2EReviewStackOverrides(t *testing.T) {
	t.Parallel()
	toolchainBin(t)
	const templateToken, reviewToken = "template-token-s3cret", "review-token-s3cret"
	g := newForgeRig(t, review.GitHub)
	programs := g.repo("infra")
	programs.commit(map[string]string{"app/Pulumi.yaml": overrideProgram})
	out := outDir(t)
	g.start(fmt.Sprintf(`stacks:
  - name: app
    stack: app
    projectRepo: %s
    branch: main
    repoDir: app
    config:
      dir: %s
      file: template.txt
      label: template
    secretsRef:
      token: {type: Literal, literal: {value: %s}}
    envRefs:
      REGION: {type: Literal, literal: {value: template-region}}
    reviewStacks:
      enabled: true
      config:
        file: ${reviewStack}.txt
        e2e:label: review of pull request ${prNumber}, not $${prNumber}
      secretsRef:
        token: {type: Literal, literal: {value: %s}}
      envRefs:
        REGION: {type: Literal, literal: {value: review-region}}
`, g.url("infra"), out, templateToken, reviewToken), nil)
	g.in.waitStack("app", "first deploy", 2*time.Minute, isReady)
	templateFile := filepath.Join(out, "template.txt")
	if got := readFile(t, templateFile); got != "template" {
		t.Fatalf("the template's file holds %q", got)
	}

	pr := &pullRequest{repo: "acme/infra", name: "infra", number: 4}
	g.push(programs, pr, map[string]string{"app/Pulumi.yaml": overrideProgram + "# changed\n"})
	g.hook(pr, "opened")
	reviewFile := filepath.Join(out, "app-pr-4.txt")
	waitFile(t, g, reviewFile, "review of pull request 4, not ${prNumber}")
	// The program's three files are written in parallel: the comment
	// says the update ended, after which all three are there.
	c := g.waitCommentWith(pr, "✅ deployed")
	if got := readFile(t, reviewFile+".token"); got != reviewToken {
		t.Errorf("the review stack's secret file holds %q, want its own secret", got)
	}
	if got := readFile(t, reviewFile+".env"); got != "review-region" {
		t.Errorf("the review stack ran with REGION=%q, want its own", got)
	}
	if got := readFile(t, templateFile+".env"); got != "template-region" {
		t.Errorf("the template ran with REGION=%q, want its own", got)
	}
	if !strings.Contains(c, "`token`: `\"[secret]\"`") {
		t.Errorf("the comment does not show the review stack's secret output as [secret]:\n%s", c)
	}
	_, api := g.in.get("/api/v1/previews", nil)
	_, template := g.in.get("/api/v1/stacks/app", nil)
	if !strings.Contains(string(template), `"reviewStacks"`) {
		t.Errorf("the template's spec is not shown:\n%s", template)
	}
	for where, text := range map[string]string{"the comment": c, "the previews API": string(api), "the template's API": string(template),
		"the log": g.in.logs.String()} {
		// A literal envRef counts as a secret, as the template's.
		if strings.Contains(text, reviewToken) || strings.Contains(text, templateToken) || strings.Contains(text, "review-region") {
			t.Errorf("%s shows a secret in clear:\n%s", where, text)
		}
	}

	// The closing destroys it; the template never changed.
	g.hook(pr, "closed")
	waitFile(t, g, reviewFile, "")
	waitFile(t, g, reviewFile+".token", "")
	waitFile(t, g, reviewFile+".env", "")
	if got := readFile(t, templateFile); got != "template" {
		t.Errorf("the template's file holds %q, want template", got)
	}
	if got := readFile(t, templateFile+".token"); got != templateToken {
		t.Errorf("the template's secret file holds %q, want its own secret", got)
	}
}

// waitFile waits until path holds content, or is gone when content is
// empty.
func waitFile(t testing.TB, g *forgeRig, path, content string) {
	t.Helper()
	if err := waitPath(path, content, 3*time.Minute); err != nil {
		t.Fatalf("%v\n%s", err, g.in.logs)
	}
}

// waitPath waits until path holds content, or is gone when content is
// empty, for at most timeout.
func waitPath(path, content string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		data, err := os.ReadFile(path)
		if (content == "" && os.IsNotExist(err)) || (err == nil && string(data) == content) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s holds %q (%v), want %q", path, data, err, content)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// stackStates are the state files of Pulumi stack name of project e2e
// in the runner's backends.
func stackStates(dataDir, name string) []string {
	states, _ := filepath.Glob(filepath.Join(dataDir, "backends", "*", ".pulumi", "stacks", "e2e", name+".json"))
	return states
}

// waitCommentWith waits until pr's one comment is about its head commit
// and holds text.
func (g *forgeRig) waitCommentWith(pr *pullRequest, text string) string {
	g.t.Helper()
	var body string
	g.wait("the comment on "+pr.head[:8]+" with "+text, func() bool {
		cs := g.forge.Comments(pr.repo, pr.number)
		if len(cs) == 1 && strings.Contains(cs[0].Body, pr.head[:12]) && strings.Contains(cs[0].Body, text) {
			body = cs[0].Body
			return true
		}
		return false
	})
	return body
}

// checkReviewAPI checks that GET /api/v1/previews lists the review stack
// name of pull request number.
func (g *forgeRig) checkReviewAPI(number int, name string) {
	g.t.Helper()
	var res struct {
		PullRequests []review.PullRequest `json:"pullRequests"`
	}
	g.in.get("/api/v1/previews", &res)
	if _, page := g.in.get("/previews", nil); !strings.Contains(string(page), `<tr class="review-stack">`) || !strings.Contains(string(page), name+" <span") {
		g.t.Errorf("the /previews page does not show review stack %s:\n%s", name, page)
	}
	for _, p := range res.PullRequests {
		if p.Number == number && slices.ContainsFunc(p.ReviewStacks, func(rs review.ReviewStack) bool {
			return rs.Name == name && rs.Result == review.Succeeded && rs.Outputs["content"] != ""
		}) {
			return
		}
	}
	g.t.Errorf("GET /api/v1/previews does not list review stack %s of #%d: %+v", name, number, res.PullRequests)
}

// TestE2EReviewStackClosedDuringStop: the record of a closed pull request
// outlives a stop that interrupts the destroy of its review stack. It is
// listed as closed until the destroy, run again after the start, removed
// the review stack's file and Pulumi stack; then it is forgotten. The
// destroy is held in the provider's delete of the review stack's file
// (its gate) when the stop comes, and after the start until the test
// has seen the pull request listed.
func TestE2EReviewStackClosedDuringStop(t *testing.T) {
	t.Parallel()
	toolchainBin(t)
	g := newForgeRig(t, review.GitHub)
	programs := g.repo("infra")
	programs.commit(map[string]string{"app/Pulumi.yaml": reviewProgram("v1")})
	out := outDir(t)
	gates := newGates(t)
	g.start("stacks:\n"+templateStack("app", g.url("infra"), out, "1h")+"    envRefs:\n"+gates.envRef(), nil)
	g.in.waitStack("app", "first deploy", 2*time.Minute, isReady)
	dataDir := g.in.flags.dataDir

	pr := &pullRequest{repo: "acme/infra", name: "infra", number: 4}
	reviewFile := g.openReviewed(programs, pr, out)

	gates.close("delete", "app-pr-4.txt")
	g.hook(pr, "closed")
	held := gates.waitHeld("delete", "app-pr-4.txt", 2*time.Minute)
	if p, ok := g.previewsOf()[pr.number]; !ok || !p.Closed || len(p.ReviewStacks) != 1 ||
		p.ReviewStacks[0].Op != review.Destroy || p.ReviewStacks[0].Result != review.Running {
		t.Fatalf("the destroy is held, but the pull request is listed as %+v (listed %v), want closed with its destroy running", p, ok)
	}
	before := g.in.logs
	g.restart()
	if !strings.Contains(before.String(), `msg="cannot destroy a review stack"`) {
		t.Fatalf("the stop did not interrupt the destroy:\n%s", before)
	}
	// The destroy runs again, held at the same gate by another provider.
	gates.waitHeld("delete", "app-pr-4.txt", 2*time.Minute, held)
	if p, ok := g.previewsOf()[pr.number]; !ok || !p.Closed {
		t.Errorf("after the start, the closed pull request is listed as %+v (listed %v), want closed", p, ok)
	}
	gates.open("delete", "app-pr-4.txt")
	waitFile(t, g, reviewFile, "")
	g.wait("the Pulumi stack app-pr-4 removed", func() bool { return len(stackStates(dataDir, "app-pr-4")) == 0 })
	g.wait("the closed pull request forgotten", func() bool { _, ok := g.previewsOf()[pr.number]; return !ok })
	if !strings.Contains(g.in.logs.String(), "destroying the review stacks of a closed pull request again") {
		t.Error("the start did not say it destroys the review stacks again")
	}
	if cs := g.forge.Comments(pr.repo, pr.number); len(cs) != 1 || !strings.Contains(cs[0].Body, "🗑️ destroyed") {
		t.Errorf("comments %+v, want one saying the review stack is destroyed", cs)
	}
	// Forgotten for good: not listed after another start either.
	g.restart()
	if _, ok := g.previewsOf()[pr.number]; ok {
		t.Error("the closed pull request is listed again after another start")
	}
}
