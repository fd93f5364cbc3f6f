package main

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/stackd/stackd/auth"
	"github.com/stackd/stackd/web"
)

// loginTimeout bounds how long `stackd login` waits for the browser.
var loginTimeout = 5 * time.Minute

// loginCommand runs "stackd login": a person signs in through the
// browser, as on the web UI, and the CLI keeps the session it is given
// for that server (sessionsFile). It listens on 127.0.0.1, sends the
// browser to the server's /auth/cli with its port and a random state,
// and takes the session from the redirect back to its /callback only
// when the state matches.
func loginCommand(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlagSet("login")
	server := fs.String("server", "http://"+web.DefaultAddr, "URL of the daemon to sign in to")
	caFile := fs.String("ca-file", "", "PEM CA certificates that verify an https --server (default: the system's)")
	open := fs.Bool("open-browser", true, "open the sign-in address with xdg-open when there is one")
	if err := parseFlags(fs, "login [--server URL] [--ca-file FILE]", args, stdout); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErrorf("login: no arguments expected")
	}
	base, err := serverKey(*server)
	if err != nil {
		return err
	}
	hc, err := httpClient(*caFile)
	if err != nil {
		return err
	}
	// The server must answer (over TLS, verified) before a browser is
	// sent to it.
	resp, err := hc.Get(base + "/healthz")
	if err != nil {
		return fmt.Errorf("cannot reach stackd at %s: %w%s", base, err, tlsHint(err))
	}
	resp.Body.Close()
	state, err := randomState()
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("login: listen on the loopback for the browser: %w", err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	got := make(chan string, 1)
	srv := &http.Server{Handler: loginCallback(state, got), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx) // lets the browser's page finish
	}()

	signIn := base + "/auth/cli?" + url.Values{"port": {fmt.Sprint(port)}, "state": {state}}.Encode()
	fmt.Fprintf(stdout, "Open this address in a browser on this machine to sign in:\n\n  %s\n\n", signIn)
	if *open {
		openBrowser(signIn)
	}
	var session string
	select {
	case session = <-got:
	case <-time.After(loginTimeout):
		return fmt.Errorf("login: no sign-in came back within %s: run stackd login again", loginTimeout)
	case <-ctx.Done():
		return fmt.Errorf("login: %w", ctx.Err())
	}
	if err := storeSession(base, session); err != nil {
		return err
	}
	if name, _, ok := auth.SessionHolder(session); ok {
		fmt.Fprintf(stdout, "signed in to %s as %s\n", base, name)
	} else {
		fmt.Fprintf(stdout, "signed in to %s\n", base)
	}
	return nil
}

// loginCallback answers the browser sent back by /auth/cli: the session
// goes to got when the state is the one this login made, once; anything
// else is refused and the login keeps waiting.
func loginCallback(state string, got chan<- string) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /callback", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		if !equalState(q.Get("state"), state) || q.Get("token") == "" {
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprint(w, page("Sign-in refused", "This address was not opened by the stackd login that is waiting on this port. Run stackd login again."))
			return
		}
		select {
		case got <- q.Get("token"):
			fmt.Fprint(w, page("Signed in", "stackd is signed in. You may close this tab."))
		default: // already signed in: a reload
			fmt.Fprint(w, page("Signed in", "stackd is already signed in. You may close this tab."))
		}
	})
	return mux
}

func page(title, text string) string {
	return "<!doctype html><title>" + html.EscapeString(title) + "</title><p>" + html.EscapeString(text) + "</p>\n"
}

// equalState compares the state that came back with the one made, in
// constant time.
func equalState(got, want string) bool {
	return subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

// randomState is 32 random bytes, URL-safe base64: what /auth/cli
// accepts.
func randomState() (string, error) {
	raw := make([]byte, 32)
	if _, err := rand.Read(raw); err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(raw), nil
}

// openBrowser opens u with xdg-open when there is one; a failure is not
// one of login's: the address is printed.
func openBrowser(u string) {
	path, err := exec.LookPath("xdg-open")
	if err != nil {
		return
	}
	cmd := exec.Command(path, u)
	if cmd.Start() == nil {
		go func() { _ = cmd.Wait() }()
	}
}

// logoutCommand runs "stackd logout": it forgets the session kept for a
// server. The session itself stays valid until it expires.
func logoutCommand(args []string, stdout io.Writer) error {
	fs := newFlagSet("logout")
	server := fs.String("server", "http://"+web.DefaultAddr, "URL of the daemon to sign out of")
	if err := parseFlags(fs, "logout [--server URL]", args, stdout); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErrorf("logout: no arguments expected")
	}
	base, err := serverKey(*server)
	if err != nil {
		return err
	}
	sessions, path, err := readSessions()
	if err != nil {
		return err
	}
	if _, ok := sessions[base]; !ok {
		fmt.Fprintf(stdout, "not signed in to %s\n", base)
		return nil
	}
	delete(sessions, base)
	if err := writeSessions(path, sessions); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "signed out of %s\n", base)
	return nil
}

// serverKey is server as sessions are kept under it: an http or https
// URL without a trailing slash.
func serverKey(server string) (string, error) {
	u, err := url.Parse(server)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", usageErrorf("--server %q is not an http or https URL", server)
	}
	return strings.TrimSuffix(server, "/"), nil
}

// storedSession is what sessionsFile keeps for a server.
type storedSession struct {
	Session string `json:"session"`
}

// sessionsPath is the file of the sessions `stackd login` keeps:
// $XDG_CONFIG_HOME/stackd/session, or ~/.config/stackd/session.
func sessionsPath() (string, error) {
	dir := os.Getenv("XDG_CONFIG_HOME")
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("where to keep the session: %w", err)
		}
		dir = filepath.Join(home, ".config")
	}
	return filepath.Join(dir, "stackd", "session"), nil
}

// readSessions reads the sessions kept, by server URL; none when the
// file does not exist.
func readSessions() (map[string]storedSession, string, error) {
	path, err := sessionsPath()
	if err != nil {
		return nil, "", err
	}
	sessions := map[string]storedSession{}
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return sessions, path, nil
	}
	if err == nil {
		err = json.Unmarshal(data, &sessions)
	}
	if err != nil {
		return nil, path, fmt.Errorf("sessions of stackd login in %s: %w (delete the file and sign in again)", path, err)
	}
	return sessions, path, nil
}

// writeSessions replaces the file of sessions with a new one of mode
// 0600, whole or not at all.
func writeSessions(path string, sessions map[string]storedSession) error {
	data, err := json.MarshalIndent(sessions, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("keep the session: %w", err)
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".session.*") // mode 0600
	if err != nil {
		return fmt.Errorf("keep the session: %w", err)
	}
	defer os.Remove(f.Name())
	_, err = f.Write(append(data, '\n'))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		return fmt.Errorf("keep the session: %w", err)
	}
	return nil
}

// storeSession keeps session for server, replacing the one kept.
func storeSession(server, session string) error {
	sessions, path, err := readSessions()
	if err != nil {
		return err
	}
	sessions[server] = storedSession{Session: session}
	return writeSessions(path, sessions)
}

// loadSession is the session kept for server; "" when there is none.
func loadSession(server string) (string, error) {
	sessions, _, err := readSessions()
	if err != nil {
		return "", err
	}
	return sessions[strings.TrimSuffix(server, "/")].Session, nil
}
