package main

import (
	"crypto/tls"
	"crypto/x509"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stackd/stackd/sandbox"
	"github.com/stackd/stackd/web"
	"github.com/stackd/stackd/web/tlstest"
)

// TestTLSFlags: the certificate and key go together, and an http
// --advertise-url of a replica serving HTTPS is refused, before
// anything starts (exit 2); a file that cannot be served stops the start
// with its name (exit 1).
func TestTLSFlags(t *testing.T) {
	dir := t.TempDir()
	config := filepath.Join(dir, "stackd.yaml")
	if err := os.WriteFile(config, []byte("stacks: []\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ca := tlstest.NewCA(t, "test CA")
	a, b := ca.Issue(t, time.Hour), ca.Issue(t, time.Hour)
	good := tlstest.WriteFiles(t, t.TempDir(), a)
	mismatched := tlstest.WriteFiles(t, t.TempDir(), &tlstest.Pair{Cert: a.Cert, CertPEM: a.CertPEM, KeyPEM: b.KeyPEM})
	empty := tlstest.WriteFiles(t, t.TempDir(), &tlstest.Pair{Cert: a.Cert, KeyPEM: a.KeyPEM})
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--tls-cert-file", good.Cert}, exitUsage, "--tls-cert-file and --tls-key-file go together"},
		{[]string{"--tls-key-file", good.Key}, exitUsage, "--tls-cert-file and --tls-key-file go together"},
		{[]string{"--tls-cert-file", good.Cert, "--tls-key-file", good.Key, "--advertise-url", "http://10.0.0.1:8080"}, exitUsage, "give an https URL"},
		{[]string{"--tls-cert-file", filepath.Join(dir, "nope.pem"), "--tls-key-file", good.Key}, exitFail, filepath.Join(dir, "nope.pem")},
		{[]string{"--tls-cert-file", empty.Cert, "--tls-key-file", empty.Key}, exitFail, empty.Cert + ": no PEM CERTIFICATE block"},
		{[]string{"--tls-cert-file", mismatched.Cert, "--tls-key-file", mismatched.Key}, exitFail,
			"tls key " + mismatched.Key + " is not the key of certificate " + mismatched.Cert},
		{[]string{"--tls-cert-file", good.Cert, "--tls-key-file", good.Key, "--peer-ca-file", good.Key}, exitFail, "--peer-ca-file: " + good.Key + " holds no PEM certificate"},
	} {
		args := append([]string{"run", "--config", config, "--data-dir", filepath.Join(dir, "data"), "--listen", "127.0.0.1:0"}, c.args...)
		code, _, stderr := stackd(t, args...)
		if code != c.code || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", c.args, code, stderr, c.code, c.want)
		}
	}
	wantNoSubreaper(t)
}

// TestCAFileErrors: a --ca-file that cannot serve is refused with its
// name before any request.
func TestCAFileErrors(t *testing.T) {
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "ca.txt")
	if err := os.WriteFile(notPEM, []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for file, want := range map[string]string{
		filepath.Join(dir, "nope.pem"): "--ca-file: open " + filepath.Join(dir, "nope.pem"),
		notPEM:                         "--ca-file: " + notPEM + " holds no PEM certificate",
	} {
		code, _, stderr := stackd(t, "status", "--server", "https://127.0.0.1:1", "--ca-file", file)
		if code != exitFail || !strings.Contains(stderr, want) {
			t.Errorf("--ca-file %s: exit %d, stderr %q", file, code, stderr)
		}
	}
}

// TestTLSKeyProgramsMayRead: a key where every program may read it is
// served with a warning (in the log and GET /api/v1/config).
func TestTLSKeyProgramsMayRead(t *testing.T) {
	ca := tlstest.NewCA(t, "test CA")
	dir := t.TempDir()
	files := tlstest.WriteFiles(t, dir, ca.Issue(t, time.Hour))
	for _, c := range []struct {
		sb   sandboxFlags
		warn bool
	}{
		{sandboxFlags{}, false},
		{sandboxFlags{sandboxRO: stringsFlag{dir}}, true},
		{sandboxFlags{sandboxRW: stringsFlag{filepath.Dir(dir)}}, true},
		{sandboxFlags{sandbox: sandbox.ModeOff, sandboxRO: stringsFlag{dir}}, false}, // warned of as a whole
	} {
		f := tlsFlags{tlsCertFile: files.Cert, tlsKeyFile: files.Key}
		s, err := f.load("", c.sb.grants, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		o := s.webOptions(web.Options{})
		if warned := len(o.Warnings) == 1 && strings.Contains(o.Warnings[0], files.Key); warned != c.warn || o.TLS == nil {
			t.Errorf("%+v: warnings %q, want a warning: %v", c.sb, o.Warnings, c.warn)
		}
	}
}

// TestE2ETLS: with --tls-cert-file the daemon serves HTTPS only, TLS 1.2
// and later; the client commands reach it with --ca-file or
// STACKD_CA_FILE; a renewed certificate (a Kubernetes secret mount's
// link swapped) is served to new connections without a restart, and a
// broken renewal leaves the last good one in force.
func TestE2ETLS(t *testing.T) {
	r := newRepo(t)
	r.commit(map[string]string{"Pulumi.yaml": program("v1")})
	out := filepath.Join(outDir(t), "note.txt")
	ca := tlstest.NewCA(t, "stackd test CA")
	caFile := ca.File(t)
	mount := t.TempDir()
	one := ca.Issue(t, 24*time.Hour)
	files := tlstest.Mount(t, mount, one)
	in := startDaemonWith(t, "stacks:\n"+stackYAML("app", r, pathConfig(out)), "", func(f *runFlags) {
		f.tlsCertFile, f.tlsKeyFile = files.Cert, files.Key
	})
	addr := in.app.srv.Addr()
	base := "https://" + addr

	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool()}, DisableKeepAlives: true}}
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := client.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	if code, body := get("/api/v1/stacks"); code != http.StatusOK || !strings.Contains(body, `"app"`) {
		t.Fatalf("GET /api/v1/stacks over TLS: %d %s", code, body)
	}
	if resp, err := http.Get("http://" + addr + "/api/v1/stacks"); err != nil || resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("plain HTTP: %v %v, want 400", resp, err)
	}
	if conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: ca.Pool(), MaxVersion: tls.VersionTLS11}); err == nil {
		conn.Close()
		t.Fatal("a TLS 1.1 handshake succeeded")
	}

	// The client commands: status and sync over HTTPS, with the token.
	server := []string{"--server", base, "--data-dir", in.flags.dataDir}
	code, stdout, stderr := stackd(t, append([]string{"status", "--ca-file", caFile}, server...)...)
	if code != exitOK || !strings.Contains(stdout, "app") {
		t.Fatalf("status --ca-file: exit %d\n%s%s", code, stdout, stderr)
	}
	code, _, stderr = stackd(t, append([]string{"status"}, server...)...)
	if code != exitFail || !strings.Contains(stderr, "--ca-file (or STACKD_CA_FILE)") {
		t.Fatalf("status without the CA: exit %d, stderr %q", code, stderr)
	}
	t.Setenv("STACKD_CA_FILE", caFile)
	if code, stdout, stderr := stackd(t, append([]string{"sync", "app"}, server...)...); code != exitOK {
		t.Fatalf("sync with STACKD_CA_FILE: exit %d\n%s%s", code, stdout, stderr)
	}
	backup := filepath.Join(t.TempDir(), "stackd.db")
	if code, stdout, stderr := stackd(t, append([]string{"backup", backup}, server...)...); code != exitOK {
		t.Fatalf("backup --server https: exit %d\n%s%s", code, stdout, stderr)
	}

	// Renewal without a restart.
	two := ca.Issue(t, 48*time.Hour)
	tlstest.Mount(t, mount, two)
	waitFor(t, "the renewed certificate", 15*time.Second, func() bool { return servedSerial(t, addr, ca.Pool()) == two.Serial() })
	if _, metrics := get("/metrics"); !strings.Contains(metrics, "stackd_tls_certificate_expiry_timestamp_seconds "+expiryText(two.Cert)) {
		t.Fatalf("/metrics does not show the renewed certificate's expiry %s:\n%s", expiryText(two.Cert), grepLines(metrics, "stackd_tls"))
	}

	// A broken renewal: a certificate with another's key.
	three := ca.Issue(t, 72*time.Hour)
	tlstest.Mount(t, mount, &tlstest.Pair{Cert: three.Cert, CertPEM: three.CertPEM, KeyPEM: one.KeyPEM})
	waitFor(t, "the failed reload", 15*time.Second, func() bool {
		_, metrics := get("/metrics")
		return strings.Contains(metrics, `stackd_tls_certificate_reloads_total{result="error"} 1`)
	})
	if got := servedSerial(t, addr, ca.Pool()); got != two.Serial() {
		t.Fatalf("after a broken renewal: served %s, want the last good %s", got, two.Serial())
	}
	if !strings.Contains(in.logs.String(), "cannot reload the TLS certificate") {
		t.Fatal("the failed reload is not logged")
	}
}

// servedSerial is the serial of the certificate a new connection gets.
func servedSerial(t *testing.T, addr string, roots *x509.CertPool) string {
	t.Helper()
	conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: roots})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber.String()
}

// expiryText is a certificate's NotAfter as /metrics prints it.
func expiryText(c *x509.Certificate) string {
	return strconv.FormatFloat(float64(c.NotAfter.Unix()), 'g', -1, 64)
}

func grepLines(text, part string) string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, part) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
