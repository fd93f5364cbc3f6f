package identity

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/stackd/stackd/daemon/model"
	"github.com/stackd/stackd/daemon/spec"
)

// clock is a settable time.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func newIssuer(t *testing.T, c *clock, mod func(*Options)) *Issuer {
	t.Helper()
	opts := Options{URL: "https://stackd.example.com/", Dir: t.TempDir(), Now: c.now}
	if mod != nil {
		mod(&opts)
	}
	i, err := New(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	return i
}

var upReq = model.IdentityRequest{Stack: "net-prod", Operation: model.UpdateUp, Scope: model.ScopeWrite,
	Repository: "https://git.example.com/net.git", Commit: "abc123", Labels: map[string]string{"env": "prod"}, ApprovedBy: "ada"}

// verify checks tok against the issuer's JWKS as a relying party does and
// returns its claims.
func verify(t *testing.T, i *Issuer, tok string, at time.Time) (jwt.Claims, Claims, error) {
	t.Helper()
	data, err := i.JWKS(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(data, &set); err != nil {
		t.Fatal(err)
	}
	parsed, err := jwt.ParseSigned(tok, []jose.SignatureAlgorithm{jose.RS256})
	if err != nil {
		return jwt.Claims{}, Claims{}, err
	}
	var std jwt.Claims
	var own Claims
	if err := parsed.Claims(&set, &std, &own); err != nil {
		return std, own, err
	}
	return std, own, std.ValidateWithLeeway(jwt.Expected{Issuer: i.URL(), Time: at}, 0)
}

func TestMintVerifies(t *testing.T) {
	c := &clock{time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)}
	i := newIssuer(t, c, nil)
	tok, exp, err := i.Mint(upReq, AWSAudience, 10*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if want := c.t.Add(10 * time.Minute); !exp.Equal(want) {
		t.Errorf("expires %v, want %v", exp, want)
	}
	std, own, err := verify(t, i, tok, c.t.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if std.Issuer != "https://stackd.example.com" || std.Subject != "stack:net-prod:op:up:scope:write" ||
		!std.Audience.Contains(AWSAudience) || std.ID == "" {
		t.Errorf("registered claims: %+v", std)
	}
	if own.Stack != "net-prod" || own.Scope != "write" || own.Commit != "abc123" || own.Labels["env"] != "prod" || own.ApprovedBy != "ada" {
		t.Errorf("claims: %+v", own)
	}
	if _, _, err := verify(t, i, tok, c.t.Add(11*time.Minute)); err == nil {
		t.Error("a token past its exp validated")
	}
	// The operation's timeout never lets a token outlive TokenTTL.
	if _, exp, _ := i.Mint(upReq, AWSAudience, 5*time.Hour); !exp.Equal(c.t.Add(DefaultTokenTTL)) {
		t.Errorf("a 5h operation's token expires %v, want after the 15m TokenTTL", exp)
	}
}

func TestMintRefuses(t *testing.T) {
	i := newIssuer(t, &clock{time.Now()}, nil)
	for name, req := range map[string]model.IdentityRequest{
		"no scope":  {Stack: "a", Operation: "up"},
		"bad scope": {Stack: "a", Operation: "up", Scope: "admin"},
		"no stack":  {Operation: "up", Scope: model.ScopeRead},
	} {
		if _, _, err := i.Mint(req, "aud", time.Minute); err == nil {
			t.Errorf("%s: minted", name)
		}
	}
	long := upReq
	long.Stack = strings.Repeat("s", 300)
	if _, _, err := i.Mint(long, "aud", time.Minute); err == nil || !strings.Contains(err.Error(), "255") {
		t.Errorf("a 300-character subject: %v", err)
	}
}

func TestSubjectTemplate(t *testing.T) {
	c := &clock{time.Now()}
	if _, err := New(context.Background(), Options{URL: "https://x", Dir: t.TempDir(), Subject: "{{.Nope}}"}); err == nil {
		t.Error("a template naming an unknown field was accepted")
	}
	i := newIssuer(t, c, func(o *Options) { o.Subject = "repo:{{.Repository}}:env:{{.Labels.env}}:{{.Scope}}" })
	tok, _, err := i.Mint(upReq, "aud", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	std, _, err := verify(t, i, tok, c.t)
	if err != nil || std.Subject != "repo:https://git.example.com/net.git:env:prod:write" {
		t.Errorf("subject %q, %v", std.Subject, err)
	}
	noEnv := upReq
	noEnv.Labels = nil
	if _, _, err := i.Mint(noEnv, "aud", time.Minute); err == nil {
		t.Error("a subject naming a label the stack lacks was made (missingkey=error)")
	}
}

func TestIssuerURL(t *testing.T) {
	for _, u := range []string{"", "stackd.example.com", "http://stackd.example.com", "https://x/?a=b", "ftp://x"} {
		if _, err := New(context.Background(), Options{URL: u, Dir: t.TempDir()}); err == nil {
			t.Errorf("issuer URL %q accepted", u)
		}
	}
	for _, u := range []string{"https://stackd.example.com/oidc", "http://127.0.0.1:8080"} {
		if _, err := New(context.Background(), Options{URL: u, Dir: t.TempDir()}); err != nil {
			t.Errorf("issuer URL %q: %v", u, err)
		}
	}
}

func TestKeysPersistAndRotate(t *testing.T) {
	c := &clock{time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	dir := t.TempDir()
	mod := func(o *Options) { o.Dir = dir; o.Rotation = 24 * time.Hour; o.TokenTTL = 10 * time.Minute }
	i := newIssuer(t, c, mod)
	fi, err := os.Stat(filepath.Join(dir, KeyFile))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v", fi, err)
	}
	old, _, _ := i.Mint(upReq, "aud", time.Hour)
	// A restart keeps the key: its tokens still validate.
	i = newIssuer(t, c, mod)
	if _, _, err := verify(t, i, old, c.t); err != nil {
		t.Fatalf("after a restart: %v", err)
	}
	rotated := i.Rotated()
	// A day later the key rotates; the old one stays published until its
	// last token expired.
	c.t = c.t.Add(24 * time.Hour)
	if err := i.Maintain(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-rotated:
	default:
		t.Error("Rotated was not closed by a rotation")
	}
	if i.KeyAge() != 0 {
		t.Errorf("key age %v after a rotation", i.KeyAge())
	}
	if keys, _ := i.publishedKeys(context.Background()); len(keys) != 2 {
		t.Errorf("%d keys published right after a rotation, want 2", len(keys))
	}
	c.t = c.t.Add(11 * time.Minute)
	if err := i.Maintain(context.Background()); err != nil {
		t.Fatal(err)
	}
	if keys, _ := i.publishedKeys(context.Background()); len(keys) != 1 {
		t.Errorf("%d keys published once the old key's tokens expired, want 1", len(keys))
	}
	if _, _, err := verify(t, i, old, c.t.Add(-time.Hour)); err == nil {
		t.Error("a token of a key rotated out validated")
	}
}

func TestEmergencyRotation(t *testing.T) {
	c := &clock{time.Now()}
	i := newIssuer(t, c, nil)
	tok, _, _ := i.Mint(upReq, "aud", time.Minute)
	if _, err := i.Rotate(context.Background(), true); err != nil {
		t.Fatal(err)
	}
	if _, _, err := verify(t, i, tok, c.t); err == nil {
		t.Error("a token of the key withdrawn in an emergency validated")
	}
	fresh, _, _ := i.Mint(upReq, "aud", time.Minute)
	if _, _, err := verify(t, i, fresh, c.t); err != nil {
		t.Errorf("a token of the new key: %v", err)
	}
}

func TestCredentialsWiring(t *testing.T) {
	c := &clock{time.Now()}
	i := newIssuer(t, c, nil)
	req := upReq
	req.Credentials = spec.Credentials{
		AWS:   &spec.AWSCredentials{RoleArn: "arn:aws:iam::123456789012:role/write", ReadRoleArn: "arn:aws:iam::123456789012:role/read"},
		GCP:   &spec.GCPCredentials{WorkloadIdentityProvider: "projects/1/locations/global/workloadIdentityPools/pool/providers/prov", ServiceAccount: "w@p.iam.gserviceaccount.com"},
		Azure: &spec.AzureCredentials{TenantID: "t", ClientID: "c", ReadClientID: "rc"},
		Token: &spec.TokenCredentials{Audience: "vault", Env: "VAULT_JWT_FILE"},
	}
	set, err := i.Credentials(req, "/run/op", 5*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"AWS_ROLE_ARN": "arn:aws:iam::123456789012:role/write", "AWS_WEB_IDENTITY_TOKEN_FILE": "/run/op/aws-token",
		"AWS_ROLE_SESSION_NAME": "stackd-net-prod-up", "GOOGLE_APPLICATION_CREDENTIALS": "/run/op/gcp-credentials.json",
		"AZURE_FEDERATED_TOKEN_FILE": "/run/op/azure-token", "AZURE_CLIENT_ID": "c", "ARM_OIDC_TOKEN_FILE_PATH": "/run/op/azure-token",
		"ARM_USE_OIDC": "true", "VAULT_JWT_FILE": "/run/op/token",
	}
	for k, v := range want {
		if set.Env[k] != v {
			t.Errorf("%s=%q, want %q", k, set.Env[k], v)
		}
	}
	auds := map[string]string{AWSTokenFile: AWSAudience, AzureTokenFile: AzureAudience, TokenFile: "vault",
		GCPTokenFile: "//iam.googleapis.com/projects/1/locations/global/workloadIdentityPools/pool/providers/prov"}
	for file, aud := range auds {
		std, _, err := verify(t, i, string(set.Files[file]), c.t)
		if err != nil || !std.Audience.Contains(aud) || len(std.Audience) != 1 {
			t.Errorf("%s: audience %v, want %s (%v)", file, std.Audience, aud, err)
		}
		if !strings.Contains(strings.Join(set.Secrets, " "), string(set.Files[file])) {
			t.Errorf("%s: the token is not among the secrets to mask", file)
		}
	}
	if !strings.Contains(string(set.Files[GCPConfigFile]), `"file": "/run/op/gcp-token"`) ||
		!strings.Contains(string(set.Files[GCPConfigFile]), "w@p.iam.gserviceaccount.com:generateAccessToken") {
		t.Errorf("gcp credentials file:\n%s", set.Files[GCPConfigFile])
	}
	if !set.Expires.Equal(c.t.Add(5 * time.Minute)) {
		t.Errorf("expires %v", set.Expires)
	}
	// Read scope takes the read role and client.
	req.Scope, req.Operation = model.ScopeRead, model.UpdatePreview
	req.Credentials.GCP.ReadServiceAccount = "r@p.iam.gserviceaccount.com"
	set, _ = i.Credentials(req, "/run/op", time.Minute)
	if set.Env["AWS_ROLE_ARN"] != "arn:aws:iam::123456789012:role/read" || set.Env["AZURE_CLIENT_ID"] != "rc" {
		t.Errorf("read scope: %v", set.Env)
	}
	if !strings.Contains(string(set.Files[GCPConfigFile]), "r@p.iam.gserviceaccount.com:generateAccessToken") {
		t.Errorf("read scope does not impersonate readServiceAccount:\n%s", set.Files[GCPConfigFile])
	}
	// Without a read role, the write role is asked: its trust policy
	// refuses a read token, or lets it in, as it says.
	req.Credentials.AWS.ReadRoleArn = ""
	if set, _ = i.Credentials(req, "/run/op", time.Minute); set.Env["AWS_ROLE_ARN"] != "arn:aws:iam::123456789012:role/write" {
		t.Errorf("read scope without readRoleArn: %v", set.Env["AWS_ROLE_ARN"])
	}
}

func BenchmarkMint(b *testing.B) {
	i, err := New(context.Background(), Options{URL: "https://stackd.example.com", Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := i.Mint(upReq, AWSAudience, 10*time.Minute); err != nil {
			b.Fatal(err)
		}
	}
}

// memDirectory is a Directory in memory that can be made to fail.
type memDirectory struct {
	mu    sync.Mutex
	keys  map[string][]byte
	until map[string]time.Time
	fail  error
	puts  int
	reads int
}

func newMemDirectory() *memDirectory {
	return &memDirectory{keys: map[string][]byte{}, until: map[string]time.Time{}}
}

func (d *memDirectory) PublishKey(_ context.Context, kid string, jwk []byte, until time.Time) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.fail != nil {
		return d.fail
	}
	d.keys[kid], d.until[kid] = jwk, until
	d.puts++
	return nil
}

func (d *memDirectory) WithdrawKey(_ context.Context, kid string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.fail != nil {
		return d.fail
	}
	delete(d.keys, kid)
	return nil
}

func (d *memDirectory) PublishedKeys(context.Context) ([][]byte, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.reads++
	if d.fail != nil {
		return nil, d.fail
	}
	var out [][]byte
	for _, k := range d.keys {
		out = append(out, k)
	}
	return out, nil
}

func (d *memDirectory) setFail(err error) {
	d.mu.Lock()
	d.fail = err
	d.mu.Unlock()
}

// TestDirectoryFailures: a rotation whose new key cannot be listed
// changes nothing (the current key signs on); the JWKS still lists this
// replica's keys while the Directory cannot be read; an emergency drops
// the retired keys too, and withdraws them once the Directory is back.
func TestDirectoryFailures(t *testing.T) {
	c := &clock{time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	dir := newMemDirectory()
	i := newIssuer(t, c, func(o *Options) { o.Directory = dir })
	first := i.current().ID
	if _, err := i.Rotate(context.Background(), false); err != nil {
		t.Fatal(err)
	}
	retired := first
	dir.setFail(errors.New("etcd is down"))
	if _, err := i.Rotate(context.Background(), false); err == nil {
		t.Fatal("a rotation whose key could not be listed succeeded")
	}
	tok, _, err := i.Mint(upReq, "aud", time.Minute)
	if err != nil {
		t.Fatalf("after a failed rotation: %v", err)
	}
	i.dropCache()
	if _, _, err := verify(t, i, tok, c.t); err != nil {
		t.Fatalf("the JWKS while the Directory is down: %v", err)
	}
	// An emergency while the Directory is down: every earlier key goes
	// here at once, and from the Directory once it is back.
	if _, err := i.Rotate(context.Background(), true); err == nil {
		t.Fatal("an emergency rotation whose key could not be listed succeeded")
	}
	dir.setFail(nil)
	if _, err := i.Rotate(context.Background(), true); err != nil {
		t.Fatal(err)
	}
	if _, _, err := verify(t, i, tok, c.t); err == nil {
		t.Error("a token of a key dropped in an emergency validated")
	}
	dir.mu.Lock()
	_, stillRetired := dir.keys[retired]
	n := len(dir.keys)
	dir.mu.Unlock()
	if stillRetired || n != 1 {
		t.Errorf("the Directory lists %d keys after an emergency (the retired one: %v), want only the new one", n, stillRetired)
	}
	// The current key is listed again every few minutes.
	dir.mu.Lock()
	puts := dir.puts
	dir.mu.Unlock()
	c.t = c.t.Add(6 * time.Minute)
	if err := i.Maintain(context.Background()); err != nil {
		t.Fatal(err)
	}
	dir.mu.Lock()
	defer dir.mu.Unlock()
	if dir.puts != puts+1 || dir.until[i.current().ID].Sub(c.t) != DefaultTokenTTL+publishMargin {
		t.Errorf("the current key was not listed again: puts %d→%d, until %v", puts, dir.puts, dir.until[i.current().ID])
	}
}

// TestJWKSReadsDirectoryBounded: anyone may ask for the JWKS, without a
// token, from the internet: whether the Directory answers or fails, it is
// read at most once every cacheLife (a failure logged as often), never
// once per request.
func TestJWKSReadsDirectoryBounded(t *testing.T) {
	c := &clock{time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	dir := newMemDirectory()
	i := newIssuer(t, c, func(o *Options) { o.Directory = dir })
	reads := func() int {
		dir.mu.Lock()
		defer dir.mu.Unlock()
		return dir.reads
	}
	for _, fail := range []error{nil, errors.New("etcd is down")} {
		dir.setFail(fail)
		c.t = c.t.Add(time.Minute)
		before := reads()
		for range 100 {
			if _, err := i.JWKS(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		if n := reads() - before; n != 1 {
			t.Errorf("100 requests for the JWKS (Directory failing: %v) read the Directory %d times, want 1", fail != nil, n)
		}
	}
}
