// Package tlscert is the server certificate stackd serves HTTPS with: a
// certificate file and a key file, read again when either changes, with
// metrics of its expiry and reloads. Its tests make certificates with
// package tlstest.
package tlscert

import (
	"bytes"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// certCheckInterval is how often, at most, a Files looks at its files: a renewed certificate is served within this time of the
// first connection or scrape after the renewal.
const certCheckInterval = 2 * time.Second

// Files is the server certificate held by a certificate file and a
// key file, read again when either changes, so that a renewed
// certificate is served without a restart: certbot and most tools
// rename new files over the old ones, cert-manager and Vault agents
// through a Kubernetes secret mount swap the directory link both files
// lead through.
//
// The files are looked at on a TLS handshake or a metrics scrape, at
// most once per certCheckInterval: each file's content (through
// symbolic links) is compared with that of the last read, by a SHA-256
// digest, and only a change parses them again. A read that fails — a half-written file, a certificate whose
// new key is not there yet — keeps the last good pair in force, is
// logged and counted, and is tried again when the files change again.
//
// Files is a prometheus.Collector of stackd_tls_* metrics.
type Files struct {
	certFile, keyFile string
	log               *slog.Logger
	interval          time.Duration
	now               func() time.Time

	cert atomic.Pointer[tls.Certificate] // in force
	due  atomic.Int64                    // unix ns of the next look at the files

	mu   sync.Mutex // held by a look at the files
	seen pairStamp  // the files as last read, well or not

	reloads, failures atomic.Uint64
	lastFailed        atomic.Bool
}

// Descriptions of Files' metrics.
var (
	certExpiryDesc = prometheus.NewDesc("stackd_tls_certificate_expiry_timestamp_seconds",
		"When the served TLS certificate expires (its NotAfter), in Unix seconds.", nil, nil)
	certReloadsDesc = prometheus.NewDesc("stackd_tls_certificate_reloads_total",
		"Reads of the TLS certificate and key files after they changed, by result (success, error); after an error the last good certificate stays in force.",
		[]string{"result"}, nil)
	certLastReloadDesc = prometheus.NewDesc("stackd_tls_certificate_last_reload_successful",
		"1 when the last read of the TLS certificate and key files succeeded, 0 when the served certificate is older than the files.", nil, nil)
)

// Load reads the certificate (PEM, the server's first, then
// the intermediates) and key (PEM) files. An error names the file at
// fault: unreadable, without PEM data of its kind, or a key that is not
// the certificate's.
func Load(certFile, keyFile string, log *slog.Logger) (*Files, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c := &Files{certFile: certFile, keyFile: keyFile, log: log, interval: certCheckInterval, now: time.Now}
	c.seen = stampPair(certFile, keyFile)
	cert, err := readPair(certFile, keyFile)
	if err != nil {
		return nil, err
	}
	c.cert.Store(cert)
	c.due.Store(c.now().Add(c.interval).UnixNano())
	log.Info("TLS certificate loaded", "file", certFile, "serial", cert.Leaf.SerialNumber.String(),
		"subject", cert.Leaf.Subject.String(), "not_after", cert.Leaf.NotAfter)
	c.warnValidity(cert.Leaf)
	return c, nil
}

// GetCertificate is the certificate in force, after a look at the files
// when one is due (tls.Config.GetCertificate).
func (c *Files) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	c.maybeReload()
	return c.cert.Load(), nil
}

// Leaf is the certificate in force.
func (c *Files) Leaf() *x509.Certificate { return c.cert.Load().Leaf }

// ServerConfig is the TLS configuration of the server: TLS 1.2 and
// later, Go's default cipher suites (all of them with forward secrecy
// and authenticated encryption for TLS 1.2), c's certificate.
func (c *Files) ServerConfig() *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: c.GetCertificate}
}

// maybeReload looks at the files when that is due and no other
// goroutine does; meanwhile handshakes go on with the certificate in
// force.
func (c *Files) maybeReload() {
	if c.now().UnixNano() < c.due.Load() || !c.mu.TryLock() {
		return
	}
	defer c.mu.Unlock()
	now := c.now()
	if now.UnixNano() < c.due.Load() {
		return // another goroutine just looked
	}
	c.due.Store(now.Add(c.interval).UnixNano())
	c.reloadIfChanged()
}

// reloadIfChanged reads the files again when they changed since the
// last read. The stamps are taken before the read: files that change
// during it are read again at the next look. c.mu is held.
func (c *Files) reloadIfChanged() {
	stamp := stampPair(c.certFile, c.keyFile)
	if stamp.same(c.seen) {
		return
	}
	c.seen = stamp
	cert, err := readPair(c.certFile, c.keyFile)
	if err != nil {
		c.failures.Add(1)
		c.lastFailed.Store(true)
		old := c.Leaf()
		c.log.Error("cannot reload the TLS certificate; the last good one stays in force", "err", err,
			"serial", old.SerialNumber.String(), "not_after", old.NotAfter)
		return
	}
	c.cert.Store(cert)
	c.reloads.Add(1)
	c.lastFailed.Store(false)
	c.log.Info("TLS certificate reloaded", "serial", cert.Leaf.SerialNumber.String(),
		"subject", cert.Leaf.Subject.String(), "not_after", cert.Leaf.NotAfter)
	c.warnValidity(cert.Leaf)
}

// warnValidity logs a certificate that clients will refuse for its
// dates: it is served anyway, being what the files hold.
func (c *Files) warnValidity(leaf *x509.Certificate) {
	now := c.now()
	switch {
	case now.After(leaf.NotAfter):
		c.log.Warn("the TLS certificate has expired", "file", c.certFile, "not_after", leaf.NotAfter)
	case now.Before(leaf.NotBefore):
		c.log.Warn("the TLS certificate is not valid yet", "file", c.certFile, "not_before", leaf.NotBefore)
	}
}

// Describe implements prometheus.Collector.
func (c *Files) Describe(ch chan<- *prometheus.Desc) {
	ch <- certExpiryDesc
	ch <- certReloadsDesc
	ch <- certLastReloadDesc
}

// Collect implements prometheus.Collector. A scrape looks at the files
// when that is due, so that the expiry shows a renewal without waiting
// for a handshake.
func (c *Files) Collect(ch chan<- prometheus.Metric) {
	c.maybeReload()
	ch <- prometheus.MustNewConstMetric(certExpiryDesc, prometheus.GaugeValue, float64(c.Leaf().NotAfter.Unix()))
	ch <- prometheus.MustNewConstMetric(certReloadsDesc, prometheus.CounterValue, float64(c.reloads.Load()), "success")
	ch <- prometheus.MustNewConstMetric(certReloadsDesc, prometheus.CounterValue, float64(c.failures.Load()), "error")
	ok := 1.0
	if c.lastFailed.Load() {
		ok = 0
	}
	ch <- prometheus.MustNewConstMetric(certLastReloadDesc, prometheus.GaugeValue, ok)
}

// readPair reads and parses a certificate file and a key file.
func readPair(certFile, keyFile string) (*tls.Certificate, error) {
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		return nil, fmt.Errorf("tls certificate: %w", err)
	}
	keyPEM, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, fmt.Errorf("tls key: %w", err)
	}
	return parsePair(certPEM, keyPEM, certFile, keyFile)
}

// parsePair parses a PEM certificate chain and key. An error names the
// file at fault where one is: Go's own errors speak of "input".
func parsePair(certPEM, keyPEM []byte, certFile, keyFile string) (*tls.Certificate, error) {
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	switch {
	case err == nil:
		return &cert, nil // X509KeyPair sets cert.Leaf
	case !hasPEM(certPEM, "CERTIFICATE"):
		return nil, fmt.Errorf("tls certificate %s: no PEM CERTIFICATE block", certFile)
	case !hasPEM(keyPEM, "PRIVATE KEY"):
		return nil, fmt.Errorf("tls key %s: no PEM PRIVATE KEY block", keyFile)
	case strings.Contains(err.Error(), "does not match"):
		return nil, fmt.Errorf("tls key %s is not the key of certificate %s", keyFile, certFile)
	}
	return nil, fmt.Errorf("tls certificate %s, key %s: %w", certFile, keyFile, err)
}

// hasPEM says whether data holds a PEM block whose type ends with
// suffix ("PRIVATE KEY" matches "EC PRIVATE KEY" and "RSA PRIVATE KEY").
func hasPEM(data []byte, suffix string) bool {
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			return false
		}
		if strings.HasSuffix(b.Type, suffix) && len(bytes.TrimSpace(b.Bytes)) > 0 {
			return true
		}
	}
}

// fileStamp identifies a version of a file: a digest of its content,
// or the error reading it gave. The content, not what stat says: a file
// rewritten in place with the same size within one tick of the
// filesystem's clock keeps its inode, size and modification time.
type fileStamp struct {
	sum [sha256.Size]byte
	err string
}

func stampFile(path string) fileStamp {
	data, err := os.ReadFile(path) // through links: the file they lead to now
	if err != nil {
		return fileStamp{err: err.Error()}
	}
	return fileStamp{sum: sha256.Sum256(data)}
}

// same says whether a and b are the same version of a file: the same
// content, or the same error.
func (a fileStamp) same(b fileStamp) bool { return a == b }

// pairStamp is the stamps of a certificate file and its key file.
type pairStamp struct{ cert, key fileStamp }

func stampPair(certFile, keyFile string) pairStamp {
	return pairStamp{stampFile(certFile), stampFile(keyFile)}
}

func (a pairStamp) same(b pairStamp) bool { return a.cert.same(b.cert) && a.key.same(b.key) }
