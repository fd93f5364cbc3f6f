package sandbox

import (
	"os"
	"path/filepath"
	"testing"
)

// TestGrants: paths under the system paths and the daemon-wide extra
// paths are readable by programs, through symbolic links too; the rest
// of /etc (private keys among it) and other directories are not.
func TestGrants(t *testing.T) {
	ro, elsewhere := t.TempDir(), t.TempDir()
	secret := filepath.Join(ro, "tls.key")
	if err := os.WriteFile(secret, []byte("key"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(elsewhere, "tls.key")
	if err := os.Symlink(secret, link); err != nil {
		t.Fatal(err)
	}
	o := Options{ReadOnly: []string{ro}}
	for _, c := range []struct {
		path string
		want bool
	}{
		{"/etc/ssl/private/stackd.key", false},
		{"/etc/pki/tls/private/stackd.key", false},
		{"/etc/ssl/certs/ca-certificates.crt", true},
		{"/etc/hosts", true},
		{"/etc/stackd/tls.key", false},
		{"/etc/sslx/stackd.key", false},
		{"/var/lib/stackd/tls.key", false},
		{secret, true},
		{link, true},
		{filepath.Join(elsewhere, "other.key"), false},
	} {
		if got := o.Grants(c.path); got != c.want {
			t.Errorf("Grants(%s) = %v, want %v", c.path, got, c.want)
		}
	}
	if (Options{}).Grants(secret) {
		t.Errorf("Grants(%s) without --sandbox-ro", secret)
	}
}
