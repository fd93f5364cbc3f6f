package gitwatch

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	gitssh "github.com/go-git/go-git/v5/plumbing/transport/ssh"
	gossh "golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/stackd/stackd/daemon/model"
)

// authFor builds the go-git auth method for src, or nil for anonymous
// access. It enforces: an SSH key only on ssh URLs, a password only on
// http(s) URLs, no credentials over plain http to a non-loopback host
// unless AllowPlainHTTPAuth, and host key checking for SSH.
func (f *Fetcher) authFor(src model.GitSource) (transport.AuthMethod, error) {
	ep, err := transport.NewEndpoint(src.URL)
	if err != nil {
		return nil, fmt.Errorf("invalid url: %w", err)
	}
	a := src.Auth
	if a == nil {
		a = &model.GitAuth{}
	}
	switch ep.Protocol {
	case "ssh":
		return f.sshAuth(ep, a)
	case "http", "https":
		return f.httpAuth(ep, a)
	}
	if len(a.SSHPrivateKey) > 0 || a.Username != "" || a.Password != "" || a.BearerToken != "" || a.GitHubApp != nil {
		return nil, fmt.Errorf("%s urls take no credentials", ep.Protocol)
	}
	return nil, nil
}

func (f *Fetcher) httpAuth(ep *transport.Endpoint, a *model.GitAuth) (transport.AuthMethod, error) {
	if len(a.SSHPrivateKey) > 0 {
		return nil, errors.New("an ssh private key cannot be used with an http(s) url: use an ssh url (git@host:path or ssh://) or an access token")
	}
	basic := a.Username != "" || a.Password != ""
	if (basic || a.BearerToken != "" || a.GitHubApp != nil || ep.User != "" || ep.Password != "") && ep.Protocol == "http" &&
		!f.opts.AllowPlainHTTPAuth && !isLoopback(ep.Host) {
		return nil, errors.New("refusing to send credentials over plain http to a non-loopback host: use https, or set AllowPlainHTTPAuth")
	}
	if a.BearerToken != "" {
		return &githttp.TokenAuth{Token: a.BearerToken}, nil
	}
	if a.GitHubApp != nil {
		tok, err := f.appToken(ep, a.GitHubApp)
		if err != nil {
			return nil, err
		}
		return &githttp.BasicAuth{Username: "x-access-token", Password: tok}, nil
	}
	if !basic {
		return nil, nil
	}
	user := a.Username
	if user == "" {
		user = "git" // an access token is the password of user "git", as in PKO
	}
	return &githttp.BasicAuth{Username: user, Password: a.Password}, nil
}

func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}

// sshAuth uses the private key of a, or the SSH agent when a has none. The
// SSH user is the URL's, "git" by default; a.Username is ignored.
func (f *Fetcher) sshAuth(ep *transport.Endpoint, a *model.GitAuth) (transport.AuthMethod, error) {
	if a.Password != "" || a.BearerToken != "" || a.GitHubApp != nil {
		return nil, errors.New("a password (or token) cannot be used with an ssh url: give an ssh private key, or use an https url with the token")
	}
	cb, algos, err := f.hostKeyCheck(ep, a.KnownHosts)
	if err != nil {
		return nil, err
	}
	user := ep.User
	if user == "" {
		user = "git"
	}
	if len(a.SSHPrivateKey) == 0 {
		if os.Getenv("SSH_AUTH_SOCK") == "" {
			return nil, errors.New("ssh url without an ssh private key and no ssh agent (SSH_AUTH_SOCK)")
		}
		ag, err := gitssh.NewSSHAgentAuth(user)
		if err != nil {
			return nil, fmt.Errorf("ssh agent: %w", err)
		}
		ag.HostKeyCallback, ag.HostKeyAlgorithms = cb, algos
		return ag, nil
	}
	pk, err := gitssh.NewPublicKeys(user, a.SSHPrivateKey, a.SSHPassphrase)
	if err != nil {
		return nil, fmt.Errorf("ssh private key: %w", err)
	}
	pk.HostKeyCallback, pk.HostKeyAlgorithms = cb, algos
	return pk, nil
}

// hostKeyCheck returns the host key callback and the host key algorithms to
// offer (those known_hosts has for the host, so that negotiation does not
// pick a key type known_hosts lacks). Known, when set, are the source's
// own known_hosts lines (a Flux secret's known_hosts), used instead of
// the files.
func (f *Fetcher) hostKeyCheck(ep *transport.Endpoint, known []byte) (gossh.HostKeyCallback, []string, error) {
	if f.opts.InsecureIgnoreHostKey {
		return gossh.InsecureIgnoreHostKey(), nil, nil
	}
	files, err := f.knownHostsFiles()
	if len(known) > 0 {
		tmp, terr := os.CreateTemp("", "known_hosts-")
		if terr != nil {
			return nil, nil, fmt.Errorf("known_hosts: %w", terr)
		}
		defer os.Remove(tmp.Name())
		_, terr = tmp.Write(known)
		if cerr := tmp.Close(); terr == nil {
			terr = cerr
		}
		if terr != nil {
			return nil, nil, fmt.Errorf("known_hosts: %w", terr)
		}
		files, err = []string{tmp.Name()}, nil
	}
	if err != nil {
		return nil, nil, err
	}
	db, err := gitssh.NewKnownHostsDb(files...)
	if err != nil {
		return nil, nil, fmt.Errorf("known_hosts: %w", err)
	}
	port := ep.Port
	if port <= 0 {
		port = gitssh.DefaultPort
	}
	hostPort := net.JoinHostPort(ep.Host, strconv.Itoa(port))
	return explainHostKey(db.HostKeyCallback()), db.HostKeyAlgorithms(hostPort), nil
}

// knownHostsFiles returns the existing known_hosts files to use, or an
// error that says how to provide one.
func (f *Fetcher) knownHostsFiles() ([]string, error) {
	var tried []string
	switch {
	case f.opts.KnownHosts != "":
		tried = []string{f.opts.KnownHosts}
	case os.Getenv("SSH_KNOWN_HOSTS") != "":
		tried = filepath.SplitList(os.Getenv("SSH_KNOWN_HOSTS"))
	default:
		home, err := os.UserHomeDir()
		if err != nil {
			return nil, fmt.Errorf("no known_hosts file: set Options.KnownHosts or SSH_KNOWN_HOSTS: %w", err)
		}
		tried = []string{filepath.Join(home, ".ssh", "known_hosts")}
	}
	var found []string
	for _, p := range tried {
		if _, err := os.Stat(p); err == nil {
			found = append(found, p)
		}
	}
	if len(found) == 0 {
		return nil, fmt.Errorf("no known_hosts file for ssh host key checking (looked for %s): "+
			"add the host's key with `ssh-keyscan -p PORT HOST >> FILE`, point Options.KnownHosts or SSH_KNOWN_HOSTS at it, "+
			"or set InsecureIgnoreHostKey", strings.Join(tried, ", "))
	}
	return found, nil
}

// explainHostKey adds what to do to known_hosts failures.
func explainHostKey(cb gossh.HostKeyCallback) gossh.HostKeyCallback {
	return func(host string, remote net.Addr, key gossh.PublicKey) error {
		err := cb(host, remote, key)
		var ke *knownhosts.KeyError
		if !errors.As(err, &ke) {
			return err
		}
		if len(ke.Want) == 0 {
			return fmt.Errorf("host key %s of %s is not in known_hosts (add it): %w", key.Type(), host, err)
		}
		return fmt.Errorf("host key %s of %s does not match known_hosts (key changed, or man in the middle): %w", key.Type(), host, err)
	}
}
