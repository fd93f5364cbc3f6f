package auth

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/stackd/stackd/daemon/access"
	"github.com/stackd/stackd/daemon/model"
)

// SessionKeyFile is the file in the data dir that holds the session key
// when no --session-key-file is given.
const SessionKeyFile = "session.key"

// DefaultSessionTTL is how long a session lasts unless configured.
const DefaultSessionTTL = 12 * time.Hour

const (
	// keySize is the size of a session key, in bytes.
	keySize = 32
	// maxCookie bounds a cookie value that is looked at: more is not ours.
	maxCookie = 4096
	// maxGroupBytes bounds the groups kept in a session cookie (their
	// names' total length), so that it fits a browser's 4 KiB per cookie.
	maxGroupBytes = 1500
	// clockSkew is how far in the future a cookie's issue time may be: a
	// replica whose clock is a little ahead signed it.
	clockSkew = time.Minute
)

// Prefixes name a signed value's kind and format version. Each kind is
// signed with its own key derived from the session key, so that one can
// never pass for another.
const (
	sessionPrefix = "s1."
	flowPrefix    = "f1."
	// tokenSessionPrefix is a session of a token sign-in: a kind of its
	// own, so that it never reads as a user's session (a replica that
	// does not know it refuses it).
	tokenSessionPrefix = "t1."
)

// LoadSessionKey returns the key that signs session and sign-in flow
// cookies. With keyFile (--session-key-file) it is that file's: 64 or
// more hex digits, e.g. from `openssl rand -hex 32`. In a cluster every
// replica must be given the same file, or a session signed by one is
// refused by the others. Without it, the key is <dataDir>/session.key,
// generated on the first start (32 random bytes, hex, mode 0600; the
// file appears whole or not at all) and kept. Deleting the file and
// restarting signs everyone out.
func LoadSessionKey(dataDir, keyFile string) ([]byte, error) {
	if keyFile != "" {
		key, err := readKey(keyFile)
		if err != nil {
			return nil, fmt.Errorf("--session-key-file: %w", err)
		}
		return key, nil
	}
	path := filepath.Join(dataDir, SessionKeyFile)
	key, err := readKey(path)
	if !errors.Is(err, fs.ErrNotExist) {
		return key, err
	}
	raw := make([]byte, keySize)
	if _, err := rand.Read(raw); err != nil {
		return nil, err
	}
	if err := createFileAtomic(path, []byte(hex.EncodeToString(raw)+"\n")); errors.Is(err, fs.ErrExist) {
		return readKey(path) // another process made it first
	} else if err != nil {
		return nil, fmt.Errorf("session key: %w", err)
	}
	return raw, nil
}

// readKey reads a hex key file.
func readKey(path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	key, err := hex.DecodeString(strings.TrimSpace(string(data)))
	if err != nil || len(key) < keySize {
		return nil, fmt.Errorf("%s: expected at least %d hex digits (openssl rand -hex %d)", path, 2*keySize, keySize)
	}
	return key, nil
}

// createFileAtomic writes data to a temporary file of mode 0600 beside
// path and links it to path, so that path appears whole or not at all:
// fs.ErrExist when path exists.
func createFileAtomic(path string, data []byte) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	_, err = f.Write(data) // CreateTemp made it with mode 0600
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if err := os.Link(f.Name(), path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return err
		}
		// A file system without hard links: a rename, which would replace
		// a file made in between.
		if _, serr := os.Lstat(path); serr == nil {
			return fs.ErrExist
		}
		if err := os.Rename(f.Name(), path); err != nil {
			return err
		}
	}
	if d, err := os.Open(dir); err == nil { // make the new name durable
		_ = d.Sync()
		d.Close()
	}
	return nil
}

// signer signs and checks values of one kind, with a key derived from
// the session key for that kind.
type signer struct {
	prefix string
	key    []byte
}

func newSigner(master []byte, prefix string) *signer {
	if len(master) == 0 {
		return nil
	}
	m := hmac.New(sha256.New, master)
	m.Write([]byte("stackd cookie key " + prefix))
	return &signer{prefix: prefix, key: m.Sum(nil)}
}

// sign encodes v as prefix + base64(JSON) + "." + base64(HMAC-SHA256).
func (s *signer) sign(v any) (string, error) {
	payload, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	body := s.prefix + base64.RawURLEncoding.EncodeToString(payload)
	return body + "." + base64.RawURLEncoding.EncodeToString(s.mac(body)), nil
}

func (s *signer) mac(body string) []byte {
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte(body))
	return m.Sum(nil)
}

// open checks value's signature in constant time and decodes it into v.
// Errors wrap access.ErrUnauthenticated and never quote the value.
func (s *signer) open(value string, v any) error {
	if s == nil {
		return fmt.Errorf("no session key is configured: %w", access.ErrUnauthenticated)
	}
	if len(value) > maxCookie || !strings.HasPrefix(value, s.prefix) {
		return fmt.Errorf("not a cookie of this kind or version: %w", access.ErrUnauthenticated)
	}
	// The prefix ends in a dot; the signature follows the last one.
	i := strings.LastIndexByte(value, '.')
	if i < len(s.prefix) {
		return fmt.Errorf("malformed cookie: %w", access.ErrUnauthenticated)
	}
	body := value[:i]
	// Strict: a signature has one spelling only. A lenient decoder
	// ignores the unused low bits of the last character, so that a
	// cookie with that character changed would still pass.
	mac, err := base64.RawURLEncoding.Strict().DecodeString(value[i+1:])
	if err != nil || !hmac.Equal(mac, s.mac(body)) {
		return fmt.Errorf("bad signature (another key, or altered): %w", access.ErrUnauthenticated)
	}
	payload, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(body, s.prefix))
	if err == nil {
		err = json.Unmarshal(payload, v)
	}
	if err != nil {
		return fmt.Errorf("malformed cookie: %w", access.ErrUnauthenticated)
	}
	return nil
}

// sessionClaims is what a session cookie holds: who signed in, and when
// it ends. Roles are not in it: they come from the roles file in force.
type sessionClaims struct {
	Name    string   `json:"n"`
	Subject string   `json:"sub,omitempty"`
	Groups  []string `json:"g,omitempty"`
	Issued  int64    `json:"iat"`
	Expires int64    `json:"exp"`
}

// newSession signs a session for p, a user, lasting ttl from now.
func newSession(s *signer, p model.Principal, now time.Time, ttl time.Duration) (string, error) {
	if s == nil {
		return "", errors.New("no session key is configured")
	}
	return s.sign(sessionClaims{Name: p.Name, Subject: p.Subject, Groups: p.Groups,
		Issued: now.Unix(), Expires: now.Add(ttl).Unix()})
}

// openSession checks a session cookie's signature, format and times.
func openSession(s *signer, value string, now time.Time) (model.Principal, error) {
	var c sessionClaims
	if err := s.open(value, &c); err != nil {
		return anonymous, fmt.Errorf("session: %w", err)
	}
	switch {
	case c.Name == "" || c.Issued == 0 || c.Expires == 0:
		return anonymous, fmt.Errorf("session: malformed cookie: %w", access.ErrUnauthenticated)
	case !now.Before(time.Unix(c.Expires, 0)):
		return anonymous, fmt.Errorf("session of %s expired at %s: sign in again: %w", c.Name, time.Unix(c.Expires, 0).UTC().Format(time.RFC3339), access.ErrUnauthenticated)
	case time.Unix(c.Issued, 0).After(now.Add(clockSkew)):
		return anonymous, fmt.Errorf("session: issued in the future: %w", access.ErrUnauthenticated)
	}
	return model.Principal{Kind: model.PrincipalUser, Name: c.Name, Subject: c.Subject, Groups: c.Groups}, nil
}

var anonymous = model.Principal{Kind: model.PrincipalAnonymous}

// sessionGroups chooses the groups a session keeps: all of them when they
// fit the cookie, else those the policy binds to a role, as many as fit.
// The second result says whether some were left out.
func sessionGroups(groups []string, pol *Policy) ([]string, bool) {
	if size(groups) <= maxGroupBytes {
		return groups, false
	}
	var kept []string
	total := 0
	for _, g := range groups {
		if pol.bindsGroup(g) && total+len(g)+3 <= maxGroupBytes {
			kept = append(kept, g)
			total += len(g) + 3
		}
	}
	return kept, true
}

// size is about what groups take in a cookie's JSON: each name, quoted,
// and a comma.
func size(groups []string) int {
	n := 0
	for _, g := range groups {
		n += len(g) + 3
	}
	return n
}

// SessionHolder reads the name and the end of a session value without
// checking its signature: for a client to show whom the session it was
// given names (only the daemon can tell whether it is valid). ok is
// false when value is not a session.
func SessionHolder(value string) (name string, expires time.Time, ok bool) {
	body, _, found := strings.Cut(strings.TrimPrefix(value, sessionPrefix), ".")
	if !found || !strings.HasPrefix(value, sessionPrefix) {
		return "", time.Time{}, false
	}
	payload, err := base64.RawURLEncoding.DecodeString(body)
	var c sessionClaims
	if err != nil || json.Unmarshal(payload, &c) != nil || c.Name == "" {
		return "", time.Time{}, false
	}
	return c.Name, time.Unix(c.Expires, 0), true
}
