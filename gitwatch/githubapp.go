package gitwatch

import (
	"bytes"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing/transport"

	"github.com/stackd/stackd/daemon/spec"
)

// A GitHub App's credentials are exchanged for an installation token, as
// PKO does: a JWT signed with the app's private key is posted to the
// installation's access_tokens endpoint of GitHub's REST API
// (api.github.com for github.com, https://HOST/api/v3 for GitHub
// Enterprise), and the token it returns (valid for an hour) is used as
// the password of user x-access-token until shortly before it expires.

// appTokenMargin is how long before its expiry a token is exchanged anew.
const appTokenMargin = 5 * time.Minute

type appToken struct {
	token   string
	expires time.Time
}

// appToken returns an installation token of app for the repository at ep.
func (f *Fetcher) appToken(ep *transport.Endpoint, app *spec.GitHubApp) (string, error) {
	api := "https://api.github.com"
	if !strings.EqualFold(ep.Host, "github.com") {
		scheme := "https"
		if ep.Protocol == "http" {
			scheme = "http"
		}
		host := ep.Host
		if ep.Port > 0 {
			host = fmt.Sprintf("%s:%d", ep.Host, ep.Port)
		}
		api = scheme + "://" + host + "/api/v3"
	}
	sum := sha256.Sum256([]byte(api + "\x00" + app.AppID + "\x00" + app.InstallationID + "\x00" + app.PrivateKey))
	key := hex.EncodeToString(sum[:])
	f.mu.Lock()
	cached, ok := f.appTokens[key]
	f.mu.Unlock()
	if ok && time.Until(cached.expires) > appTokenMargin {
		return cached.token, nil
	}
	tok, err := f.exchange(api, app)
	if err != nil {
		return "", fmt.Errorf("github app %s: installation token: %w", app.AppID, err)
	}
	f.mu.Lock()
	f.appTokens[key] = tok
	f.mu.Unlock()
	return tok.token, nil
}

// exchange asks GitHub's API for an installation token.
func (f *Fetcher) exchange(api string, app *spec.GitHubApp) (appToken, error) {
	jwt, err := appJWT(app, time.Now())
	if err != nil {
		return appToken{}, err
	}
	url := api + "/app/installations/" + app.InstallationID + "/access_tokens"
	req, err := http.NewRequest(http.MethodPost, url, nil)
	if err != nil {
		return appToken{}, fmt.Errorf("installation id %q: %w", app.InstallationID, err)
	}
	req.Header.Set("Authorization", "Bearer "+jwt)
	req.Header.Set("Accept", "application/vnd.github+json")
	req.Header.Set("X-GitHub-Api-Version", "2022-11-28")
	client := &http.Client{Timeout: f.opts.Timeout}
	resp, err := client.Do(req)
	if err != nil {
		return appToken{}, err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	var out struct {
		Token     string    `json:"token"`
		ExpiresAt time.Time `json:"expires_at"`
		Message   string    `json:"message"`
	}
	_ = json.Unmarshal(body, &out)
	if resp.StatusCode != http.StatusCreated || out.Token == "" {
		return appToken{}, fmt.Errorf("POST %s: %s %.200s", url, resp.Status, out.Message)
	}
	return appToken{token: out.Token, expires: out.ExpiresAt}, nil
}

// appJWT is the app's JSON web token, as GitHub documents it: RS256,
// issued by the app id, backdated a minute against clock drift, valid
// for nine minutes.
func appJWT(app *spec.GitHubApp, now time.Time) (string, error) {
	block, _ := pem.Decode([]byte(app.PrivateKey))
	if block == nil {
		return "", errors.New("the private key is not PEM")
	}
	var key *rsa.PrivateKey
	if k, err := x509.ParsePKCS1PrivateKey(block.Bytes); err == nil {
		key = k
	} else if k, err := x509.ParsePKCS8PrivateKey(block.Bytes); err == nil {
		key, _ = k.(*rsa.PrivateKey)
	}
	if key == nil {
		return "", errors.New("the private key is not an RSA key (GitHub gives a PEM RSA key)")
	}
	enc := base64.RawURLEncoding
	claims, _ := json.Marshal(map[string]any{"iat": now.Add(-time.Minute).Unix(), "exp": now.Add(9 * time.Minute).Unix(), "iss": app.AppID})
	var b bytes.Buffer
	b.WriteString(enc.EncodeToString([]byte(`{"alg":"RS256","typ":"JWT"}`)) + "." + enc.EncodeToString(claims))
	digest := sha256.Sum256(b.Bytes())
	sig, err := rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, digest[:])
	if err != nil {
		return "", err
	}
	return b.String() + "." + enc.EncodeToString(sig), nil
}
