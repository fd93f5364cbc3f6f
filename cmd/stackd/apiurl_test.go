package main

import (
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestListenURL: a client on this host reaches an address on all
// addresses on the loopback, another as it is; https with TLS.
func TestListenURL(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:8080", "[::]:8080", ":8080", "127.0.0.1:8080"} {
		if got := listenURL(addr, false); got != "http://127.0.0.1:8080" {
			t.Errorf("listenURL(%q) = %q, want the loopback", addr, got)
		}
	}
	for addr, want := range map[string]string{"[::1]:8443": "https://[::1]:8443", "stackd.example:443": "https://stackd.example:443"} {
		if got := listenURL(addr, true); got != want {
			t.Errorf("listenURL(%q) with TLS = %q, want %q", addr, got, want)
		}
	}
}

func TestSameServer(t *testing.T) {
	same := [][2]string{
		{"http://127.0.0.1:8080", "http://127.0.0.1:8080"},
		{"http://127.0.0.1:8080/", "http://127.0.0.1:8080"},
		{"http://localhost:8080", "http://127.0.0.1:8080"},
		{"http://[::1]:8080", "http://127.0.0.1:8080"},
		{"https://stackd.example", "https://STACKD.example:443"},
		{"http://10.0.0.5", "http://10.0.0.5:80"},
	}
	different := [][2]string{
		{"http://127.0.0.1:8081", "http://127.0.0.1:8080"},
		{"https://127.0.0.1:8080", "http://127.0.0.1:8080"},
		{"http://10.0.0.5:8080", "http://127.0.0.1:8080"},
		{"http://[::1", "http://127.0.0.1:8080"},
	}
	for _, p := range same {
		if !sameServer(p[0], p[1]) || !sameServer(p[1], p[0]) {
			t.Errorf("%s and %s are not the same server", p[0], p[1])
		}
	}
	for _, p := range different {
		if sameServer(p[0], p[1]) || sameServer(p[1], p[0]) {
			t.Errorf("%s and %s are the same server", p[0], p[1])
		}
	}
}

// TestServerOf: a client command talks to --server when given, else to
// the daemon its data dir recorded, else to the default; it refuses to
// send a data dir's token to a loopback daemon that is not that dir's.
func TestServerOf(t *testing.T) {
	recorded := t.TempDir()
	if err := recordAPIURL(recorded, "http://127.0.0.1:8081"); err != nil {
		t.Fatal(err)
	}
	none := t.TempDir()
	for _, tt := range []struct {
		name, server, dataDir string
		sendsToken            bool
		want, err             string
	}{
		{"the default", "", none, true, defaultServer, ""},
		{"the recorded one", "", recorded, true, "http://127.0.0.1:8081", ""},
		{"the recorded one, another token", "", recorded, false, "http://127.0.0.1:8081", ""},
		{"given, none recorded", "http://127.0.0.1:9000", none, true, "http://127.0.0.1:9000", ""},
		{"given, the recorded one", "http://localhost:8081", recorded, true, "http://localhost:8081", ""},
		{"given, another loopback daemon", "http://127.0.0.1:8080", recorded, true, "",
			"--server http://127.0.0.1:8080 is not the daemon of the data dir " + recorded + ", which listens at http://127.0.0.1:8081"},
		{"given, another daemon, another token", "http://127.0.0.1:8080", recorded, false, "http://127.0.0.1:8080", ""},
		{"given, a remote daemon (no token sent)", "https://stackd.example", recorded, true, "https://stackd.example", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := serverOf(tt.server, tt.dataDir, tt.sendsToken)
			if got != tt.want || (err == nil) != (tt.err == "") || err != nil && !strings.Contains(err.Error(), tt.err) {
				t.Errorf("serverOf = %q, %v; want %q, an error with %q", got, err, tt.want, tt.err)
			}
		})
	}
}

// TestE2ETwoDaemonsTwoDataDirs: two daemons with two data dirs; a client
// command given either data dir and no --server talks to that dir's
// daemon, each recorded in its data dir; given the other's --server, it
// refuses to send the token, naming both; a third daemon on a taken
// address names --listen.
func TestE2ETwoDaemonsTwoDataDirs(t *testing.T) {
	r := newRepo(t)
	r.commit(map[string]string{"Pulumi.yaml": program("v1")})
	out := outDir(t)
	one := startDaemon(t, "stacks:\n"+stackYAML("one", r, pathConfig(filepath.Join(out, "one.txt"))), "")
	two := startDaemon(t, "stacks:\n"+stackYAML("two", r, pathConfig(filepath.Join(out, "two.txt"))), "")
	for _, in := range []*instance{one, two} {
		if got := recordedURL(in.flags.dataDir); got != in.url {
			t.Fatalf("%s records %q, want %q", in.flags.dataDir, got, in.url)
		}
		info, err := os.Stat(filepath.Join(in.flags.dataDir, apiURLFile))
		if err != nil || info.Mode().Perm()&0o022 != 0 {
			t.Fatalf("the record: %v, %v", info, err)
		}
	}
	one.waitStack("one", "deployed", time.Minute, isReady)
	two.waitStack("two", "deployed", time.Minute, isReady)

	for _, c := range []struct {
		in          *instance
		mine, other string
	}{{one, "one", "two"}, {two, "two", "one"}} {
		code, stdout, stderr := stackd(t, "status", "--data-dir", c.in.flags.dataDir)
		if code != exitOK || !strings.Contains(stdout, c.mine) || strings.Contains(stdout, c.other) {
			t.Fatalf("stackd status --data-dir of %s: %d\n%s%s", c.mine, code, stdout, stderr)
		}
		// A mutating request: the token of the data dir is the daemon's.
		if code, stdout, stderr := stackd(t, "sync", c.mine, "--data-dir", c.in.flags.dataDir); code != exitOK {
			t.Fatalf("stackd sync %s --data-dir: %d %s%s", c.mine, code, stdout, stderr)
		}
	}
	t.Setenv("STACKD_DATA_DIR", two.flags.dataDir)
	if code, stdout, stderr := stackd(t, "status"); code != exitOK || !strings.Contains(stdout, "two") || strings.Contains(stdout, "one") {
		t.Fatalf("stackd status with STACKD_DATA_DIR: %d\n%s%s", code, stdout, stderr)
	}

	code, stdout, stderr := stackd(t, "sync", "one", "--server", one.url)
	want := "--server " + one.url + " is not the daemon of the data dir " + two.flags.dataDir + ", which listens at " + two.url
	if code != exitFail || !strings.Contains(stderr, want) {
		t.Fatalf("stackd sync with another daemon's --server: %d %s%s", code, stdout, stderr)
	}
	_, port, _ := net.SplitHostPort(one.app.srv.Addr())
	f := two.flags
	f.dataDir, f.listen = t.TempDir(), "127.0.0.1:"+port
	_, err := start(t.Context(), &f, slog.New(slog.NewTextHandler(testWriter{t}, nil)))
	if err == nil || !strings.Contains(err.Error(), "address already in use") || !strings.Contains(err.Error(), "--listen 127.0.0.1:"+port) {
		t.Fatalf("a daemon on a taken address: %v", err)
	}
}
