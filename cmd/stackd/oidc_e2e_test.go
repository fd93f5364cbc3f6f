package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"

	"github.com/stackd/stackd/daemon/model"
	"github.com/stackd/stackd/identity"
	"github.com/stackd/stackd/runner"
	"github.com/stackd/stackd/store"
)

// credsProgram runs the config value "peek" (a shell command) in the
// test provider, inside the program's sandbox, and writes what it
// printed to a File at "path" (the test's out dir: a hostile program's
// way out) and to an output.
const credsProgram = `name: creds
runtime: yaml
configuration:
  path:
    type: String
  peek:
    type: String
variables:
  seen:
    fn::invoke:
      function: stackdtest:index:run
      arguments:
        command: ${peek}
resources:
  note:
    type: stackdtest:index:File
    properties:
      path: ${path}
      content: ${seen.output}
outputs:
  seen: ${seen.output}
`

// testIssuer is the issuer URL of the credentials tests.
const testIssuer = "https://stackd.example.com"

// issuing makes a daemon an issuer of testIssuer.
func issuing(f *runFlags) { f.idIssuerURL = testIssuer }

// tokenStack is stack name of r's credsProgram: its program runs the
// shell command peek and writes what it printed to <out>/<name>.txt; its
// operations get a token for the audience vault, whose file
// STACKD_ID_TOKEN names. extra is more of the spec, creds more lines of
// its credentials.
func tokenStack(name string, r *repo, out, peek, extra, creds string) string {
	return stackYAML(name, r, fmt.Sprintf("    config:\n      path: %s\n      peek: %q\n%s    credentials:\n%s      token: {audience: vault, env: STACKD_ID_TOKEN}\n",
		filepath.Join(out, name+".txt"), peek, extra, creds))
}

// verifier checks tokens of audience vault as a relying party does: over
// in's JWKS.
func (in *instance) verifier() *oidc.IDTokenVerifier {
	return oidc.NewVerifier(testIssuer, oidc.NewRemoteKeySet(context.Background(), in.url+"/.well-known/jwks.json"),
		&oidc.Config{ClientID: "vault"})
}

// signatureOf is a token's last part, what makes it good.
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

// jwtPattern finds compact JWTs in text.
var jwtPattern = regexp.MustCompile(`eyJ[A-Za-z0-9_-]+\.eyJ[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+`)

// stackClaims are the claims the tests read from stackd's tokens.
type stackClaims struct {
	Stack, Operation, Scope, Repository, Commit string
}

// TestE2ECredentials: a stack with spec.credentials gets, in each
// operation, a token of its own that a relying party validates over the
// daemon's JWKS (write scope for an up, read for a preview) and the
// variables the AWS SDKs read; another stack's program, told the exact
// path of that stack's token file while its operation runs, cannot read
// it; the token is in no log, output, API answer or stored record; and
// the files go with the operation.
func TestE2ECredentials(t *testing.T) {
	t.Parallel()
	r := newRepo(t)
	commit := r.commit(map[string]string{"Pulumi.yaml": credsProgram})
	out, g := outDir(t), newGates(t)
	dataDir := t.TempDir()
	stack := func(name, peek string) string {
		return tokenStack(name, r, out, peek, "    envRefs:\n"+g.envRef(), fmt.Sprintf(
			"      aws: {roleArn: \"arn:aws:iam::123456789012:role/%s-write\", readRoleArn: \"arn:aws:iam::123456789012:role/%s-read\"}\n", name, name))
	}
	// b's program keeps its token, and is held in its create while a
	// runs.
	keep := func(name string) string {
		return fmt.Sprintf(`cat "$STACKD_ID_TOKEN" > %s/%s-$(date +%%s%%N).jwt; echo "ROLE=$AWS_ROLE_ARN FILE=$AWS_WEB_IDENTITY_TOKEN_FILE SESSION=$AWS_ROLE_SESSION_NAME"; cat "$STACKD_ID_TOKEN"`, out, name)
	}
	g.close("create", "b.txt")
	cfgB := "stacks:\n" + stack("b", keep("b"))
	in := startDaemonWith(t, cfgB, dataDir, issuing)
	g.waitHeld("create", "b.txt", 2*time.Minute)
	bDirs, _ := filepath.Glob(filepath.Join(dataDir, runner.CredentialsDir, "op-*"))
	if len(bDirs) != 1 {
		t.Fatalf("credentials directories while b runs: %v", bDirs)
	}
	bToken := filepath.Join(bDirs[0], identity.TokenFile)
	if _, err := os.Stat(bToken); err != nil {
		t.Fatal(err)
	}
	// a knows where b's token is, and tries to read it.
	attack := keep("a") + fmt.Sprintf(`; echo; echo "STEAL:"; cat %s 2>&1; ls %s 2>&1; true`, bToken, filepath.Dir(bDirs[0]))
	in.reload(cfgB + stack("a", attack))
	in.waitStack("a", "Ready", 2*time.Minute, isReady)
	g.open("create", "b.txt")
	in.waitStack("b", "Ready", 2*time.Minute, isReady)

	seenA := readFile(t, filepath.Join(out, "a.txt"))
	for _, want := range []string{"ROLE=arn:aws:iam::123456789012:role/a-write", "SESSION=stackd-a-up",
		"FILE=" + filepath.Join(dataDir, runner.CredentialsDir)} {
		if !strings.Contains(seenA, want) {
			t.Errorf("a's program saw no %q:\n%s", want, seenA)
		}
	}
	_, stolen, _ := strings.Cut(seenA, "STEAL:")
	if !strings.Contains(stolen, "ermission denied") || jwtPattern.MatchString(stolen) {
		t.Errorf("a's program read b's credentials:\n%s", stolen)
	}

	verifier := in.verifier()
	tokens := func(name string) []string { return savedTokens(t, out, name) }
	check := func(tok string, want stackClaims) {
		t.Helper()
		idt, err := verifier.Verify(context.Background(), tok)
		if err != nil {
			t.Fatalf("stack %s's %s token does not validate: %v", want.Stack, want.Operation, err)
		}
		var got stackClaims
		if err := idt.Claims(&got); err != nil {
			t.Fatal(err)
		}
		if got != want || idt.Subject != "stack:"+want.Stack+":op:"+want.Operation+":scope:"+want.Scope {
			t.Errorf("claims %+v sub %q, want %+v", got, idt.Subject, want)
		}
	}
	repoURL := "file://" + r.dir
	aToks, bToks := tokens("a"), tokens("b")
	if len(aToks) != 1 || len(bToks) != 1 {
		t.Fatalf("tokens seen: a %d, b %d, want 1 each", len(aToks), len(bToks))
	}
	check(aToks[0], stackClaims{"a", "up", "write", repoURL, commit})
	check(bToks[0], stackClaims{"b", "up", "write", repoURL, commit})
	if strings.Contains(seenA, bToks[0]) {
		t.Error("a's program holds b's token")
	}

	// A preview now: read scope, and the read role.
	if code := in.post("/api/v1/stacks/a/preview", nil, map[string]string{"Authorization": "Bearer " + in.token}); code != http.StatusAccepted {
		t.Fatalf("preview now: %d", code)
	}
	waitFor(t, "the preview's token", 2*time.Minute, func() bool { return len(tokens("a")) == 2 })
	check(tokens("a")[1], stackClaims{"a", "preview", "read", repoURL, commit})

	// The credentials went with their operations.
	waitFor(t, "the preview's end", 2*time.Minute, func() bool {
		var p model.StackPreview
		code, _ := in.get("/api/v1/stacks/a/preview", &p)
		return code == http.StatusOK && p.State == model.UpdateSucceeded
	})
	if left, _ := filepath.Glob(filepath.Join(dataDir, runner.CredentialsDir, "*")); len(left) != 0 {
		t.Errorf("credentials left after the operations: %v", left)
	}

	// No token anywhere but in the programs' own hands.
	all := append(tokens("a"), bToks...)
	var answers []string
	for _, path := range []string{"/api/v1/stacks", "/api/v1/stacks/a", "/api/v1/stacks/b", "/api/v1/stacks/a/updates",
		"/api/v1/stacks/b/updates", "/api/v1/stacks/a/preview", "/metrics"} {
		_, body := in.get(path, nil)
		answers = append(answers, string(body))
	}
	for _, name := range []string{"a", "b"} {
		var ups struct{ Updates []model.Update }
		in.get("/api/v1/stacks/"+name+"/updates", &ups)
		for _, u := range ups.Updates {
			_, body := in.get("/api/v1/updates/"+u.ID+"/log", nil)
			answers = append(answers, string(body))
		}
	}
	// Two tokens an operation: one for AWS, one for the token of its own.
	if !strings.Contains(answers[6], `stackd_oidc_tokens_minted_total{scope="write",stack="a"} 2`) ||
		!strings.Contains(answers[6], `stackd_oidc_tokens_minted_total{scope="read",stack="a"} 2`) {
		t.Errorf("the metrics do not count a's tokens:\n%s", answers[6])
	}
	if !strings.Contains(strings.Join(answers, "\n"), "[redacted]") {
		t.Error("no answer shows a masked token: the programs' output of their tokens went missing")
	}
	in.stop()
	db, err := os.ReadFile(filepath.Join(dataDir, store.FileName))
	if err != nil {
		t.Fatal(err)
	}
	for _, tok := range all {
		sig := signatureOf(tok)
		for i, a := range answers {
			if strings.Contains(a, sig) {
				t.Errorf("a token's signature is in API answer %d:\n%.400s", i, a)
			}
		}
		if strings.Contains(in.logs.String(), sig) {
			t.Error("a token's signature is in the daemon's log")
		}
		if strings.Contains(string(db), sig) {
			t.Error("a token's signature is in the store")
		}
	}
}

// TestE2ECredentialsApprovedBy: with approval, the preview that saves
// the plan gets a read token, and the up that applies the approved plan
// a write token that names who approved it.
func TestE2ECredentialsApprovedBy(t *testing.T) {
	t.Parallel()
	r := newRepo(t)
	r.commit(map[string]string{"Pulumi.yaml": credsProgram})
	out := outDir(t)
	peek := fmt.Sprintf(`cat "$STACKD_ID_TOKEN" > %s/app-$(date +%%s%%N).jwt; echo ok`, out)
	in := startDaemonWith(t, "stacks:\n"+tokenStack("app", r, out, peek, "    approval: {required: true}\n", ""), "", issuing)
	in.waitStack("app", "the plan", 2*time.Minute, awaitingAt(""))
	in.approveAndWait("app")
	toks := savedTokens(t, out, "app")
	if len(toks) != 2 {
		t.Fatalf("%d tokens, want the preview's and the up's", len(toks))
	}
	verifier := in.verifier()
	var got []string
	for _, tok := range toks {
		idt, err := verifier.Verify(context.Background(), tok)
		if err != nil {
			t.Fatal(err)
		}
		var c struct {
			Operation, Scope string
			ApprovedBy       string `json:"approved_by"`
		}
		if err := idt.Claims(&c); err != nil {
			t.Fatal(err)
		}
		got = append(got, c.Operation+"/"+c.Scope+"/"+c.ApprovedBy)
	}
	if want := []string{"preview/read/", "up/write/admin-token"}; !slices.Equal(got, want) {
		t.Errorf("tokens %q, want %q", got, want)
	}
}

// TestE2ECredentialsNeedIssuer: a stack with spec.credentials on a daemon
// without --oidc-issuer-url fails with a message that says what is
// missing, and its program never runs.
func TestE2ECredentialsNeedIssuer(t *testing.T) {
	t.Parallel()
	r := newRepo(t)
	r.commit(map[string]string{"Pulumi.yaml": program("v1")})
	out := filepath.Join(outDir(t), "note.txt")
	in := startDaemon(t, "stacks:\n"+stackYAML("app", r, pathConfig(out)+"    credentials: {token: {audience: vault, env: TOKEN_FILE}}\n"), "")
	v := in.waitStack("app", "a failed update", 2*time.Minute, func(v model.StackView) bool {
		return v.Status.LastUpdate != nil && v.Status.LastUpdate.State == model.UpdateFailed
	})
	if !strings.Contains(v.Status.LastUpdate.Message, "--oidc-issuer-url") {
		t.Errorf("message %q does not name the flag", v.Status.LastUpdate.Message)
	}
	if _, err := os.Stat(out); err == nil {
		t.Error("the program ran without its credentials")
	}
}

// TestE2EIssuerDocuments: the discovery document and the JWKS are served
// without a token, even to a daemon that requires one for reads, and
// name the issuer; the rotation needs the admin token.
func TestE2EIssuerDocuments(t *testing.T) {
	t.Parallel()
	in := startDaemonWith(t, "stacks: []\n", "", func(f *runFlags) {
		f.idIssuerURL, f.readToken = "https://stackd.example.com", true
	})
	prov, err := oidc.NewProvider(oidc.InsecureIssuerURLContext(context.Background(), "https://stackd.example.com"), in.url)
	if err != nil {
		t.Fatalf("discovery: %v", err)
	}
	var doc struct {
		JWKS string `json:"jwks_uri"`
	}
	if err := prov.Claims(&doc); err != nil || doc.JWKS != "https://stackd.example.com/.well-known/jwks.json" {
		t.Errorf("jwks_uri %q %v", doc.JWKS, err)
	}
	resp, err := http.Get(in.url + "/.well-known/jwks.json")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"RS256"`) || strings.Contains(string(body), `"d"`) {
		t.Errorf("JWKS: %d %s", resp.StatusCode, body)
	}
	if code := in.post("/api/v1/oidc/rotate", nil, nil); code != http.StatusUnauthorized {
		t.Errorf("a rotation without the token: %d", code)
	}
	var outBuf strings.Builder
	if code := run(context.Background(), in.clientArgs("oidc", "rotate", "--emergency"), &outBuf, &outBuf); code != 0 {
		t.Fatalf("stackd oidc rotate: %d %s", code, outBuf.String())
	}
	if !strings.Contains(outBuf.String(), "withdrawn") {
		t.Errorf("stackd oidc rotate printed %q", outBuf.String())
	}
}
