package main

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stackd/stackd/daemon/model"
	"github.com/stackd/stackd/daemon/review"
	"github.com/stackd/stackd/store"
)

// TestE2ECredentialsEarlierTokenMasked: a program that passes its token
// to a resource's input or an output (an explicit provider given the
// token's text rather than its file, say) leaves it in the state; the
// next operation's diff shows it as the old value. The up's write token
// is still good then (it lives up to --oidc-token-ttl): the preview that
// follows (here Preview now; a pull request's alike) must not show it in
// its diff, its log or the stack's history, nor the store keep it.
func TestE2ECredentialsEarlierTokenMasked(t *testing.T) { earlierTokenMasked(t, false) }

// TestE2ECredentialsEarlierTokenMaskedAfterRestart: the same, with the
// daemon restarted between the up and the preview, so that no runner
// remembers the up's token: it is masked as a JSON Web Token.
func TestE2ECredentialsEarlierTokenMaskedAfterRestart(t *testing.T) { earlierTokenMasked(t, true) }

func earlierTokenMasked(t *testing.T, restart bool) {
	t.Parallel()
	r := newRepo(t)
	r.commit(map[string]string{"Pulumi.yaml": credsProgram})
	out := outDir(t)
	dataDir := t.TempDir()
	peek := fmt.Sprintf(`cat "$STACKD_ID_TOKEN" > %s/a-$(date +%%s%%N).jwt; cat "$STACKD_ID_TOKEN"`, out)
	config := "stacks:\n" + tokenStack("a", r, out, peek, "", "")
	in := startDaemonWith(t, config, dataDir, issuing)
	in.waitStack("a", "Ready", 2*time.Minute, isReady)
	if restart {
		in.stop()
		in = startDaemonWith(t, config, dataDir, issuing)
		in.waitStack("a", "Ready", 2*time.Minute, isReady)
	}
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
	g := newForgeRig(t, review.GitHub)
	programs := g.repo("infra")
	programs.commit(map[string]string{"app/Pulumi.yaml": credsProgram})
	out := outDir(t)
	peek := fmt.Sprintf(`      peek: 'cat "$STACKD_ID_TOKEN" > %s/b-$(date +%%s%%N).jwt; cat "$STACKD_ID_TOKEN"'
    credentials:
      token: {audience: vault, env: STACKD_ID_TOKEN}
`, out)
	g.start(strings.Replace(manifest("b", g.url("infra"), out, "hello"), "      greeting: hello\n", "", 1)+peek,
		issuing)
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
	r := newRepo(t)
	r.commit(map[string]string{"Pulumi.yaml": credsProgram})
	out := outDir(t)
	dataDir := t.TempDir()
	policies := t.TempDir()
	if err := os.WriteFile(filepath.Join(policies, "quote.rego"), []byte(quotePolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	peek := fmt.Sprintf(`[ -f %[1]s/first ] || cat "$STACKD_ID_TOKEN" > %[1]s/first; cat "$STACKD_ID_TOKEN" > %[1]s/a-$(date +%%s%%N).jwt; cat %[1]s/first`, out)
	in := startDaemonWith(t, "stacks:\n"+tokenStack("a", r, out, peek, "", ""), dataDir, func(f *runFlags) {
		issuing(f)
		f.policy = policies
	})
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

// TestE2ECredentialsHostileProgram: a's program, hostile, tries what it
// can with its own credentials' directory and beyond while b's operation
// runs, held in its create, with a process that holds b's token file open:
// write in its own directory (a file, a link, replace or remove its
// token), hard-link its token out, write the credentials directory of all
// operations, read b's token, the signing keys, or a token through the
// processes of /proc (their descriptors, as b's open file); and it leaves
// a process behind that would read the token of an operation to come.
// Listing the directories works (names are no secret: the sandbox lets
// every program list every directory); nothing else does, and the process
// left behind ends with a's operation.
func TestE2ECredentialsHostileProgram(t *testing.T) {
	t.Parallel()
	r := newRepo(t)
	r.commit(map[string]string{"Pulumi.yaml": credsProgram})
	out, g := outDir(t), newGates(t)
	dataDir := t.TempDir()
	stack := func(name, peek string) string {
		return tokenStack(name, r, out, peek, "    envRefs:\n"+g.envRef(), "")
	}
	// b keeps its token file open in a process of its own.
	victim := fmt.Sprintf(`cat "$STACKD_ID_TOKEN" > %s/b-$(date +%%s%%N).jwt; sleep 30 < "$STACKD_ID_TOKEN" > /dev/null 2>&1 & echo ok`, out)
	g.close("create", "b.txt")
	in := startDaemonWith(t, "stacks:\n"+stack("b", victim), dataDir, issuing)
	g.waitHeld("create", "b.txt", 2*time.Minute)
	dirs, _ := filepath.Glob(filepath.Join(dataDir, "credentials", "op-*"))
	if len(dirs) != 1 {
		t.Fatalf("credentials directories while b runs: %v", dirs)
	}
	bToken := filepath.Join(dirs[0], "token")

	linger := fmt.Sprintf(`while true; do echo tick >> %[1]s/linger.log; cat %[1]s/next >> %[1]s/linger.log 2>&1; sleep 0.2; done`, out)
	attack := fmt.Sprintf(`T="$STACKD_ID_TOKEN"; D=$(dirname "$T"); C=$(dirname "$D"); DATA=$(dirname "$C"); cat "$T" > %[1]s/a-$(date +%%s%%N).jwt
echo "PLANT:"; (echo x > "$D/planted") 2>&1; ln -s /tmp "$D/link" 2>&1; mv "$T" "$D/moved" 2>&1; rm -f "$T" 2>&1; echo "OWN: $(ls -A "$D" | tr '\n' ' ')"
echo "HARDLINK:"; ln "$T" %[1]s/hard 2>&1
echo "MKDIR:"; mkdir "$C/op-evil" 2>&1; ln -s %[1]s "$C/op-link" 2>&1; echo "ALL: $(ls -A "$C" | tr '\n' ' ')"
echo "STEAL:"; cat %[3]s 2>&1; cat "$DATA/oidc/signing-keys.json" 2>&1 | head -c 300
echo "PROCS:"; for p in /proc/[0-9]*; do [ "$p" = /proc/$$ ] && continue; for f in $p/fd/*; do case "$(readlink $f 2>/dev/null)" in */credentials/*) echo "SEEN $f"; head -c 300 "$f" 2>&1 | grep -o 'eyJ[A-Za-z0-9_.-]*' | sed 's/^/READ /';; esac; done; tr '\0' '\n' < $p/environ 2>/dev/null | grep -q '^STACKD_ID_TOKEN=' && echo "ENV $p"; done
echo "END"
setsid sh -c '%[2]s' </dev/null >/dev/null 2>&1 &
true`, out, linger, bToken)
	in.reload("stacks:\n" + stack("b", victim) + stack("a", attack))
	in.waitStack("a", "Ready", 2*time.Minute, isReady)
	seen := readFile(t, filepath.Join(out, "a.txt"))
	section := func(name, next string) string {
		_, rest, _ := strings.Cut(seen, name+":\n")
		part, _, _ := strings.Cut(rest, next+":\n")
		return part
	}
	if p := section("PLANT", "HARDLINK"); strings.Count(p, "ermission denied") != 4 || !strings.Contains(p, "OWN: token \n") {
		t.Errorf("a's program changed its own credentials directory:\n%s", p)
	}
	if _, err := os.Stat(filepath.Join(out, "hard")); err == nil {
		t.Error("a's program hard-linked its token out")
	}
	if p := section("MKDIR", "STEAL"); strings.Count(p, "ermission denied") != 2 || strings.Contains(p, "ALL: op-evil") || strings.Contains(p, " op-evil ") || strings.Contains(p, "op-link ") {
		t.Errorf("a's program wrote the credentials directory:\n%s", p)
	}
	if p := section("STEAL", "PROCS"); strings.Count(p, "ermission denied") != 2 || jwtPattern.MatchString(p) || strings.Contains(p, "pkcs8") {
		t.Errorf("a's program read b's token or the signing keys:\n%s", p)
	}
	procs := section("PROCS", "END")
	if strings.Contains(procs, "READ ") || strings.Contains(procs, "SEEN ") && !strings.Contains(procs, "ermission denied") {
		t.Errorf("a's program read a token through another process:\n%s", procs)
	}
	if strings.Count(procs, "ENV ") > 2 { // its provider and its own shell
		t.Errorf("a's program read the environment of another operation's processes:\n%s", procs)
	}

	// a's operation ended: the process it left ends with it.
	if err := os.WriteFile(filepath.Join(out, "next"), []byte("not ended"), 0o644); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	switch log, _ := os.ReadFile(filepath.Join(out, "linger.log")); {
	case !strings.Contains(string(log), "tick"):
		t.Error("the process a's program left behind never ran")
	case strings.Contains(string(log), "not ended"):
		t.Errorf("the process a's program left behind still runs:\n%s", log)
	}
	g.open("create", "b.txt")
	in.waitStack("b", "Ready", 2*time.Minute, isReady)
	aToks, bToks := savedTokens(t, out, "a"), savedTokens(t, out, "b")
	if len(aToks) != 1 || len(bToks) != 1 {
		t.Fatalf("tokens: a %d, b %d", len(aToks), len(bToks))
	}
	if strings.Contains(seen, signatureOf(bToks[0])) {
		t.Error("a's program holds b's token")
	}
}

// TestE2ECredentialsTokenForms: the forms of a token the runner masks in
// a failed operation's log and message: the token, its signature alone,
// each in base64, and the token in the error the program fails with.
// Forms it cannot know (split across lines, hex, base64url, reversed) get
// through: a program that means to leak its token does not need the
// output (docs/previews.md, the threat model), and the test only lists
// them.
func TestE2ECredentialsTokenForms(t *testing.T) {
	t.Parallel()
	r := newRepo(t)
	r.commit(map[string]string{"Pulumi.yaml": credsProgram})
	out := outDir(t)
	dataDir := t.TempDir()
	peek := fmt.Sprintf(`T="$STACKD_ID_TOKEN"; cat "$T" > %s/a-$(date +%%s%%N).jwt
echo "RAW $(cat "$T")" >&2; echo "SIG $(cut -d. -f3 < "$T")" >&2
echo "B64 $(base64 -w0 < "$T")" >&2; echo "B64SIG $(cut -d. -f3 < "$T" | tr -d '\n' | base64 -w0)" >&2
echo "JSON {\"token\":\"$(cat "$T")\"}" >&2
echo "HALF1 $(cut -d. -f3 < "$T" | cut -c1-170)" >&2; echo "HALF2 $(cut -d. -f3 < "$T" | cut -c171-)" >&2
echo "B64URL $(base64 -w0 < "$T" | tr '+/' '-_')" >&2; echo "HEX $(od -An -tx1 < "$T" | tr -d ' \n')" >&2
echo "failing with $(cat "$T")"; exit 3`, out)
	in := startDaemonWith(t, "stacks:\n"+tokenStack("a", r, out, peek, "", ""), dataDir, issuing)
	v := in.waitStack("a", "a failed update", 2*time.Minute, func(v model.StackView) bool {
		return v.Status.LastUpdate != nil && v.Status.LastUpdate.State == model.UpdateFailed
	})
	var ups struct{ Updates []model.Update }
	in.get("/api/v1/stacks/a/updates", &ups)
	_, log := in.get("/api/v1/updates/"+ups.Updates[0].ID+"/log", nil)
	_, stack := in.get("/api/v1/stacks/a", nil)
	in.stop()
	db, _ := os.ReadFile(filepath.Join(dataDir, store.FileName))
	toks := savedTokens(t, out, "a")
	if len(toks) == 0 {
		t.Fatal("the program saved no token")
	}
	tok := toks[0]
	sig := signatureOf(tok)
	if !strings.Contains(v.Status.LastUpdate.Message, "failing with [redacted]") && !strings.Contains(string(log), "failing with [redacted]") {
		t.Errorf("the error is not shown masked: %q\n%s", v.Status.LastUpdate.Message, log)
	}
	masked := map[string]string{"the token": tok, "its signature": sig,
		"the token in base64":     base64.StdEncoding.EncodeToString([]byte(tok)),
		"its signature in base64": base64.StdEncoding.EncodeToString([]byte(sig))}
	for what, form := range masked {
		for where, text := range map[string]string{"log": string(log), "stack": string(stack), "store": string(db), "daemon's log": in.logs.String()} {
			if strings.Contains(text, form) {
				t.Errorf("%s is in the %s", what, where)
			}
		}
	}
	for _, line := range strings.Split(string(log), "\n") {
		for _, form := range []string{"HALF1", "HALF2", "B64URL", "HEX"} {
			if i := strings.Index(line, form+" "); i >= 0 && !strings.Contains(line, "[redacted]") && !strings.Contains(line, "$(") {
				t.Logf("gets through, as it may: %.60s…", line[i:])
			}
		}
	}
}

// TestE2EPullRequestStackOfAnotherSource: a pull request to the manifests
// repository adds a stack named as one of another config source (a local
// file), with a program of its own: were it previewed as that stack, its
// code would get that stack's token. The config after the merge does not
// load (a duplicate name), so nothing is previewed and no token made.
func TestE2EPullRequestStackOfAnotherSource(t *testing.T) {
	t.Parallel()
	toolchainBin(t)
	g := newForgeRig(t, review.GitHub)
	programs, manifests := g.repo("infra"), g.repo("manifests")
	programs.commit(map[string]string{"app/Pulumi.yaml": credsManifestProgram})
	out := outDir(t)
	peek := func(name string) string {
		return fmt.Sprintf("      peek: 'cat \"$STACKD_ID_TOKEN\" > %s/%s-$(date +%%s%%N).jwt; echo ok'\n"+
			"    credentials:\n      token: {audience: vault, env: STACKD_ID_TOKEN}\n", out, name)
	}
	local := filepath.Join(t.TempDir(), "prod.yaml")
	if err := os.WriteFile(local, []byte(manifest("prod", g.url("infra"), out, "hello")+peek("prod")), 0o600); err != nil {
		t.Fatal(err)
	}
	manifests.commit(map[string]string{"stacks/web.yaml": manifest("web", g.url("infra"), out, "hello") + "      peek: echo\n"})
	g.start("", func(f *runFlags) {
		f.config, f.pollInterval = stringsFlag{local, "git+" + g.url("manifests") + "//stacks?ref=main"}, time.Hour
		issuing(f)
	})
	g.in.waitStack("prod", "first deploy", 2*time.Minute, isReady)
	g.in.waitStack("web", "first deploy", 2*time.Minute, isReady)
	before := savedTokens(t, out, "prod")
	pr := &pullRequest{repo: "acme/manifests", name: "manifests", number: 8}
	g.push(manifests, pr, map[string]string{"stacks/prod.yaml": manifest("prod", g.url("infra"), out, "pwned") + peek("pr")})
	g.hook(pr, "opened")
	if st := g.waitStatus(pr, "stackd/config"); st.State != review.Failure {
		t.Errorf("status of the config: %+v", st)
	}
	if c := g.waitComment(pr); !strings.Contains(c.Body, "duplicate stack name") {
		t.Errorf("comment:\n%s", c.Body)
	}
	if toks := savedTokens(t, out, "pr"); len(toks) != 0 || len(savedTokens(t, out, "prod")) != len(before) {
		t.Errorf("the pull request's program got a token: %d", len(toks))
	}
}
