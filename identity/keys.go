package identity

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/go-jose/go-jose/v4"
)

// KeyFile is the file, in the issuer's directory, that holds its signing
// keys (mode 0600): the current one and those retired whose tokens may
// still be alive.
const KeyFile = "signing-keys.json"

// keyBits is the size of the RSA keys: RS256 with 2048-bit keys is what
// every cloud's token exchange accepts.
const keyBits = 2048

// key is one signing key. A key signs from Created until it is Retired
// (zero while current); it is published until Retired plus the longest
// token lifetime, so that the last token it signed still validates.
type key struct {
	ID      string
	Created time.Time
	Retired time.Time
	private *rsa.PrivateKey
	signer  jose.Signer
}

// storedKey is a key in KeyFile.
type storedKey struct {
	ID      string    `json:"kid"`
	Created time.Time `json:"created"`
	Retired time.Time `json:"retired,omitzero"`
	PKCS8   string    `json:"pkcs8"`
}

// newKey generates a key, created at now.
func newKey(now time.Time) (*key, error) {
	priv, err := rsa.GenerateKey(rand.Reader, keyBits)
	if err != nil {
		return nil, fmt.Errorf("generate a signing key: %w", err)
	}
	return loadedKey(priv, now, time.Time{})
}

// loadedKey makes a key of priv: its ID is the RFC 7638 thumbprint of
// its public half.
func loadedKey(priv *rsa.PrivateKey, created, retired time.Time) (*key, error) {
	thumb, err := (&jose.JSONWebKey{Key: priv.Public()}).Thumbprint(crypto.SHA256)
	if err != nil {
		return nil, fmt.Errorf("signing key: thumbprint: %w", err)
	}
	k := &key{ID: base64.RawURLEncoding.EncodeToString(thumb), Created: created, Retired: retired, private: priv}
	k.signer, err = jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: jose.JSONWebKey{Key: priv, KeyID: k.ID}},
		(&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		return nil, fmt.Errorf("signing key: %w", err)
	}
	return k, nil
}

// public is k's public half as a JWK.
func (k *key) public() jose.JSONWebKey {
	return jose.JSONWebKey{Key: k.private.Public(), KeyID: k.ID, Algorithm: string(jose.RS256), Use: "sig"}
}

// publishedUntil is when k leaves the JWKS: never while current, else
// once its last token expired.
func (k *key) publishedUntil(maxTTL time.Duration) time.Time {
	if k.Retired.IsZero() {
		return time.Time{}
	}
	return k.Retired.Add(maxTTL)
}

// published says whether k is in the JWKS at now: while current, and
// until its last token expired.
func (k *key) published(now time.Time, maxTTL time.Duration) bool {
	until := k.publishedUntil(maxTTL)
	return until.IsZero() || now.Before(until)
}

// loadKeys reads dir's KeyFile; a missing file is no keys and no error.
func loadKeys(dir string) ([]*key, error) {
	path := filepath.Join(dir, KeyFile)
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the signing keys: %w", err)
	}
	var stored []storedKey
	if err := json.Unmarshal(data, &stored); err != nil {
		return nil, fmt.Errorf("read the signing keys %s: %w", path, err)
	}
	var keys []*key
	for _, s := range stored {
		der, err := base64.StdEncoding.DecodeString(s.PKCS8)
		if err != nil {
			return nil, fmt.Errorf("read the signing keys %s: key %s: %w", path, s.ID, err)
		}
		parsed, err := x509.ParsePKCS8PrivateKey(der)
		if err != nil {
			return nil, fmt.Errorf("read the signing keys %s: key %s: %w", path, s.ID, err)
		}
		priv, ok := parsed.(*rsa.PrivateKey)
		if !ok {
			return nil, fmt.Errorf("read the signing keys %s: key %s is not an RSA key", path, s.ID)
		}
		k, err := loadedKey(priv, s.Created, s.Retired)
		if err != nil {
			return nil, err
		}
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b *key) int { return a.Created.Compare(b.Created) })
	return keys, nil
}

// saveKeys writes keys to dir's KeyFile, mode 0600, replacing it whole:
// a crash leaves the old file or the new one.
func saveKeys(dir string, keys []*key) error {
	stored := make([]storedKey, 0, len(keys))
	for _, k := range keys {
		der, err := x509.MarshalPKCS8PrivateKey(k.private)
		if err != nil {
			return fmt.Errorf("save the signing keys: %w", err)
		}
		stored = append(stored, storedKey{ID: k.ID, Created: k.Created, Retired: k.Retired, PKCS8: base64.StdEncoding.EncodeToString(der)})
	}
	data, err := json.MarshalIndent(stored, "", "  ")
	if err != nil {
		return fmt.Errorf("save the signing keys: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("save the signing keys: %w", err)
	}
	tmp, err := os.CreateTemp(dir, KeyFile+".*")
	if err != nil {
		return fmt.Errorf("save the signing keys: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("save the signing keys: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("save the signing keys: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("save the signing keys: %w", err)
	}
	if err := os.Rename(tmp.Name(), filepath.Join(dir, KeyFile)); err != nil {
		return fmt.Errorf("save the signing keys: %w", err)
	}
	return nil
}
