package runner

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stackd/stackd/daemon/model"
	"github.com/stackd/stackd/daemon/spec"
)

func TestScopeOf(t *testing.T) {
	for _, c := range []struct {
		op   model.Operation
		want string
	}{
		{model.Operation{Type: model.UpdateUp}, model.ScopeWrite},
		{model.Operation{Type: model.UpdateRefresh}, model.ScopeWrite},
		{model.Operation{Type: model.UpdateDestroy}, model.ScopeWrite},
		{model.Operation{Type: model.UpdatePreview}, model.ScopeRead},
		{model.Operation{Type: model.UpdateDrift}, model.ScopeRead},
		{model.Operation{Type: model.UpdateDestroy, PreviewOnly: true}, model.ScopeRead},
		// A pull request's preview, whatever type it was given.
		{model.Operation{Type: model.UpdateUp, ReadOnly: true}, model.ScopeRead},
	} {
		if got := scopeOf(c.op); got != c.want {
			t.Errorf("%+v: scope %s, want %s", c.op, got, c.want)
		}
	}
	if got := operationName(model.Operation{Type: model.UpdateDestroy, PreviewOnly: true}); got != "destroy-preview" {
		t.Errorf("a destroy's preview is named %q", got)
	}
}

// countingIdentity makes a new token each call, living ttl.
type countingIdentity struct {
	mu      sync.Mutex
	calls   int
	reqs    []model.IdentityRequest
	ttls    []time.Duration // asked for
	ttl     time.Duration
	rotated chan struct{}
}

func (c *countingIdentity) Credentials(req model.IdentityRequest, dir string, ttl time.Duration) (model.CredentialSet, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls++
	c.ttls = append(c.ttls, ttl)
	c.reqs = append(c.reqs, req)
	tok := fmt.Sprintf("token-number-%d", c.calls)
	return model.CredentialSet{Files: map[string][]byte{"token": []byte(tok)}, Env: map[string]string{"TOKEN_FILE": filepath.Join(dir, "token")},
		Secrets: []string{tok}, Expires: time.Now().Add(c.ttl)}, nil
}

func (c *countingIdentity) Rotated() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.rotated
}

// rotate closes the channel, as the issuer does on a rotation.
func (c *countingIdentity) rotate() {
	c.mu.Lock()
	defer c.mu.Unlock()
	close(c.rotated)
	c.rotated = make(chan struct{})
}

// TestCredentialsRenewed: the runner decides the stack, operation and
// scope claims whatever the request says; the token file is rewritten
// when the signing key rotates, and each new token is masked; stop
// removes the directory.
func TestCredentialsRenewed(t *testing.T) {
	id := &countingIdentity{ttl: time.Hour, rotated: make(chan struct{})}
	r := &Runner{opts: Options{DataDir: t.TempDir(), Identity: id, Timeout: time.Minute}, log: slog.New(slog.DiscardHandler)}
	w := &workspace{Workspace: model.Workspace{Name: "net"}, redact: newRedactor(nil)}
	op := model.Operation{Type: model.UpdatePreview, Identity: &model.IdentityRequest{Stack: "someone-else", Scope: model.ScopeWrite,
		Operation: "up", Credentials: spec.Credentials{Token: &spec.TokenCredentials{Audience: "a", Env: "TOKEN_FILE"}}}}
	c, err := r.credentials(context.Background(), w, op)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(c.dir, "token")
	if got, _ := os.ReadFile(file); string(got) != "token-number-1" || c.env[0] != "TOKEN_FILE="+file {
		t.Fatalf("file %q env %v", got, c.env)
	}
	if req := id.reqs[0]; req.Stack != "net" || req.Scope != model.ScopeRead || req.Operation != model.UpdatePreview {
		t.Errorf("the request's claims were not the runner's: %+v", req)
	}
	id.rotate()
	deadline := time.Now().Add(10 * time.Second)
	for got, _ := os.ReadFile(file); string(got) != "token-number-2"; got, _ = os.ReadFile(file) {
		if time.Now().After(deadline) {
			t.Fatalf("the token was not renewed on a rotation: %q", got)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got := w.redact.Replace("a token-number-1 b token-number-2"); strings.Contains(got, "token-number") {
		t.Errorf("the tokens are not masked: %q", got)
	}
	c.stop()
	if _, err := os.Stat(c.dir); !os.IsNotExist(err) {
		t.Errorf("the credentials outlive their operation: %v", err)
	}
}

// TestCredentialsRenewedBeforeExpiry: a token is made anew once two
// thirds of its life passed, before it expires.
func TestCredentialsRenewedBeforeExpiry(t *testing.T) {
	id := &countingIdentity{ttl: 1500 * time.Millisecond, rotated: make(chan struct{})}
	r := &Runner{opts: Options{DataDir: t.TempDir(), Identity: id, Timeout: time.Minute}, log: slog.New(slog.DiscardHandler)}
	w := &workspace{Workspace: model.Workspace{Name: "net"}, redact: newRedactor(nil)}
	op := model.Operation{Type: model.UpdateUp, Identity: &model.IdentityRequest{Credentials: spec.Credentials{Token: &spec.TokenCredentials{Audience: "a", Env: "T"}}}}
	c, err := r.credentials(context.Background(), w, op)
	if err != nil {
		t.Fatal(err)
	}
	defer c.stop()
	deadline := time.Now().Add(20 * time.Second)
	for {
		id.mu.Lock()
		calls := id.calls
		id.mu.Unlock()
		if calls >= 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d tokens made in 20 s of 1.5 s tokens", calls)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestCredentialsRenewedWithinDeadline: a token made anew lives no longer
// than what is left of the operation's time, as the first one: a token
// of an operation that ended may not stay good longer than the operation
// could have run.
func TestCredentialsRenewedWithinDeadline(t *testing.T) {
	id := &countingIdentity{ttl: time.Hour, rotated: make(chan struct{})}
	r := &Runner{opts: Options{DataDir: t.TempDir(), Identity: id, Timeout: time.Minute}, log: slog.New(slog.DiscardHandler)}
	w := &workspace{Workspace: model.Workspace{Name: "net"}, redact: newRedactor(nil)}
	op := model.Operation{Type: model.UpdateUp, Identity: &model.IdentityRequest{Credentials: spec.Credentials{Token: &spec.TokenCredentials{Audience: "a", Env: "T"}}}}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
	defer cancel()
	c, err := r.credentials(ctx, w, op)
	if err != nil {
		t.Fatal(err)
	}
	defer c.stop()
	time.Sleep(2 * time.Second)
	id.rotate()
	deadline := time.Now().Add(10 * time.Second)
	for {
		id.mu.Lock()
		ttls := slices.Clone(id.ttls)
		id.mu.Unlock()
		if len(ttls) >= 2 {
			if ttls[1] > 2*time.Second+500*time.Millisecond {
				t.Errorf("the token made 2 s into a 4 s operation lives %v", ttls[1])
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the token was not renewed on a rotation")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestCredentialsNeedIssuer(t *testing.T) {
	r := &Runner{opts: Options{DataDir: t.TempDir()}, log: slog.New(slog.DiscardHandler)}
	w := &workspace{Workspace: model.Workspace{Name: "net"}, redact: newRedactor(nil)}
	op := model.Operation{Type: model.UpdateUp, Identity: &model.IdentityRequest{Credentials: spec.Credentials{Token: &spec.TokenCredentials{Audience: "a", Env: "T"}}}}
	if _, err := r.credentials(context.Background(), w, op); err == nil || !strings.Contains(err.Error(), "--oidc-issuer-url") {
		t.Errorf("without an issuer: %v", err)
	}
	if c, err := r.credentials(context.Background(), w, model.Operation{Type: model.UpdateUp}); c != nil || err != nil {
		t.Errorf("a stack without credentials: %v %v", c, err)
	}
}

// reservedIdentity sets, beside a token, what only the runner sets.
type reservedIdentity struct{ countingIdentity }

func (r *reservedIdentity) Credentials(req model.IdentityRequest, dir string, ttl time.Duration) (model.CredentialSet, error) {
	set, err := r.countingIdentity.Credentials(req, dir, ttl)
	set.Env["PULUMI_BACKEND_URL"], set.Env["LD_PRELOAD"], set.Env["AWS_ROLE_ARN"] = "file:///elsewhere", dir+"/token", "arn"
	return set, err
}

// TestCredentialsNeverSetRunnerVariables: whatever an Identity returns,
// the operation's environment never gets a credentials variable that
// the runner sets or the dynamic linker reads; the clouds' own pass.
func TestCredentialsNeverSetRunnerVariables(t *testing.T) {
	id := &reservedIdentity{countingIdentity{ttl: time.Hour, rotated: make(chan struct{})}}
	r := &Runner{opts: Options{DataDir: t.TempDir(), Identity: id, Timeout: time.Minute}, log: slog.New(slog.DiscardHandler)}
	w := &workspace{Workspace: model.Workspace{Name: "net"}, redact: newRedactor(nil)}
	op := model.Operation{Type: model.UpdateUp, Identity: &model.IdentityRequest{Credentials: spec.Credentials{Token: &spec.TokenCredentials{Audience: "a", Env: "T"}}}}
	c, err := r.credentials(context.Background(), w, op)
	if err != nil {
		t.Fatal(err)
	}
	defer c.stop()
	got := strings.Join(c.env, " ")
	if strings.Contains(got, "PULUMI_BACKEND_URL") || strings.Contains(got, "LD_PRELOAD") || !strings.Contains(got, "AWS_ROLE_ARN=arn") {
		t.Errorf("environment %v", c.env)
	}
}

func TestWriteCredentialsNames(t *testing.T) {
	for _, name := range []string{"../escape", "a/b", ".", ".."} {
		if err := writeCredentials(t.TempDir(), model.CredentialSet{Files: map[string][]byte{name: nil}}); err == nil {
			t.Errorf("file name %q accepted", name)
		}
	}
}

// TestMintedTokensUntilExpiry: the runner masks a stack's earlier tokens
// until they expired (and the leeway passed), those of its stack only.
func TestMintedTokensUntilExpiry(t *testing.T) {
	var m mintedTokens
	now := time.Now()
	m.add("a", []string{"old-token", "old-sig"}, now.Add(-tokenLeeway-time.Second))
	m.add("a", []string{"live-token", "live-sig"}, now.Add(time.Minute))
	m.add("a", []string{"late-token"}, now.Add(-time.Second)) // expired, in the leeway
	m.add("b", []string{"b-token"}, now.Add(time.Minute))
	if got := strings.Join(m.secrets("a"), ","); got != "live-token,live-sig,late-token" {
		t.Errorf("a's tokens: %s", got)
	}
	if got := strings.Join(m.secrets("b"), ","); got != "b-token" {
		t.Errorf("b's tokens: %s", got)
	}
	if got := m.secrets("c"); len(got) != 0 {
		t.Errorf("c's tokens: %v", got)
	}
	// A stack never asked again (removed, a review stack destroyed) does
	// not keep its expired tokens.
	m.add("gone", []string{"gone-token"}, now.Add(-tokenLeeway-time.Second))
	m.add("d", []string{"d-token"}, now.Add(time.Minute))
	if _, ok := m.byStack["gone"]; ok {
		t.Error("the expired tokens of a stack not asked again are kept")
	}
}

// TestCredentialsLeftByACrashRemoved: the token files of an operation
// that a crash interrupted are removed when the runner starts.
func TestCredentialsLeftByACrashRemoved(t *testing.T) {
	dataDir := t.TempDir()
	left := filepath.Join(dataDir, CredentialsDir, "op-123")
	if err := os.MkdirAll(left, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(left, "token"), []byte("eyJ.eyJ.sig"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := &Runner{opts: Options{DataDir: dataDir, DefaultBackend: "file://" + filepath.Join(dataDir, "backend")}, log: slog.New(slog.DiscardHandler)}
	if err := r.prepareDataDir(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(left); !os.IsNotExist(err) {
		t.Errorf("the credentials a crash left are still there: %v", err)
	}
}
