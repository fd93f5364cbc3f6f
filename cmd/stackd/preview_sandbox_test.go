package main

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stackd/stackd/daemon/model"
	"github.com/stackd/stackd/daemon/review"
)

// TestE2EPreviewsUnderDefaultSandbox is the acceptance of previews of a
// stack with a provider (whose schema the engine caches in PULUMI_HOME)
// under the default sandbox, opened to nothing but the stack's output
// directory: a pull request gets a success status and a comment with
// the change, and stackd diff (the UI's Preview now) shows it. Each runs
// in a scratch copy of the stack's state, whose environment once still
// named the stack's own PULUMI_HOME, closed to the copy.
func TestE2EPreviewsUnderDefaultSandbox(t *testing.T) {
	t.Parallel()
	toolchainBin(t)
	g := newForgeRig(t, review.GitHub)
	programs := g.repo("infra")
	v1 := programs.commit(map[string]string{"app/Pulumi.yaml": program("v1")})
	out := t.TempDir()
	g.start(manifest("app", g.url("infra"), out, "hello"), func(f *runFlags) {
		f.sandboxRW = stringsFlag{out}
	})
	for _, p := range []string{g.in.flags.dataDir, g.in.flags.secretsDir} {
		if p, _ := filepath.Abs(p); strings.HasPrefix(p+"/", out+"/") || strings.HasPrefix(out+"/", p+"/") {
			t.Fatalf("the sandbox's grant %s overlaps %s", out, p)
		}
	}
	g.in.waitStack("app", "first deploy", 2*time.Minute, func(v model.StackView) bool {
		return isReady(v) && v.Status.LastUpdate != nil && v.Status.LastUpdate.LastSuccessfulCommit == v1
	})

	pr := &pullRequest{repo: "acme/infra", name: "infra", number: 1}
	g.push(programs, pr, map[string]string{"app/Pulumi.yaml": program("v2")})
	g.hook(pr, "opened")
	if st := g.waitStatus(pr, "stackd/app"); st.State != review.Success {
		t.Errorf("the pull request's status is %+v, want success", st)
	}
	if c := g.waitComment(pr); !strings.Contains(c.Body, "| 0 | 1 | 0 | 0 |") || !strings.Contains(c.Body, "✅ succeeded") {
		t.Errorf("the comment does not show the update:\n%s", c.Body)
	}

	if code, stdout, stderr := stackd(t, g.in.clientArgs("pause")...); code != exitOK {
		t.Fatalf("pause: exit %d\n%s%s", code, stdout, stderr)
	}
	second := programs.commit(map[string]string{"app/Pulumi.yaml": program("v2")})
	code, stdout, stderr := stackd(t, g.in.clientArgs("diff", "app")...)
	if code != exitOK {
		t.Fatalf("diff: exit %d\n%s%s", code, stdout, stderr)
	}
	for _, want := range []string{"preview of app at " + second[:12], "succeeded", `~ content: "hello v1" => "hello v2"`} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stackd diff lacks %q:\n%s", want, stdout)
		}
	}
	if got := readFile(t, filepath.Join(out, "app.txt")); got != "hello v1" {
		t.Errorf("a preview changed the stack's file to %q", got)
	}
}
