package main

import (
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stackd/stackd/daemon/review"
)

// manifest is a compact-list manifest of one stack of the programs
// repository at url, greeting with greeting.
func manifest(name, url, out, greeting string) string {
	return stateStack(name, name, url, out, greeting, "")
}

// startManifests commits stacks (a stack's name → its manifest) to
// stacks/ of manifests, starts stackd on that Git config source, with
// tweak applied to its flags, and waits for each stack's first deploy.
func (g *forgeRig) startManifests(manifests *repo, tweak func(*runFlags), stacks map[string]string) {
	g.t.Helper()
	files := map[string]string{}
	for name, m := range stacks {
		files["stacks/"+name+".yaml"] = m
	}
	manifests.commit(files)
	g.start("", func(f *runFlags) {
		f.config, f.pollInterval = stringsFlag{"git+" + g.url("manifests") + "//stacks?ref=main"}, time.Hour
		if tweak != nil {
			tweak(f)
		}
	})
	for name := range stacks {
		g.in.waitStack(name, "first deploy", 2*time.Minute, isReady)
	}
}

// TestE2EPullRequestPreviewManifests: a pull request to the manifests
// repository (a Git config source) that changes one stack's config
// previews only that stack, with the new value.
func TestE2EPullRequestPreviewManifests(t *testing.T) {
	t.Parallel()
	toolchainBin(t)
	g := newForgeRig(t, review.GitHub)
	programs, manifests := g.repo("infra"), g.repo("manifests")
	programs.commit(map[string]string{"app/Pulumi.yaml": program("v1")})
	out := outDir(t)
	g.startManifests(manifests, nil, map[string]string{
		"a": manifest("a", g.url("infra"), out, "hello"),
		"b": manifest("b", g.url("infra"), out, "hello"),
	})
	pr := &pullRequest{repo: "acme/manifests", name: "manifests", number: 4}
	g.push(manifests, pr, map[string]string{"stacks/b.yaml": manifest("b", g.url("infra"), out, "bonjour")})
	g.hook(pr, "opened")
	if st := g.waitStatus(pr, "stackd/b"); st.State != review.Success {
		t.Errorf("status of b: %+v", st)
	}
	c := g.waitComment(pr)
	if !strings.Contains(c.Body, `"hello v1" => "bonjour v1"`) || !strings.Contains(c.Body, "| 0 | 1 | 0 | 0 |") {
		t.Errorf("the comment does not show b's new greeting as one update:\n%s", c.Body)
	}
	if strings.Contains(c.Body, "`a`") {
		t.Errorf("the comment previews a, which the pull request does not change:\n%s", c.Body)
	}
	for _, st := range g.forge.Statuses(pr.repo, pr.head) {
		if st.Context == "stackd/a" {
			t.Errorf("a status for stack a: %+v", st)
		}
	}
	if got := readFile(t, filepath.Join(out, "b.txt")); got != "hello v1" {
		t.Errorf("b's resource holds %q after the preview", got)
	}
}

// TestE2EPullRequestPreviewForges runs a preview on GitLab and on Gitea,
// whose APIs first answer 503 and 429: the reports arrive after retries.
func TestE2EPullRequestPreviewForges(t *testing.T) {
	t.Parallel()
	toolchainBin(t)
	for _, kind := range []review.Kind{review.GitLab, review.Gitea} {
		t.Run(string(kind), func(t *testing.T) {
			g := newForgeRig(t, kind)
			programs := g.repo("infra")
			programs.commit(map[string]string{"app/Pulumi.yaml": program("v1")})
			out := outDir(t)
			g.start(g.previewStack("app", g.url("infra"), out), nil)
			g.in.waitStack("app", "first deploy", 2*time.Minute, isReady)
			pr := &pullRequest{repo: "acme/infra", name: "infra", number: 7}
			g.push(programs, pr, map[string]string{"app/Pulumi.yaml": program("v2")})
			g.forge.FailNext(2, http.StatusServiceUnavailable)
			g.hook(pr, "opened")
			if st := g.waitStatus(pr, "stackd/app"); st.State != review.Success {
				t.Errorf("status: %+v", st)
			}
			g.forge.FailNext(1, http.StatusTooManyRequests)
			g.push(programs, pr, map[string]string{"app/Pulumi.yaml": program("v3")})
			action := "synchronized"
			if kind == review.GitLab {
				action = "synchronize" // "update" with new commits
			}
			g.hook(pr, action)
			c := g.waitComment(pr)
			if !strings.Contains(c.Body, "| 0 | 1 | 0 | 0 |") {
				t.Errorf("comment:\n%s", c.Body)
			}
			retried := 0
			for _, line := range strings.Split(g.in.logs.String(), "\n") {
				if strings.Contains(line, "retry") && strings.Contains(line, "component=forge") {
					retried++
				}
			}
			if retried < 3 {
				t.Errorf("%d retries logged, want 3 (two 503s, one 429)", retried)
			}
			g.noLeaks(canaryConfig, canaryEnv, forgeToken)
			if v := g.in.stack("app"); !isReady(v) {
				t.Errorf("the stack is not Ready: %+v", v.Status)
			}
		})
	}
}

// BenchmarkPullRequestPreview prints the time from a pull request's
// webhook to its comment, for a pull request that changes one stack and
// one that changes ten (previews run --max-concurrent=2 at a time).
func BenchmarkPullRequestPreview(b *testing.B) {
	toolchainBin(b)
	for _, n := range []int{1, 10} {
		b.Run(fmt.Sprintf("stacks=%d", n), func(b *testing.B) {
			g := newForgeRig(b, review.GitHub)
			programs := g.repo("infra")
			programs.commit(map[string]string{"app/Pulumi.yaml": program("v1")})
			out := outDir(b)
			config := "stacks:\n"
			for i := range n {
				config += strings.TrimPrefix(g.previewStack(fmt.Sprintf("s%02d", i), g.url("infra"), out), "stacks:\n")
			}
			g.start(config, nil)
			for i := range n {
				g.in.waitStack(fmt.Sprintf("s%02d", i), "first deploy", 5*time.Minute, isReady)
			}
			var total time.Duration
			i := 0
			for b.Loop() {
				b.StopTimer()
				pr := &pullRequest{repo: "acme/infra", name: "infra", number: 100 + i}
				g.push(programs, pr, map[string]string{"app/Pulumi.yaml": program(fmt.Sprintf("v%d", i+2))})
				b.StartTimer()
				start := time.Now()
				g.hook(pr, "opened")
				g.waitComment(pr)
				total += time.Since(start)
				i++
			}
			b.ReportMetric(float64(total.Milliseconds())/float64(i), "ms/webhook-to-comment")
		})
	}
}

// TestE2EPullRequestSaysDestroy: a pull request to the manifests that
// removes a stack with destroyOnFinalize says that the merge destroys its
// resources, once approved; one that removes a stack without it says its
// resources stay. Neither is touched by the preview.
func TestE2EPullRequestSaysDestroy(t *testing.T) {
	t.Parallel()
	toolchainBin(t)
	g := newForgeRig(t, review.GitHub)
	programs, manifests := g.repo("infra"), g.repo("manifests")
	programs.commit(map[string]string{"app/Pulumi.yaml": program("v1")})
	out := outDir(t)
	g.startManifests(manifests, nil, map[string]string{
		"a": manifest("a", g.url("infra"), out, "hello") + "    destroyOnFinalize: true\n    approval: {when: [delete]}\n",
		"b": manifest("b", g.url("infra"), out, "hello"),
	})
	pr := &pullRequest{repo: "acme/manifests", name: "manifests", number: 5}
	g.push(manifests, pr, map[string]string{"stacks/a.yaml": "stacks: []\n", "stacks/b.yaml": "stacks: []\n"})
	g.hook(pr, "opened")
	c := g.waitComment(pr)
	for _, want := range []string{
		"Merging removes stack `a` from the config and **destroys its resources** (`destroyOnFinalize`) once approved.",
		"Merging removes stack `b` from the config; its resources stay (no `destroyOnFinalize`).",
	} {
		if !strings.Contains(c.Body, want) {
			t.Errorf("the comment lacks %q:\n%s", want, c.Body)
		}
	}
	for _, name := range []string{"a", "b"} {
		if got := readFile(t, filepath.Join(out, name+".txt")); got != "hello v1" {
			t.Errorf("%s's resource holds %q after the preview", name, got)
		}
	}
}
