package main

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stackd/stackd/daemon/model"
	"github.com/stackd/stackd/daemon/review"
	"github.com/stackd/stackd/store"
)

// signatureOf is a token's signature, what makes it good.
func signatureOf(tok string) string { return tok[strings.LastIndexByte(tok, '.')+1:] }

// savedTokens are the tokens a test's programs saved as out/<name>-*.jwt,
// oldest first.
func savedTokens(t *testing.T, out, name string) []string {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(out, name+"-*.jwt"))
	slices.Sort(files)
	var toks []string
	for _, f := range files {
		toks = append(toks, strings.TrimSpace(readFile(t, f)))
	}
	return toks
}

// TestE2ECredentialsEarlierTokenMasked: a program that passes its token
// to a resource's input or an output (an explicit provider given the
// token's text rather than its file, say) leaves it in the state; the
// next operation's diff shows it as the old value. The up's write token
// is still good then (it lives up to --oidc-token-ttl): the preview that
// follows (here Preview now; a pull request's alike) must not show it in
// its diff, its log or the stack's history, nor the store keep it.
func TestE2ECredentialsEarlierTokenMasked(t *testing.T) {
	t.Parallel()
	const issuer = "https://stackd.example.com"
	r := newRepo(t)
	r.commit(map[string]string{"Pulumi.yaml": credsProgram})
	out := outDir(t)
	dataDir := t.TempDir()
	peek := fmt.Sprintf(`cat "$STACKD_ID_TOKEN" > %s/a-$(date +%%s%%N).jwt; cat "$STACKD_ID_TOKEN"`, out)
	in := startDaemonWith(t, "stacks:\n"+stackYAML("a", r, fmt.Sprintf(`    config:
      path: %s
      peek: %q
    credentials:
      token: {audience: vault, env: STACKD_ID_TOKEN}
`, filepath.Join(out, "a.txt"), peek)), dataDir, func(f *runFlags) { f.idIssuerURL = issuer })
	in.waitStack("a", "Ready", 2*time.Minute, isReady)
	if code := in.post("/api/v1/stacks/a/preview", nil, map[string]string{"Authorization": "Bearer " + in.token}); code != http.StatusAccepted {
		t.Fatalf("preview now: %d", code)
	}
	var p model.StackPreview
	waitFor(t, "the preview's end", 2*time.Minute, func() bool {
		code, _ := in.get("/api/v1/stacks/a/preview", &p)
		return code == http.StatusOK && p.State != model.UpdateRunning && p.State != ""
	})
	if p.State != model.UpdateSucceeded {
		t.Fatalf("preview: %+v", p)
	}
	toks := savedTokens(t, out, "a")
	if len(toks) != 2 {
		t.Fatalf("tokens: %d, want the up's and the preview's", len(toks))
	}
	if !strings.Contains(p.Diff, "content") {
		t.Fatalf("the preview shows no change of the File's content:\n%s", p.Diff)
	}
	var answers []string
	for _, path := range []string{"/api/v1/stacks/a", "/api/v1/stacks/a/updates", "/api/v1/stacks/a/preview", "/api/v1/stacks/a/resources"} {
		_, body := in.get(path, nil)
		answers = append(answers, path+": "+string(body))
	}
	var ups struct{ Updates []model.Update }
	in.get("/api/v1/stacks/a/updates", &ups)
	for _, u := range ups.Updates {
		_, body := in.get("/api/v1/updates/"+u.ID+"/log", nil)
		answers = append(answers, "log of "+u.Type+": "+string(body))
	}
	in.stop()
	db, err := os.ReadFile(filepath.Join(dataDir, store.FileName))
	if err != nil {
		t.Fatal(err)
	}
	for i, tok := range toks {
		sig := signatureOf(tok)
		for _, a := range answers {
			if strings.Contains(a, sig) {
				t.Errorf("token %d (of the %s) in an API answer:\n%.2000s", i, []string{"up", "preview"}[i], a)
			}
		}
		if strings.Contains(string(db), sig) {
			t.Errorf("token %d in the store", i)
		}
		if strings.Contains(in.logs.String(), sig) {
			t.Errorf("token %d in the daemon's log", i)
		}
	}
}

// quotePolicy warns of every File's change, quoting its new content.
const quotePolicy = `package stackd.quote

warn contains msg if {
	some step in input.steps
	step.type == "stackdtest:index:File"
	msg := sprintf("content now %s", [step.new.content])
}
`

// TestE2EPullRequestPreviewEarlierToken: the same through a pull
// request, whose author is hostile: the stack's program passes its token
// to an output and a File, so its last up's write token is in the state;
// a pull request that changes the program is previewed with a diff of
// both. Neither the comment, the statuses nor the preview's API show the
// up's token, good for minutes still and of write scope.
func TestE2EPullRequestPreviewEarlierToken(t *testing.T) {
	t.Parallel()
	toolchainBin(t)
	const issuer = "https://stackd.example.com"
	g := newForgeRig(t, review.GitHub)
	programs := g.repo("infra")
	programs.commit(map[string]string{"app/Pulumi.yaml": credsProgram})
	out := outDir(t)
	peek := fmt.Sprintf(`      peek: 'cat "$STACKD_ID_TOKEN" > %s/b-$(date +%%s%%N).jwt; cat "$STACKD_ID_TOKEN"'
    credentials:
      token: {audience: vault, env: STACKD_ID_TOKEN}
`, out)
	g.start(strings.Replace(manifest("b", g.url("infra"), out, "hello"), "      greeting: hello\n", "", 1)+peek,
		func(f *runFlags) { f.idIssuerURL = issuer })
	g.in.waitStack("b", "first deploy", 2*time.Minute, isReady)
	pr := &pullRequest{repo: "acme/infra", name: "infra", number: 3}
	g.push(programs, pr, map[string]string{"app/Pulumi.yaml": credsProgram + "# changed\n"})
	g.hook(pr, "opened")
	if st := g.waitStatus(pr, "stackd/b"); st.State != review.Success {
		t.Fatalf("status: %+v", st)
	}
	c := g.waitComment(pr)
	toks := savedTokens(t, out, "b")
	if len(toks) != 2 {
		t.Fatalf("tokens: %d, want the up's and the preview's", len(toks))
	}
	if !strings.Contains(c.Body, "content") {
		t.Errorf("the comment shows no diff of the content:\n%s", c.Body)
	}
	_, list := g.in.get("/api/v1/previews", nil)
	answers := []string{"comment: " + c.Body, "previews: " + string(list)}
	var pv struct{ Previews []struct{ Update string } }
	g.in.get("/api/v1/previews", &pv)
	for _, req := range g.forge.Requests() {
		answers = append(answers, "forge request "+req.Path+": "+req.Body)
	}
	var ups struct{ Updates []model.Update }
	g.in.get("/api/v1/stacks/b/updates", &ups)
	for _, u := range ups.Updates {
		_, body := g.in.get("/api/v1/updates/"+u.ID+"/log", nil)
		answers = append(answers, "log of "+u.Type+": "+string(body))
	}
	for i, tok := range toks {
		for _, a := range answers {
			if strings.Contains(a, signatureOf(tok)) {
				t.Errorf("the %s's token is shown:\n%.3000s", []string{"up", "preview"}[i], a)
			}
		}
	}
}

// TestE2EPolicyVerdictQuotesToken: policies judge a preview's steps with
// their values in clear, and a policy's message may quote them: an
// operator's policy that warns of a File's content, with a program that
// writes its token there (the first token it got, so that the up holds
// to the plan its preview saved), must not put the token in the update's
// log, the stack's status or the store.
func TestE2EPolicyVerdictQuotesToken(t *testing.T) {
	t.Parallel()
	const issuer = "https://stackd.example.com"
	r := newRepo(t)
	r.commit(map[string]string{"Pulumi.yaml": credsProgram})
	out := outDir(t)
	dataDir := t.TempDir()
	policies := t.TempDir()
	if err := os.WriteFile(filepath.Join(policies, "quote.rego"), []byte(quotePolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	peek := fmt.Sprintf(`[ -f %[1]s/first ] || cat "$STACKD_ID_TOKEN" > %[1]s/first; cat "$STACKD_ID_TOKEN" > %[1]s/a-$(date +%%s%%N).jwt; cat %[1]s/first`, out)
	in := startDaemonWith(t, "stacks:\n"+stackYAML("a", r, fmt.Sprintf(`    config:
      path: %s
      peek: %q
    credentials:
      token: {audience: vault, env: STACKD_ID_TOKEN}
`, filepath.Join(out, "a.txt"), peek)), dataDir, func(f *runFlags) { f.idIssuerURL, f.policy = issuer, policies })
	v := in.waitStack("a", "Ready", 2*time.Minute, isReady)
	_, body := in.get("/api/v1/stacks/a", nil)
	answers := []string{string(body)}
	var ups struct{ Updates []model.Update }
	in.get("/api/v1/stacks/a/updates", &ups)
	for _, u := range ups.Updates {
		_, body := in.get("/api/v1/updates/"+u.ID+"/log", nil)
		answers = append(answers, "log of "+u.Type+": "+string(body))
	}
	_, body = in.get("/api/v1/stacks/a/updates", nil)
	answers = append(answers, string(body))
	in.stop()
	db, err := os.ReadFile(filepath.Join(dataDir, store.FileName))
	if err != nil {
		t.Fatal(err)
	}
	toks := savedTokens(t, out, "a")
	if len(toks) < 2 {
		t.Fatalf("tokens: %d, want the preview's and the up's", len(toks))
	}
	if !strings.Contains(strings.Join(answers, "\n"), "policy warning (stackd.quote): content now") {
		t.Errorf("no answer shows the policy's warning: %+v", v.Status)
	}
	for i, tok := range toks {
		for _, a := range answers {
			if strings.Contains(a, signatureOf(tok)) {
				t.Errorf("token %d is shown:\n%.3000s", i, a)
			}
		}
		if strings.Contains(string(db), signatureOf(tok)) {
			t.Errorf("token %d is in the store", i)
		}
	}
}
