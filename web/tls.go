package web

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	stdlog "log"
	"log/slog"
	"net/http"
	"strings"
)

// serverErrorLog is the log of the http.Server's own errors, at Warn,
// but for TLS handshakes that ended before they began (EOF, a reset):
// load balancers' TCP health checks and port scanners make those all
// day, so they go to Debug. A handshake that failed for a reason (a
// client that refused the certificate, an old TLS version) stays at
// Warn.
func serverErrorLog(log *slog.Logger) *stdlog.Logger {
	return stdlog.New(errorLogWriter{log}, "", 0)
}

type errorLogWriter struct{ log *slog.Logger }

func (w errorLogWriter) Write(p []byte) (int, error) {
	msg := strings.TrimSuffix(string(p), "\n")
	level := slog.LevelWarn
	if strings.HasPrefix(msg, "http: TLS handshake error") &&
		(strings.HasSuffix(msg, ": EOF") || strings.HasSuffix(msg, "connection reset by peer")) {
		level = slog.LevelDebug
	}
	w.log.Log(context.Background(), level, msg)
	return len(p), nil
}

// peerTransport is the transport of requests to other replicas (the
// log of an update one of them runs): roots verify their https URLs.
// Nil roots: the default transport, with the system's roots.
func peerTransport(roots *x509.CertPool) http.RoundTripper {
	if roots == nil {
		return nil
	}
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.TLSClientConfig = &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	return t
}
