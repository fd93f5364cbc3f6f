package cluster

import (
	"context"
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

	"go.etcd.io/etcd/client/pkg/v3/transport"
	"go.etcd.io/etcd/server/v3/embed"

	"github.com/stackd/stackd/cluster/etcdtest"
)

// TestTLS: a replica reaches an etcd that requires client certificates
// with --cluster-etcd-ca-file, -cert-file and -key-file, and not without
// them.
func TestTLS(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an etcd member")
	}
	dir := t.TempDir()
	ca, caKey := newCert(t, dir, "ca", nil, nil)
	newCert(t, dir, "server", ca, caKey)
	newCert(t, dir, "client", ca, caKey)
	file := func(name string) string { return filepath.Join(dir, name) }
	e := etcdtest.StartWith(t, 1, func(cfg *embed.Config) {
		cfg.ClientTLSInfo = transport.TLSInfo{CertFile: file("server.pem"), KeyFile: file("server-key.pem"),
			TrustedCAFile: file("ca.pem"), ClientCertAuth: true}
	})
	opts := Options{Endpoints: e.Endpoints(), Prefix: "/tls/", Node: "node-1",
		CAFile: file("ca.pem"), CertFile: file("client.pem"), KeyFile: file("client-key.pem")}
	c, err := Open(context.Background(), opts)
	if err != nil {
		t.Fatalf("Open with a client certificate: %v", err)
	}
	if err := c.PutMeta("k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	c.Close()

	opts.CertFile, opts.KeyFile = "", ""
	if c, err := Open(context.Background(), opts); err == nil {
		c.Close()
		t.Fatal("Open without a client certificate succeeded")
	}
	opts.CertFile = file("client.pem")
	if _, err := Open(context.Background(), opts); err == nil {
		t.Fatal("Open with a certificate but no key succeeded")
	}
}

// newCert writes <name>.pem and <name>-key.pem in dir: a CA when parent
// is nil, else a certificate for 127.0.0.1 signed by parent.
func newCert(t *testing.T, dir, name string, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
	}
	signer, signerKey := tmpl, key
	if parent == nil {
		tmpl.IsCA, tmpl.BasicConstraintsValid = true, true
		tmpl.KeyUsage |= x509.KeyUsageCertSign
	} else {
		signer, signerKey = parent, parentKey
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signer, &key.PublicKey, signerKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	write := func(file, typ string, b []byte) {
		if err := os.WriteFile(filepath.Join(dir, file), pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: b}), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(name+".pem", "CERTIFICATE", der)
	write(name+"-key.pem", "EC PRIVATE KEY", keyDER)
	cert, _ := x509.ParseCertificate(der)
	return cert, key
}
