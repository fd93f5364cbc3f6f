package main

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/stackd/stackd/web"
)

// apiURLFile is the file in the data dir where the daemon records, when
// it starts, the URL of its API (scheme, host and port): the client
// commands given that data dir talk to that daemon. It holds no secret.
// A daemon that stops leaves it (a client then says that nothing answers
// there); the next start rewrites it.
const apiURLFile = "api-url"

// defaultServer is the API's URL when neither --server nor a data dir's
// record names one.
const defaultServer = "http://" + web.DefaultAddr

// listenURL is the URL at which a client on this host reaches a daemon
// listening on addr: https with TLS; an unspecified host (0.0.0.0, ::)
// is reached on the loopback.
func listenURL(addr string, tls bool) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		host, port = addr, ""
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	scheme := "http"
	if tls {
		scheme = "https"
	}
	if port == "" {
		return scheme + "://" + host
	}
	return scheme + "://" + net.JoinHostPort(host, port)
}

// recordAPIURL writes u into dataDir's apiURLFile, replacing it whole.
func recordAPIURL(dataDir, u string) error {
	path := filepath.Join(dataDir, apiURLFile)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(u+"\n"), 0o644); err != nil {
		return fmt.Errorf("record the API's URL: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("record the API's URL: %w", err)
	}
	return nil
}

// recordedURL is the URL the daemon of dataDir recorded; "" when there is
// none (no daemon started with it yet, or one older than the record).
func recordedURL(dataDir string) string {
	data, err := os.ReadFile(filepath.Join(dataDir, apiURLFile))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(data))
}

// sameServer says whether the API URLs a and b name the same daemon: the
// same scheme and port, and the same host or both this host's loopback.
func sameServer(a, b string) bool {
	ua, errA := url.Parse(strings.TrimSuffix(a, "/"))
	ub, errB := url.Parse(strings.TrimSuffix(b, "/"))
	if errA != nil || errB != nil {
		return false
	}
	return ua.Scheme == ub.Scheme && portOf(ua) == portOf(ub) &&
		(strings.EqualFold(ua.Hostname(), ub.Hostname()) || loopbackURL(a) && loopbackURL(b))
}

// portOf is u's port, or its scheme's.
func portOf(u *url.URL) string {
	switch {
	case u.Port() != "":
		return u.Port()
	case u.Scheme == "https":
		return "443"
	}
	return "80"
}

// serverOf is the API a client command talks to: server (--server or
// STACKD_SERVER) when given, else the one the daemon of dataDir recorded,
// else defaultServer. A given server that is not the recorded one is
// refused when the command would send dataDir's API token to it
// (sendsToken): that token is another daemon's.
func serverOf(server, dataDir string, sendsToken bool) (string, error) {
	recorded := recordedURL(dataDir)
	switch {
	case server == "" && recorded != "":
		return recorded, nil
	case server == "":
		return defaultServer, nil
	case sendsToken && recorded != "" && loopbackURL(server) && !sameServer(server, recorded):
		dir, _ := filepath.Abs(dataDir)
		return "", fmt.Errorf("--server %s is not the daemon of the data dir %s, which listens at %s: that daemon's API token is not sent to another; "+
			"drop --server to talk to it, or give the other daemon's --data-dir (or STACKD_DATA_DIR) or --api-token-file", server, dir, recorded)
	}
	return server, nil
}

// listenError is err of a listen on --listen addr, which it names when
// the address is taken.
func listenError(err error, addr string) error {
	if errors.Is(err, syscall.EADDRINUSE) {
		return fmt.Errorf("%w: another process (another stackd?) listens on --listen %s: stop it, or give another --listen", err, addr)
	}
	return err
}
