package main

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/url"
	"path/filepath"

	"github.com/stackd/stackd/auth"
)

// apiTokenFile is the file in the data dir that holds the API token the
// daemon generates when no --api-token-file is given. The client
// commands read it from there.
const apiTokenFile = "api-token"

// noTokenWarning is the warning of --api-no-token, logged at start and
// shown in GET /api/v1/config.
const noTokenWarning = "--api-no-token: the API needs no token: every user of this host, and anyone who reaches --listen, can sync stacks, reload the config, pause the daemon and take backups"

// checkAPIToken refuses the token flags that contradict each other.
func (f *runFlags) checkAPIToken() error {
	switch {
	case f.noToken && f.tokenFile != "":
		return usageErrorf("run: --api-no-token and --api-token-file exclude each other")
	case f.noToken && f.readToken && f.authFile == "":
		return usageErrorf("run: --api-read-requires-token needs a token: drop --api-no-token")
	case f.readToken && f.tokenFile == "" && f.clusterFlags.enabled():
		// A replica passes a log request on with the client's token.
		return usageErrorf("run: in a cluster --api-read-requires-token needs --api-token-file, the same on every replica")
	}
	return f.accessFlags.check(f.clusterFlags.enabled())
}

// apiToken is the token mutating requests need: the --api-token-file's,
// none with --api-no-token, else the one generated into the data dir on
// the first start and kept there.
func (f *runFlags) apiToken(dataDir string, log *slog.Logger) (string, error) {
	switch {
	case f.tokenFile != "":
		return readSecretFile(f.tokenFile, "--api-token-file")
	case f.noToken:
		return "", nil
	}
	path := filepath.Join(dataDir, apiTokenFile)
	token, created, err := auth.EnsureAdminToken(path)
	if err != nil {
		return "", fmt.Errorf("api token: %w", err)
	}
	if created {
		log.Info("generated the API token that mutating requests need", "file", path)
	} else {
		log.Info("mutating requests need the API token", "file", path)
	}
	return token, nil
}

// apiWarnings are the API settings that leave the daemon open. With a
// roles file, --api-no-token only means no admin token: requests without
// a credential get the file's anonymous roles.
func apiWarnings(f *runFlags) []string {
	if f.noToken && f.authFile == "" {
		return []string{noTokenWarning}
	}
	return nil
}

// localToken is the token a client command sends when no
// --api-token-file is given: that of the daemon whose data dir is
// dataDir, and only to a server on this host's loopback or at the URL
// that daemon recorded. hint is what a 401 answer adds: where the token
// is and why it was not sent or not accepted.
func localToken(server, dataDir string) (token, hint string) {
	path := filepath.Join(dataDir, apiTokenFile)
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	if rec := recordedURL(dataDir); !loopbackURL(server) && (rec == "" || !sameServer(server, rec)) {
		return "", fmt.Sprintf("the API token of %s is sent to a daemon on this host's loopback only: for %s, give --api-token-file", path, server)
	}
	token, err := auth.ReadAdminToken(path)
	switch {
	case err == nil:
		return token, fmt.Sprintf("the API token in %s was refused: the daemon at %s has another data dir or an --api-token-file; give that (--data-dir, STACKD_DATA_DIR, or --api-token-file)", path, server)
	case errors.Is(err, fs.ErrPermission):
		return "", fmt.Sprintf("the daemon's API token is in %s, which this user cannot read: run the command as the daemon's user, or give --api-token-file", path)
	case errors.Is(err, fs.ErrNotExist):
		return "", fmt.Sprintf("there is no API token at %s: give the daemon's --data-dir (or STACKD_DATA_DIR), or --api-token-file", path)
	}
	return "", fmt.Sprintf("cannot read the API token: %v; give --api-token-file", err)
}

// loopbackURL reports whether server's host is this host's loopback.
func loopbackURL(server string) bool {
	u, err := url.Parse(server)
	if err != nil {
		return false
	}
	host := u.Hostname()
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
