package web

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/stackd/stackd/daemon/livelog"
	"github.com/stackd/stackd/web/tlscert"
	"github.com/stackd/stackd/web/tlstest"
)

// startTLS starts a server that serves certs; it returns its https URL.
func startTLS(t *testing.T, opts Options, certs *tlscert.Files) (*Server, string) {
	t.Helper()
	opts.TLS = certs
	s, url := startWith(t, opts)
	return s, "https://" + strings.TrimPrefix(url, "http://")
}

// clientOf is an HTTPS client that trusts roots, on new connections
// only when fresh. Its connections close before the servers started
// earlier stop, which would otherwise wait for them.
func clientOf(t *testing.T, roots *x509.CertPool, fresh bool) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: roots}
	tr.DisableKeepAlives = fresh
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

// TestServeTLS: with TLS the server serves HTTPS only, TLS 1.2 and
// later; renewed files are served to new connections without a restart,
// and broken ones leave the last good certificate in force.
func TestServeTLS(t *testing.T) {
	ca := tlstest.NewCA(t, "test CA")
	one := ca.Issue(t, time.Hour)
	f := tlstest.WriteFiles(t, t.TempDir(), one)
	certs, err := tlscert.Load(f.Cert, f.Key, nil)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(certs)
	s, base := startTLS(t, Options{API: &fakeAPI{}, Registry: reg}, certs)

	client := clientOf(t, ca.Pool(), true)
	resp, err := client.Get(base + "/api/v1/stacks")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.TLS == nil || resp.TLS.Version < tls.VersionTLS12 {
		t.Fatalf("GET over TLS: %d %+v", resp.StatusCode, resp.TLS)
	}
	if resp.Proto != "HTTP/2.0" {
		t.Errorf("protocol %s, want HTTP/2 over TLS", resp.Proto)
	}

	// Plain HTTP gets no API answer.
	resp, body := send(t, "GET", "http://"+s.Addr()+"/api/v1/stacks", nil, "")
	if resp.StatusCode != http.StatusBadRequest || strings.Contains(string(body), "stacks") {
		t.Fatalf("plain HTTP: %d %s", resp.StatusCode, body)
	}
	// A client that does not trust the CA is refused by itself.
	if _, err := clientOf(t, nil, true).Get(base + "/healthz"); !errors.As(err, new(x509.UnknownAuthorityError)) {
		t.Fatalf("client without the CA: %v", err)
	}
	checkOldTLSRefused(t, s.Addr(), ca, one)

	// Renewal: new connections see the new certificate.
	two := ca.Issue(t, 2*time.Hour)
	tlstest.Replace(t, f, two)
	waitServed(t, s.Addr(), ca, two.Serial())

	// A broken renewal: the last good certificate stays.
	if err := os.WriteFile(f.Key, []byte("-----BEGIN PRIVATE KEY-----\ntrunc"), 0o600); err != nil {
		t.Fatal(err)
	}
	var metrics []byte
	waitFor(t, "the failed reload", func() bool {
		resp, err := clientOf(t, ca.Pool(), true).Get(base + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		metrics, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		return strings.Contains(string(metrics), `stackd_tls_certificate_reloads_total{result="error"} 1`)
	})
	if got := handshakeSerial(t, s.Addr(), ca); got != two.Serial() {
		t.Fatalf("after a broken renewal: served %s, want %s", got, two.Serial())
	}
	for _, want := range []string{`stackd_tls_certificate_reloads_total{result="error"} 1`,
		`stackd_tls_certificate_reloads_total{result="success"} 1`, "stackd_tls_certificate_last_reload_successful 0"} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// checkOldTLSRefused: a TLS 1.1 client is refused; the same client
// talks to a server that accepts TLS 1.1, so it is the server's refusal.
func checkOldTLSRefused(t *testing.T, addr string, ca *tlstest.CA, p *tlstest.Pair) {
	t.Helper()
	old := &tls.Config{RootCAs: ca.Pool(), MinVersion: tls.VersionTLS10, MaxVersion: tls.VersionTLS11}
	if conn, err := tls.Dial("tcp", addr, old); err == nil {
		conn.Close()
		t.Fatal("a TLS 1.1 handshake succeeded")
	} else if !strings.Contains(err.Error(), "protocol version") {
		t.Fatalf("TLS 1.1: %v, want a protocol version alert", err)
	}
	pair, err := tls.X509KeyPair(p.CertPEM, p.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	lax := httptest.NewUnstartedServer(http.NotFoundHandler())
	lax.TLS = &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS10}
	lax.StartTLS()
	defer lax.Close()
	conn, err := tls.Dial("tcp", lax.Listener.Addr().String(), old)
	if err != nil {
		t.Fatalf("the TLS 1.1 client cannot talk TLS 1.1 at all: %v", err)
	}
	conn.Close()
}

// handshakeSerial is the serial of the certificate a new connection to
// addr gets.
func handshakeSerial(t *testing.T, addr string, ca *tlstest.CA) string {
	t.Helper()
	conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: ca.Pool()})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber.String()
}

func waitServed(t *testing.T, addr string, ca *tlstest.CA, serial string) {
	t.Helper()
	waitFor(t, "certificate "+serial, func() bool { return handshakeSerial(t, addr, ca) == serial })
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestLogOfReplicaOverTLS: the log of an update another replica runs is
// fetched from its https URL, verified with PeerRootCAs, and streams;
// without the CA the replica is not trusted (502).
func TestLogOfReplicaOverTLS(t *testing.T) {
	ca := tlstest.NewCA(t, "cluster CA")
	load := func() *tlscert.Files {
		f := tlstest.WriteFiles(t, t.TempDir(), ca.Issue(t, time.Hour))
		c, err := tlscert.Load(f.Cert, f.Key, nil)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	live := livelog.New()
	_, _ = live.Write([]byte("step 1\n"))
	_, holder := startTLS(t, Options{API: &fakeAPI{live: map[string]*livelog.Log{"app-2": live}}}, load())
	here := &fakeAPI{logs: map[string][]byte{"app-2": nil}, remote: map[string]string{"app-2": holder}}
	_, trusting := startTLS(t, Options{API: here, PeerRootCAs: ca.Pool()}, load())
	_, untrusting := startTLS(t, Options{API: here}, load())

	resp, err := clientOf(t, ca.Pool(), false).Get(untrusting + "/api/v1/updates/app-2/log")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadGateway {
		t.Fatalf("without the CA of the replicas: %d, want 502", resp.StatusCode)
	}

	resp, err = clientOf(t, ca.Pool(), false).Get(trusting + "/api/v1/updates/app-2/log?follow=1")
	if err != nil {
		t.Fatal(err)
	}
	followTwoSteps(t, resp, live)
}

// TestServerErrorLog: handshakes that ended before they began (health
// checks, scanners) are logged at Debug; other server errors at Warn.
func TestServerErrorLog(t *testing.T) {
	for _, c := range []struct {
		line string
		want slog.Level
	}{
		{"http: TLS handshake error from 10.0.0.9:51234: EOF\n", slog.LevelDebug},
		{"http: TLS handshake error from 10.0.0.9:51234: read tcp 10.0.0.1:8443->10.0.0.9:51234: read: connection reset by peer\n", slog.LevelDebug},
		{"http: TLS handshake error from 10.0.0.9:51234: remote error: tls: bad certificate\n", slog.LevelWarn},
		{"http: TLS handshake error from 10.0.0.9:51234: tls: client offered only unsupported versions: [302 301]\n", slog.LevelWarn},
		{"http: Accept error: too many open files; retrying in 5ms\n", slog.LevelWarn},
	} {
		var logs syncBuffer
		serverErrorLog(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))).Print(c.line)
		if want := "level=" + c.want.String(); !strings.Contains(logs.String(), want) {
			t.Errorf("%q logged as %s, want %s", c.line, logs.String(), want)
		}
	}
}
