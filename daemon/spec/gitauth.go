package spec

import (
	"cmp"
	"fmt"
)

// GitAuth holds resolved Git credentials: secrets that must never reach a
// log, an error, the store or an HTTP response.
type GitAuth struct {
	SSHPrivateKey []byte // PEM
	SSHPassphrase string
	// KnownHosts, when set, are the SSH host keys to trust (known_hosts
	// lines) instead of the daemon's known_hosts files.
	KnownHosts []byte
	// BearerToken is sent as an HTTP bearer token.
	BearerToken string
	// Username and Password are HTTP basic credentials; an access token is
	// sent as the password of user "git", as PKO does.
	Username string
	Password string
	// GitHubApp is exchanged for an installation token, sent as the
	// password of user x-access-token.
	GitHubApp *GitHubApp
}

// GitHubApp is a GitHub App installation's credentials.
type GitHubApp struct {
	AppID, InstallationID string
	PrivateKey            string // PEM
}

// Secrets are a's secret values, to scrub from logs and messages.
func (a *GitAuth) Secrets() []string {
	out := []string{string(a.SSHPrivateKey), a.SSHPassphrase, a.Password, a.BearerToken}
	if a.GitHubApp != nil {
		out = append(out, a.GitHubApp.PrivateKey)
	}
	return out
}

// Parts are every value of a, to tell credentials apart without
// revealing them.
func (a *GitAuth) Parts() [][]byte {
	parts := [][]byte{a.SSHPrivateKey, []byte(a.SSHPassphrase), []byte(a.Username), []byte(a.Password), []byte(a.BearerToken), a.KnownHosts}
	if app := a.GitHubApp; app != nil {
		parts = append(parts, []byte(app.AppID), []byte(app.InstallationID), []byte(app.PrivateKey))
	}
	return parts
}

// String redacts, so that printing a GitAuth by mistake leaks nothing.
func (a *GitAuth) String() string { return "[credentials]" }

// GoString redacts too, for %#v.
func (a *GitAuth) GoString() string { return "[credentials]" }

// GitAuth resolves the stack's gitAuth by PKO's precedence: sshAuth, accessToken,
// githubApp, basicAuth.
func (c *Config) GitAuth(s *Stack, refs RefSources) (*GitAuth, error) {
	ga := s.Spec.GitAuth
	if ga == nil {
		return c.gitAuthSecret(s, refs)
	}
	get := func(path string, r ResourceRef) (string, error) {
		return c.ResolveRef(s, "gitAuth."+path, r, refs)
	}
	switch {
	case ga.SSHAuth != nil:
		key, err := get("sshAuth.sshPrivateKey", ga.SSHAuth.SSHPrivateKey)
		if err != nil {
			return nil, err
		}
		a := &GitAuth{SSHPrivateKey: []byte(key)}
		if ga.SSHAuth.Password != nil {
			if a.SSHPassphrase, err = get("sshAuth.password", *ga.SSHAuth.Password); err != nil {
				return nil, err
			}
		}
		return a, nil
	case ga.AccessToken != nil:
		tok, err := get("accessToken", *ga.AccessToken)
		if err != nil {
			return nil, err
		}
		return &GitAuth{Username: "git", Password: tok}, nil
	case ga.GitHubApp != nil:
		app, gh := &GitHubApp{}, ga.GitHubApp
		var err error
		if app.AppID, err = get("githubApp.appID", gh.AppID); err == nil {
			if app.InstallationID, err = get("githubApp.installationID", gh.InstallationID); err == nil {
				app.PrivateKey, err = get("githubApp.privateKey", gh.PrivateKey)
			}
		}
		if err != nil {
			return nil, err
		}
		return &GitAuth{GitHubApp: app}, nil
	case ga.BasicAuth != nil:
		user, err := get("basicAuth.userName", ga.BasicAuth.UserName)
		if err != nil {
			return nil, err
		}
		pass, err := get("basicAuth.password", ga.BasicAuth.Password)
		if err != nil {
			return nil, err
		}
		return &GitAuth{Username: user, Password: pass}, nil
	}
	return nil, nil
}

// gitAuthSecret reads PKO's deprecated gitAuthSecret: a Secret with
// accessToken, or sshPrivateKey (and password), or username and password.
func (c *Config) gitAuthSecret(s *Stack, refs RefSources) (*GitAuth, error) {
	name := s.Spec.GitAuthSecret
	if name == "" {
		return nil, nil
	}
	data, err := c.SecretData(name, refs)
	if err != nil {
		return nil, &RefError{Path: "gitAuthSecret", Err: err}
	}
	switch key := cmp.Or(data["sshPrivateKey"], data["identity"]); { // PKO's keys, and Flux's
	case data["accessToken"] != "":
		return &GitAuth{Username: "git", Password: data["accessToken"]}, nil
	case data["bearerToken"] != "":
		return &GitAuth{BearerToken: data["bearerToken"]}, nil
	case key != "":
		return &GitAuth{SSHPrivateKey: []byte(key), SSHPassphrase: data["password"], KnownHosts: []byte(data["known_hosts"])}, nil
	case data["username"] != "":
		return &GitAuth{Username: data["username"], Password: data["password"]}, nil
	}
	return nil, &RefError{Path: "gitAuthSecret", Err: fmt.Errorf("Secret %q has none of accessToken, bearerToken, sshPrivateKey, identity, username", name)}
}
