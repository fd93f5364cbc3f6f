package tlscert

import (
	"bytes"
	"crypto/tls"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/stackd/stackd/web/tlstest"
)

// fakeClock is a clock tests move by hand.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// loadWithClock loads f with a clock the test moves; logs go to logs.
func loadWithClock(t *testing.T, f tlstest.Files, logs io.Writer) (*Files, *fakeClock) {
	t.Helper()
	c, err := Load(f.Cert, f.Key, slog.New(slog.NewTextHandler(logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	clock := &fakeClock{t: time.Now()}
	c.now = clock.now
	c.due.Store(clock.now().Add(c.interval).UnixNano())
	return c, clock
}

// served is the serial of the certificate c hands a handshake.
func served(t *testing.T, c *Files) string {
	t.Helper()
	cert, err := c.GetCertificate(&tls.ClientHelloInfo{})
	if err != nil {
		t.Fatal(err)
	}
	return cert.Leaf.SerialNumber.String()
}

// certMetrics are c's metrics: expiry, successful and failed reloads,
// last reload successful.
func certMetrics(t *testing.T, c *Files) (expiry, ok, failed, last float64) {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			switch mf.GetName() {
			case "stackd_tls_certificate_expiry_timestamp_seconds":
				expiry = m.GetGauge().GetValue()
			case "stackd_tls_certificate_last_reload_successful":
				last = m.GetGauge().GetValue()
			case "stackd_tls_certificate_reloads_total":
				if labelOf(m, "result") == "success" {
					ok = m.GetCounter().GetValue()
				} else {
					failed = m.GetCounter().GetValue()
				}
			}
		}
	}
	return expiry, ok, failed, last
}

func labelOf(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// TestLoadErrors: a pair that cannot be served is refused at
// start with an error naming the file at fault.
func TestLoadErrors(t *testing.T) {
	ca := tlstest.NewCA(t, "test CA")
	a, b := ca.Issue(t, time.Hour), ca.Issue(t, time.Hour)
	for _, c := range []struct {
		name      string
		cert, key []byte // nil: no such file
		want      string // the file named: "cert" or "key"
		msg       string
	}{
		{"no certificate file", nil, a.KeyPEM, "cert", "no such file"},
		{"no key file", a.CertPEM, nil, "key", "no such file"},
		{"empty certificate", []byte{}, a.KeyPEM, "cert", "no PEM CERTIFICATE block"},
		{"half a certificate", a.CertPEM[:len(a.CertPEM)/2], a.KeyPEM, "cert", "no PEM CERTIFICATE block"},
		{"files switched", a.KeyPEM, a.CertPEM, "cert", "no PEM CERTIFICATE block"},
		{"key not PEM", a.CertPEM, []byte("not a key\n"), "key", "no PEM PRIVATE KEY block"},
		{"another certificate's key", a.CertPEM, b.KeyPEM, "key", "is not the key of certificate"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			files := map[string]string{"cert": filepath.Join(dir, "cert.pem"), "key": filepath.Join(dir, "key.pem")}
			for kind, data := range map[string][]byte{"cert": c.cert, "key": c.key} {
				if data != nil {
					if err := os.WriteFile(files[kind], data, 0o600); err != nil {
						t.Fatal(err)
					}
				}
			}
			_, err := Load(files["cert"], files["key"], nil)
			if err == nil || !strings.Contains(err.Error(), files[c.want]) || !strings.Contains(err.Error(), c.msg) {
				t.Fatalf("err = %v, want %q naming %s", err, c.msg, files[c.want])
			}
		})
	}
	f := tlstest.WriteFiles(t, t.TempDir(), a)
	c, err := Load(f.Cert, f.Key, nil)
	if err != nil || c.Leaf().SerialNumber.Cmp(a.Cert.SerialNumber) != 0 {
		t.Fatalf("good pair: %v", err)
	}
}

// TestFileStamp: a file's stamp changes when its content does, written
// in place or replaced, not when it is only looked at again.
func TestFileStamp(t *testing.T) {
	for _, c := range []struct {
		name   string
		change func(t *testing.T, path string)
		same   bool
	}{
		{"untouched", func(*testing.T, string) {}, true},
		{"rewritten, other size", func(t *testing.T, p string) { write(t, p, "version two") }, false},
		{"rewritten, same size, later", func(t *testing.T, p string) {
			write(t, p, "version 2")
			later := time.Now().Add(time.Minute)
			if err := os.Chtimes(p, later, later); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"rewritten in place, same size and time", func(t *testing.T, p string) {
			fi, _ := os.Stat(p)
			write(t, p, "version 2")
			if err := os.Chtimes(p, fi.ModTime(), fi.ModTime()); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"rewritten, same content", func(t *testing.T, p string) { write(t, p, "version 1") }, true},
		{"renamed over, same size and time", func(t *testing.T, p string) {
			fi, _ := os.Stat(p)
			write(t, p+".new", "version 2")
			if err := os.Chtimes(p+".new", fi.ModTime(), fi.ModTime()); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(p+".new", p); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"removed", func(t *testing.T, p string) { _ = os.Remove(p) }, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "f")
			write(t, path, "version 1")
			before := stampFile(path)
			c.change(t, path)
			if got := stampFile(path).same(before); got != c.same {
				t.Fatalf("same = %v, want %v", got, c.same)
			}
		})
	}
	missing := filepath.Join(t.TempDir(), "missing")
	if !stampFile(missing).same(stampFile(missing)) {
		t.Fatal("a file missing twice changed")
	}
}

func write(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestReload: renewed files are served after the next look,
// which comes at most once per interval; a Kubernetes mount's link swap
// counts as a change.
func TestReload(t *testing.T) {
	ca := tlstest.NewCA(t, "test CA")
	for _, c := range []struct {
		name   string
		layout func(t testing.TB, dir string, p *tlstest.Pair) tlstest.Files
	}{
		{"renamed files", func(t testing.TB, dir string, p *tlstest.Pair) tlstest.Files { return tlstest.WriteFiles(t, dir, p) }},
		{"kubernetes secret mount", tlstest.Mount},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			one, two := ca.Issue(t, time.Hour), ca.Issue(t, 2*time.Hour)
			var logs bytes.Buffer
			certs, clock := loadWithClock(t, c.layout(t, dir, one), &logs)
			c.layout(t, dir, two)
			if got := served(t, certs); got != one.Serial() {
				t.Fatalf("served %s before the interval, want the first %s", got, one.Serial())
			}
			clock.add(certs.interval)
			if got := served(t, certs); got != two.Serial() {
				t.Fatalf("served %s after the interval, want the renewed %s", got, two.Serial())
			}
			expiry, ok, failed, last := certMetrics(t, certs)
			if expiry != float64(two.Cert.NotAfter.Unix()) || ok != 1 || failed != 0 || last != 1 {
				t.Fatalf("metrics: expiry %v (want %d), reloads %v, errors %v, last %v", expiry, two.Cert.NotAfter.Unix(), ok, failed, last)
			}
			clock.add(certs.interval)
			served(t, certs)
			if n := strings.Count(logs.String(), "TLS certificate reloaded"); n != 1 {
				t.Fatalf("%d reloads logged, want 1 (unchanged files are not read again):\n%s", n, logs.String())
			}
		})
	}
}

// TestBrokenRenewal: files that cannot be served keep the last
// good certificate in force; each broken version is logged once; the
// first good version is served.
func TestBrokenRenewal(t *testing.T) {
	ca := tlstest.NewCA(t, "test CA")
	one, two := ca.Issue(t, time.Hour), ca.Issue(t, 2*time.Hour)
	f := tlstest.WriteFiles(t, t.TempDir(), one)
	var logs bytes.Buffer
	certs, clock := loadWithClock(t, f, &logs)
	look := func() string {
		clock.add(certs.interval)
		return served(t, certs)
	}

	write(t, f.Cert, string(two.CertPEM[:100])) // half written
	if got := look(); got != one.Serial() {
		t.Fatalf("half-written file: served %s, want the last good %s", got, one.Serial())
	}
	look()
	look()
	if _, _, failed, last := certMetrics(t, certs); failed != 1 || last != 0 {
		t.Fatalf("errors %v, last successful %v; want 1 error: an unchanged broken file is not read again", failed, last)
	}
	write(t, f.Cert, string(two.CertPEM)) // the new certificate, its key not yet
	if got := look(); got != one.Serial() {
		t.Fatalf("mismatched pair: served %s, want the last good %s", got, one.Serial())
	}
	if !strings.Contains(logs.String(), "is not the key of certificate") {
		t.Fatalf("the mismatch is not logged:\n%s", logs.String())
	}
	write(t, f.Key, string(two.KeyPEM))
	if got := look(); got != two.Serial() {
		t.Fatalf("complete pair: served %s, want %s", got, two.Serial())
	}
	expiry, ok, failed, last := certMetrics(t, certs)
	if expiry != float64(two.Cert.NotAfter.Unix()) || ok != 1 || failed != 2 || last != 1 {
		t.Fatalf("metrics: expiry %v, reloads %v, errors %v, last %v", expiry, ok, failed, last)
	}
	if n := strings.Count(logs.String(), "cannot reload the TLS certificate"); n != 2 {
		t.Fatalf("%d failures logged, want 2:\n%s", n, logs.String())
	}
}

// TestConcurrent: handshakes during renewals always get a
// certificate (run with -race).
func TestConcurrent(t *testing.T) {
	ca := tlstest.NewCA(t, "test CA")
	dir := t.TempDir()
	certs, err := Load(tlstest.Mount(t, dir, ca.Issue(t, time.Hour)).Cert, filepath.Join(dir, "tls.key"), nil)
	if err != nil {
		t.Fatal(err)
	}
	certs.interval = 0
	certs.due.Store(0)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 200 {
				if c, err := certs.GetCertificate(nil); c == nil || err != nil {
					t.Error("no certificate", err)
					return
				}
			}
		})
	}
	for range 5 {
		tlstest.Mount(t, dir, ca.Issue(t, time.Hour))
	}
	wg.Wait()
}

// TestExpired: an expired certificate is served, being what the
// files hold, with a warning.
func TestExpired(t *testing.T) {
	ca := tlstest.NewCA(t, "test CA")
	var logs bytes.Buffer
	f := tlstest.WriteFiles(t, t.TempDir(), ca.Issue(t, -time.Hour))
	if _, err := Load(f.Cert, f.Key, slog.New(slog.NewTextHandler(&logs, nil))); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "the TLS certificate has expired") {
		t.Fatalf("no warning:\n%s", logs.String())
	}
}

// BenchmarkGetCertificate: the cost a handshake pays for the
// reload check, between looks at the files and when a look is due (two
// stats of unchanged files).
func BenchmarkGetCertificate(b *testing.B) {
	ca := tlstest.NewCA(b, "test CA")
	dir := b.TempDir()
	files := tlstest.Mount(b, dir, ca.Issue(b, time.Hour))
	for _, c := range []struct {
		name     string
		interval time.Duration
	}{{"between looks", time.Hour}, {"look due", 0}} {
		b.Run(c.name, func(b *testing.B) {
			certs, err := Load(files.Cert, files.Key, nil)
			if err != nil {
				b.Fatal(err)
			}
			certs.interval = c.interval
			certs.due.Store(0)
			for b.Loop() {
				if cert, _ := certs.GetCertificate(nil); cert == nil {
					b.Fatal("no certificate")
				}
			}
		})
	}
}
