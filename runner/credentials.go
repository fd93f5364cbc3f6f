package runner

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/stackd/stackd/daemon/model"
	"github.com/stackd/stackd/daemon/spec"
)

// Identity makes an operation's cloud credentials (spec.credentials):
// the identity package's Issuer implements it.
type Identity interface {
	// Credentials mints req's tokens, living at most ttl, for files in
	// dir.
	Credentials(req model.IdentityRequest, dir string, ttl time.Duration) (model.CredentialSet, error)
	// Rotated is closed when the signing key changes.
	Rotated() <-chan struct{}
}

// CredentialsDir, in the data dir, holds a directory per running
// operation with credentials: only that operation's processes may read
// it (see Access), and it goes with the operation.
const CredentialsDir = "credentials"

// ErrNoIssuer is returned for an operation of a stack with
// spec.credentials when the daemon signs no tokens.
var ErrNoIssuer = errors.New("spec.credentials needs the daemon's --oidc-issuer-url")

// scopeOf is the scope of op's token: read for what changes nothing
// (previews, pull requests' previews, drift checks, a destroy's
// preview), write for what applies. It is the runner's decision alone,
// from what the operation runs.
func scopeOf(op model.Operation) string {
	if op.ReadOnly || op.PreviewOnly || op.Type == model.UpdatePreview || op.Type == model.UpdateDrift {
		return model.ScopeRead
	}
	return model.ScopeWrite
}

// operationName is op's operation claim.
func operationName(op model.Operation) string {
	if op.PreviewOnly {
		return op.Type + "-preview"
	}
	return op.Type
}

// opCredentials are the credentials of one running operation: a
// directory of their own, which the operation's processes may read and
// nothing else, and the variables that point into it.
type opCredentials struct {
	dir string
	env []string
	// stop ends the renewal and removes the files.
	stop func()
}

// credentials writes op's credentials, when its stack asks for any, and
// renews them until stop is called: before the first token expires, and
// at once when the signing key changes. The tokens are masked in w's
// log and outputs. nil when the stack asks for none.
func (r *Runner) credentials(ctx context.Context, w *workspace, op model.Operation) (*opCredentials, error) {
	if op.Identity == nil || !op.Identity.Credentials.Any() {
		return nil, nil
	}
	if r.opts.Identity == nil {
		return nil, fmt.Errorf("stack %s: %w", w.Name, ErrNoIssuer)
	}
	req := *op.Identity
	req.Stack, req.Operation, req.Scope, req.ReadOnly = w.Name, operationName(op), scopeOf(op), op.ReadOnly
	base := filepath.Join(r.opts.DataDir, CredentialsDir)
	if err := os.MkdirAll(base, 0o700); err != nil {
		return nil, fmt.Errorf("stack %s: credentials: %w", w.Name, err)
	}
	dir, err := os.MkdirTemp(base, "op-")
	if err != nil {
		return nil, fmt.Errorf("stack %s: credentials: %w", w.Name, err)
	}
	// A token lives no longer than what is left of the operation's time,
	// a renewed one too.
	ttl := func() time.Duration { return r.opts.Timeout }
	if deadline, ok := ctx.Deadline(); ok {
		ttl = func() time.Duration { return max(time.Second, time.Until(deadline)) }
	}
	issue := func() (model.CredentialSet, error) {
		set, err := r.opts.Identity.Credentials(req, dir, ttl())
		if err != nil {
			return set, fmt.Errorf("stack %s: credentials: %w", w.Name, err)
		}
		w.redact.add(set.Secrets...)
		r.tokens.add(w.Name, set.Secrets, set.Expires)
		return set, writeCredentials(dir, set)
	}
	rotated := r.opts.Identity.Rotated() // before the tokens: no rotation is missed
	set, err := issue()
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	c := &opCredentials{dir: dir}
	for k, v := range set.Env {
		if spec.ReservedCredentialEnv(k) && !spec.CloudCredentialEnv(k) { // a cloud's may override the stack's own
			r.log.Warn("a credentials variable may not set what the runner sets: left out", "stack", w.Name, "name", k)
			continue
		}
		c.env = append(c.env, k+"="+v)
	}
	sort.Strings(c.env)
	renewCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.renewCredentials(renewCtx, w, set.Expires, rotated, issue)
	}()
	c.stop = func() {
		cancel()
		<-done
		_ = os.RemoveAll(dir)
	}
	return c, nil
}

// tokenLeeway is how long past its expiry a token is still masked: a
// relying party may accept it that much later, its clock behind ours.
const tokenLeeway = 5 * time.Minute

// mintedTokens remembers the secrets of the tokens the runner made for
// each stack until they expire. A program that passes its token to an
// input or an output leaves it in the state, and the next operation's
// diff shows it as the old value (to a pull request's comment too):
// every operation of the stack masks the tokens of its earlier
// operations that may still be good, as it masks its own. A restart
// forgets them, as does another replica of a cluster.
type mintedTokens struct {
	mu      sync.Mutex
	byStack map[string][]mintedToken
}

type mintedToken struct {
	secrets []string
	until   time.Time
}

// add remembers secrets, of tokens of stack expiring at expires, and
// forgets the expired tokens of every stack (one removed from the config,
// a review stack destroyed, is not asked again).
func (m *mintedTokens) add(stack string, secrets []string, expires time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.byStack == nil {
		m.byStack = map[string][]mintedToken{}
	}
	now := time.Now()
	for s := range m.byStack {
		if kept := m.live(s, now); len(kept) > 0 {
			m.byStack[s] = kept
		} else {
			delete(m.byStack, s)
		}
	}
	m.byStack[stack] = append(m.byStack[stack], mintedToken{secrets: secrets, until: expires.Add(tokenLeeway)})
}

// secrets are the secrets of stack's tokens that may still be good.
func (m *mintedTokens) secrets(stack string) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	kept := m.live(stack, time.Now())
	if len(kept) == 0 {
		delete(m.byStack, stack)
	} else {
		m.byStack[stack] = kept
	}
	var out []string
	for _, t := range kept {
		out = append(out, t.secrets...)
	}
	return out
}

// live are stack's tokens unexpired at now. Called with mu held.
func (m *mintedTokens) live(stack string, now time.Time) []mintedToken {
	return slices.DeleteFunc(m.byStack[stack], func(t mintedToken) bool { return !now.Before(t.until) })
}

// renewCredentials makes the credentials anew when two thirds of their
// life passed, or the signing key changed (rotated is closed), until ctx
// ends. The clouds' SDKs read the token file again when their session
// ends.
func (r *Runner) renewCredentials(ctx context.Context, w *workspace, expires time.Time, rotated <-chan struct{},
	issue func() (model.CredentialSet, error),
) {
	for {
		wait := max(time.Second, time.Until(expires)*2/3)
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-rotated:
		case <-timer.C:
		}
		timer.Stop()
		rotated = r.opts.Identity.Rotated()
		set, err := issue()
		if err != nil {
			r.log.Warn("cannot renew the operation's credentials", "stack", w.Name, "err", err)
			expires = time.Now().Add(3 * time.Second) // try again soon
			continue
		}
		expires = set.Expires
	}
}

// writeCredentials puts set's files in dir, each replaced whole: a
// process reading one while it is renewed reads the old token or the
// new one.
func writeCredentials(dir string, set model.CredentialSet) error {
	for name, data := range set.Files {
		if name != filepath.Base(name) || name == "." || name == ".." {
			return fmt.Errorf("credentials: %q is not a file name", name)
		}
		tmp, err := os.CreateTemp(dir, "."+name+"-")
		if err != nil {
			return fmt.Errorf("credentials: %w", err)
		}
		_, err = tmp.Write(data)
		if cerr := tmp.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			err = os.Rename(tmp.Name(), filepath.Join(dir, name))
		}
		if err != nil {
			_ = os.Remove(tmp.Name())
			return fmt.Errorf("credentials: %w", err)
		}
	}
	return nil
}
