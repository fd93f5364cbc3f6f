package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"

	"github.com/stackd/stackd/sandbox"
	"github.com/stackd/stackd/web"
	"github.com/stackd/stackd/web/tlscert"
)

// tlsFlags are the flags of stackd run's HTTPS.
type tlsFlags struct {
	tlsCertFile, tlsKeyFile string
	peerCAFile              string
}

func (f *tlsFlags) define(fs *flag.FlagSet) {
	fs.StringVar(&f.tlsCertFile, "tls-cert-file", "", "PEM certificate (then its intermediates) to serve HTTPS only with, read again when it changes; needs --tls-key-file")
	fs.StringVar(&f.tlsKeyFile, "tls-key-file", "", "PEM private key of --tls-cert-file")
	fs.StringVar(&f.peerCAFile, "peer-ca-file", "", "PEM CA certificates that verify the other replicas' https --advertise-url (default: the system's)")
}

// httpsSetup is what the web server needs for HTTPS, and to reach other
// replicas over it.
type httpsSetup struct {
	certs *tlscert.Files // nil: plain HTTP
	peers *x509.CertPool // nil: the system's roots
	// warning says that programs may read the key.
	warning string
}

// check refuses (usage error) a certificate without its key or the
// reverse, and an http --advertise-url of a replica that serves HTTPS
// only: the other replicas could not reach it.
func (f *tlsFlags) check(advertise string) error {
	if (f.tlsCertFile == "") != (f.tlsKeyFile == "") {
		return usageErrorf("run: --tls-cert-file and --tls-key-file go together")
	}
	if u, err := url.Parse(advertise); err == nil && u.Scheme == "http" && f.tlsCertFile != "" {
		return usageErrorf("run: --advertise-url %s: this replica serves HTTPS only (--tls-cert-file): give an https URL", advertise)
	}
	return nil
}

// load checks the flags and reads the certificate and key and the
// peers' CA file, so that a broken file stops the start with its name.
// A key that programs may read (grants) is served with a warning.
func (f *tlsFlags) load(advertise string, grants func(path string) bool, log *slog.Logger) (*httpsSetup, error) {
	if err := f.check(advertise); err != nil {
		return nil, err
	}
	s := &httpsSetup{}
	if f.tlsCertFile != "" {
		certs, err := tlscert.Load(f.tlsCertFile, f.tlsKeyFile, log.With("component", "tls"))
		if err != nil {
			return nil, fmt.Errorf("--tls-cert-file, --tls-key-file: %w", err)
		}
		s.certs = certs
		if grants(f.tlsKeyFile) {
			s.warning = "--tls-key-file " + f.tlsKeyFile + " lies where every program may read it (a system path of the sandbox such as /etc/ssl or /etc/pki, or --sandbox-ro, --sandbox-rw): keep it elsewhere, such as /etc/stackd"
		}
	}
	if f.peerCAFile != "" {
		pool, err := readCAFile(f.peerCAFile, "--peer-ca-file")
		if err != nil {
			return nil, err
		}
		s.peers = pool
	}
	return s, nil
}

// webOptions sets the HTTPS options of o, and registers the
// certificate's metrics in o.Registry.
func (s *httpsSetup) webOptions(o web.Options) web.Options {
	o.TLS, o.PeerRootCAs = s.certs, s.peers
	if s.warning != "" {
		o.Warnings = append(o.Warnings, s.warning)
	}
	if s.certs == nil {
		return o
	}
	if o.Registry != nil {
		o.Registry.MustRegister(s.certs)
	}
	return o
}

// grants says whether every program may read path; said of no path when
// the sandbox is off, which is warned of as a whole.
func (f *sandboxFlags) grants(path string) bool {
	if f.sandbox == sandbox.ModeOff {
		return false
	}
	return sandbox.Options{ReadOnly: f.sandboxRO, ReadWrite: f.sandboxRW}.Grants(path)
}

// readCAFile reads PEM CA certificates into a pool of their own: they
// replace the system's roots.
func readCAFile(path, flagName string) (*x509.CertPool, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", flagName, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(data) {
		return nil, fmt.Errorf("%s: %s holds no PEM certificate", flagName, path)
	}
	return pool, nil
}

// httpClient is the client commands' HTTP client: it verifies an https
// --server with the CA certificates of caFile, or the system's roots.
func httpClient(caFile string) (*http.Client, error) {
	if caFile == "" {
		return &http.Client{}, nil
	}
	pool, err := readCAFile(caFile, "--ca-file")
	if err != nil {
		return nil, err
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	return &http.Client{Transport: tr}, nil
}

// tlsHint is what a client adds to a failed request whose TLS
// verification failed: what to give.
func tlsHint(err error) string {
	var unknown x509.UnknownAuthorityError
	var host x509.HostnameError
	switch {
	case errors.As(err, &unknown):
		return "\nno CA this command trusts signed the daemon's certificate: give its CA certificate with --ca-file (or STACKD_CA_FILE)"
	case errors.As(err, &host):
		return "\nthe daemon's certificate is not for that host name: name the daemon in --server as its certificate does"
	}
	return ""
}
