package main

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
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
	token, created, err := ensureAPIToken(path)
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

// ensureAPIToken returns the token in path, creating the file first when
// it does not exist: 32 random bytes, hex-encoded, mode 0600. The file
// appears whole or not at all, and an existing one is never replaced. An
// empty file is an error rather than an open API.
func ensureAPIToken(path string) (token string, created bool, err error) {
	token, err = readAPIToken(path)
	if !errors.Is(err, fs.ErrNotExist) {
		return token, false, err
	}
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return "", false, err
	}
	token = hex.EncodeToString(raw)
	if err := createFileAtomic(path, []byte(token+"\n")); errors.Is(err, fs.ErrExist) {
		token, err = readAPIToken(path) // another process made it first
		return token, false, err
	} else if err != nil {
		return "", false, err
	}
	return token, true, nil
}

// readAPIToken reads a token file, trimmed; an empty one is an error.
func readAPIToken(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	token := strings.TrimSpace(string(data))
	if token == "" {
		return "", fmt.Errorf("%s is empty: delete it to have a new token generated", path)
	}
	return token, nil
}

// createFileAtomic writes data to a temporary file of mode 0600 beside
// path, syncs it, and links it to path, so that path appears whole or not
// at all: fs.ErrExist when path exists.
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
	if err := os.Link(f.Name(), path); errors.Is(err, fs.ErrExist) {
		return err
	} else if err != nil {
		// A file system without hard links: a rename, which would
		// replace a file made in between; only one daemon starts in a
		// data dir at a time.
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

// localToken is the token a client command sends when no
// --api-token-file is given: that of the daemon whose data dir is
// dataDir, and only to a server on this host's loopback. hint is what a
// 401 answer adds: where the token is and why it was not sent or not
// accepted.
func localToken(server, dataDir string) (token, hint string) {
	path := filepath.Join(dataDir, apiTokenFile)
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	if !loopbackURL(server) {
		return "", fmt.Sprintf("the API token of %s is sent to a daemon on this host's loopback only: for %s, give --api-token-file", path, server)
	}
	token, err := readAPIToken(path)
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
