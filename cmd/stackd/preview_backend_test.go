package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stackd/stackd/daemon/review"
)

// stateStack is a compact-list manifest of stack name of the programs
// repository at url, as the Pulumi stack pulumiStack, with its File at
// out/<name>.txt and extra lines of its spec.
func stateStack(name, pulumiStack, url, out, greeting, extra string) string {
	return fmt.Sprintf(`stacks:
  - name: %s
    stack: %s
    projectRepo: %s
    branch: main
    repoDir: app
    resyncFrequencySeconds: 1
    config:
      path: %s
      greeting: %s
%s`, name, pulumiStack, url, filepath.Join(out, name+".txt"), greeting, extra)
}

// TestE2EPullRequestPreviewOtherState: a pull request to the manifests
// repository cannot choose the state its previews read. In force: a and
// b are Pulumi stack dev on file backends of their own under
// --backend-root; c and d Pulumi stacks c and d on the data dir's
// backend; p and q Pulumi stacks p and q on a PostgreSQL backend. The
// pull request moves b onto a's backend, renames d's Pulumi stack to c
// and q's to p, and adds e as Pulumi stack c and r as Pulumi stack p on
// PostgreSQL. Previewed where they say, each would run pulumi on another
// stack's state (on the data dir's backend, c's own state directory and
// passphrase: the runner keys them by backend, Pulumi stack and project),
// with its program, which the pull request chooses, beside it; on
// PostgreSQL, where nothing stops it, the diff shows p's resources. b, d
// and q are refused, saying why; e and r are previewed on an empty
// backend of their own, as the creations they are (of a Pulumi stack and
// its File).
func TestE2EPullRequestPreviewOtherState(t *testing.T) {
	t.Parallel()
	toolchainBin(t)
	g := newForgeRig(t, review.GitHub)
	programs, manifests := g.repo("infra"), g.repo("manifests")
	programs.commit(map[string]string{"app/Pulumi.yaml": program("v1")})
	out, root, pg := t.TempDir(), t.TempDir(), startPostgres(t)
	url := g.url("infra")
	for _, name := range []string{"a", "b"} {
		if err := os.Mkdir(filepath.Join(root, name), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	own := func(name string) string { return "    backend: file://" + filepath.Join(root, name) + "\n" }
	onPG := "    backend: " + pg + "\n"
	g.startManifests(manifests, func(f *runFlags) {
		f.backendRoots, f.sandboxRW = stringsFlag{root}, stringsFlag{out}
	}, map[string]string{
		"a": stateStack("a", "dev", url, out, "hello", own("a")),
		"b": stateStack("b", "dev", url, out, "hello", own("b")),
		"c": stateStack("c", "c", url, out, "hello", ""),
		"d": stateStack("d", "d", url, out, "hello", ""),
		"p": stateStack("p", "p", url, out, "hello", onPG),
		"q": stateStack("q", "q", url, out, "hello", onPG),
	})

	pr := &pullRequest{repo: "acme/manifests", name: "manifests", number: 8}
	g.push(manifests, pr, map[string]string{
		"stacks/b.yaml": stateStack("b", "dev", url, out, "bonjour", own("a")),
		"stacks/d.yaml": stateStack("d", "c", url, out, "bonjour", ""),
		"stacks/q.yaml": stateStack("q", "p", url, out, "bonjour", onPG),
		"stacks/e.yaml": stateStack("e", "c", url, out, "hello", ""),
		"stacks/r.yaml": stateStack("r", "p", url, out, "hello", onPG),
	})
	g.hook(pr, "opened")
	for _, name := range []string{"b", "d", "q"} {
		st := g.waitStatus(pr, "stackd/"+name)
		if st.State != review.Failure || !strings.Contains(st.Description, "not previewed: the pull request changes where the stack's state is kept") {
			t.Errorf("status of %s: %+v", name, st)
		}
	}
	for _, name := range []string{"e", "r"} {
		if st := g.waitStatus(pr, "stackd/"+name); st.State != review.Success || st.Description != "Preview: +2 ~0 -0 ±0" {
			t.Errorf("status of %s, a new stack: %+v", name, st)
		}
	}
	c := g.waitComment(pr)
	for _, other := range []string{"a.txt", "c.txt", "p.txt"} {
		if strings.Contains(c.Body, other) {
			t.Errorf("a preview read the state of another stack (%s):\n%s", other, c.Body)
		}
	}
	if !strings.Contains(c.Body, "spec.backend") {
		t.Errorf("the comment does not say why b, d and q were not previewed:\n%s", c.Body)
	}
}
