// Package tlstest makes certificates for stackd's TLS tests: a private
// certificate authority made in the test, server certificates it issues
// for loopback, and files laid out and replaced the ways certificate
// tools do it (a file renamed over the old one, a Kubernetes secret
// mount whose directory link is swapped).
package tlstest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// CA is a certificate authority made in the test.
type CA struct {
	Cert *x509.Certificate
	// PEM is Cert, PEM-encoded.
	PEM []byte
	key *ecdsa.PrivateKey
}

// Pair is a server certificate and its key, PEM-encoded.
type Pair struct {
	Cert            *x509.Certificate
	CertPEM, KeyPEM []byte
}

// Serial is the certificate's serial number, in decimal.
func (p *Pair) Serial() string { return p.Cert.SerialNumber.String() }

// NewCA makes a certificate authority named name.
func NewCA(t testing.TB, name string) *CA {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber:          serial(t),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &CA{Cert: cert, PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), key: key}
}

// Pool is a pool holding the CA only.
func (ca *CA) Pool() *x509.CertPool {
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	return pool
}

// File writes the CA's certificate into a file of t's and names it.
func (ca *CA) File(t testing.TB) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(path, ca.PEM, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// Issue makes a server certificate for 127.0.0.1, ::1 and localhost,
// valid for validFor from now (a negative validFor: expired).
func (ca *CA) Issue(t testing.TB, validFor time.Duration) *Pair {
	t.Helper()
	key := newKey(t)
	now := time.Now()
	notBefore := now.Add(-time.Hour)
	if validFor < 0 {
		notBefore = now.Add(validFor - time.Hour)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(t),
		Subject:      pkix.Name{CommonName: "stackd"},
		NotBefore:    notBefore,
		NotAfter:     now.Add(validFor),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return &Pair{Cert: cert,
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})}
}

// Files are a certificate file and a key file.
type Files struct {
	Cert, Key string
}

// WriteFiles writes p as cert.pem and key.pem into dir.
func WriteFiles(t testing.TB, dir string, p *Pair) Files {
	t.Helper()
	f := Files{Cert: filepath.Join(dir, "cert.pem"), Key: filepath.Join(dir, "key.pem")}
	Replace(t, f, p)
	return f
}

// Replace writes p over f as certbot and most tools do: each file is
// written beside its old self and renamed over it, the certificate
// first.
func Replace(t testing.TB, f Files, p *Pair) {
	t.Helper()
	for _, file := range []struct {
		path string
		data []byte
	}{{f.Cert, p.CertPEM}, {f.Key, p.KeyPEM}} {
		tmp := file.path + ".tmp"
		if err := os.WriteFile(tmp, file.data, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, file.path); err != nil {
			t.Fatal(err)
		}
	}
}

// Mount lays p out in dir as Kubernetes mounts a TLS secret: tls.crt and
// tls.key are links through the directory link ..data to a directory of
// this version. Mount again to replace the version: both files change at
// once, by a rename of the ..data link.
func Mount(t testing.TB, dir string, p *Pair) Files {
	t.Helper()
	version := "..v" + p.Serial()
	if err := os.Mkdir(filepath.Join(dir, version), 0o700); err != nil {
		t.Fatal(err)
	}
	f := Files{Cert: filepath.Join(dir, "tls.crt"), Key: filepath.Join(dir, "tls.key")}
	for name, data := range map[string][]byte{"tls.crt": p.CertPEM, "tls.key": p.KeyPEM} {
		if err := os.WriteFile(filepath.Join(dir, version, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(filepath.Join("..data", name), filepath.Join(dir, name)); err != nil && !os.IsExist(err) {
			t.Fatal(err)
		}
	}
	tmp := filepath.Join(dir, "..data_tmp")
	if err := os.Symlink(version, tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	return f
}

func newKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

func serial(t testing.TB) *big.Int {
	t.Helper()
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		t.Fatal(err)
	}
	return n.Add(n, big.NewInt(1))
}
