package gitwatch

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

const token = "tok-SENTINEL-5f2a"

var (
	sharedOnce sync.Once
	shared     fixture
	sharedRoot string
)

func TestMain(m *testing.M) {
	home, err := os.MkdirTemp("", "gitwatch-home-")
	if err != nil {
		panic(err)
	}
	// Isolate git and go-git from the machine's configuration.
	os.Setenv("HOME", home)
	os.Setenv("GIT_CONFIG_GLOBAL", "/dev/null")
	os.Setenv("GIT_CONFIG_NOSYSTEM", "true")
	os.Setenv("GIT_TERMINAL_PROMPT", "0")
	os.Unsetenv("SSH_KNOWN_HOSTS")
	os.Unsetenv("SSH_AUTH_SOCK")
	code := m.Run()
	os.RemoveAll(home)
	if sharedRoot != "" {
		os.RemoveAll(sharedRoot)
	}
	os.Exit(code)
}

// fixture is a repository built with the git CLI:
//
//	c1: README=one, proj/Pulumi.yaml, afile, evil -> /etc, up -> ../..,
//	    projlink -> proj; tags v1 (lightweight) and both (lightweight)
//	c2: README=two; annotated tag v2; branches dev and both
//	c3: README=three; branch main
type fixture struct {
	root       string // the directory served (GIT_PROJECT_ROOT)
	path       string // root/repo
	c1, c2, c3 string
	tagV2      string // the annotated tag object
}

func (fx fixture) fileURL() string { return "file://" + fx.path }

func sharedFixture(tb testing.TB) fixture {
	sharedOnce.Do(func() {
		dir, err := os.MkdirTemp("", "gitwatch-fixture-")
		if err != nil {
			tb.Fatal(err)
		}
		sharedRoot = dir
		shared = buildRepo(tb, dir)
	})
	if shared.c3 == "" {
		tb.Fatal("shared fixture failed to build")
	}
	return shared
}

func gitRun(tb testing.TB, dir string, args ...string) string {
	tb.Helper()
	base := []string{"-c", "user.name=t", "-c", "user.email=t@example.com",
		"-c", "commit.gpgsign=false", "-c", "tag.gpgsign=false"}
	cmd := exec.Command("git", append(base, args...)...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		tb.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

func writeFile(tb testing.TB, path, content string) {
	tb.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		tb.Fatal(err)
	}
}

func buildRepo(tb testing.TB, root string) fixture {
	tb.Helper()
	fx := fixture{root: root, path: filepath.Join(root, "repo")}
	if err := os.MkdirAll(fx.path, 0o755); err != nil {
		tb.Fatal(err)
	}
	p := fx.path
	gitRun(tb, p, "init", "-q", "-b", "main")
	writeFile(tb, filepath.Join(p, "README"), "one")
	writeFile(tb, filepath.Join(p, "proj", "Pulumi.yaml"), "name: p\nruntime: yaml\n")
	writeFile(tb, filepath.Join(p, "afile"), "not a dir")
	for name, target := range map[string]string{"evil": "/etc", "up": "../..", "projlink": "proj"} {
		if err := os.Symlink(target, filepath.Join(p, name)); err != nil {
			tb.Fatal(err)
		}
	}
	fx.c1 = commit(tb, p, "c1")
	gitRun(tb, p, "tag", "v1")
	gitRun(tb, p, "tag", "both")
	writeFile(tb, filepath.Join(p, "README"), "two")
	fx.c2 = commit(tb, p, "c2")
	gitRun(tb, p, "tag", "-a", "v2", "-m", "release v2")
	fx.tagV2 = gitRun(tb, p, "rev-parse", "refs/tags/v2")
	gitRun(tb, p, "branch", "dev")
	gitRun(tb, p, "branch", "both")
	writeFile(tb, filepath.Join(p, "README"), "three")
	fx.c3 = commit(tb, p, "c3")
	return fx
}

func commit(tb testing.TB, dir, msg string) string {
	tb.Helper()
	gitRun(tb, dir, "add", "-A")
	gitRun(tb, dir, "commit", "-q", "-m", msg)
	return gitRun(tb, dir, "rev-parse", "HEAD")
}

// gitServer is a smart-HTTP server running the real git http-backend.
type gitServer struct {
	*httptest.Server
	infoRefs    atomic.Int64 // GET .../info/refs
	requests    atomic.Int64 // every request
	inflight    atomic.Int64
	maxInflight atomic.Int64
	delay       atomic.Int64                  // nanoseconds to sleep before answering info/refs
	hold        atomic.Pointer[chan struct{}] // see holdNext
}

// holdNext holds the next info/refs request (the next ls-remote) at the
// server, counted in infoRefs, until release is called, at the latest
// when the test ends: a test then knows that ls-remote is in flight.
func (s *gitServer) holdNext(tb testing.TB) (release func()) {
	ch := make(chan struct{})
	var once sync.Once
	release = func() { once.Do(func() { close(ch) }) }
	tb.Cleanup(release) // before the server's Close, which waits for it
	s.hold.Store(&ch)
	return release
}

// newGitServer serves root on 127.0.0.1; a non-empty token requires basic
// auth with user "git" and that password.
func newGitServer(tb testing.TB, root, token string) *gitServer {
	tb.Helper()
	gitPath, err := exec.LookPath("git")
	if err != nil {
		tb.Skip("git not installed")
	}
	backend := &cgi.Handler{
		Path: gitPath,
		Args: []string{"http-backend"},
		Env: []string{
			"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1",
			"GIT_CONFIG_NOSYSTEM=true", "GIT_CONFIG_GLOBAL=/dev/null", "HOME=" + root,
		},
		InheritEnv: []string{"PATH"},
		Stderr:     io.Discard,
	}
	s := &gitServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.requests.Add(1)
		n := s.inflight.Add(1)
		defer s.inflight.Add(-1)
		for m := s.maxInflight.Load(); n > m && !s.maxInflight.CompareAndSwap(m, n); m = s.maxInflight.Load() {
		}
		if token != "" && r.Header.Get("Authorization") != "Bearer "+token { // or a bearer token, as Flux sends one
			if u, p, ok := r.BasicAuth(); !ok || u != "git" || p != token {
				w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
				http.Error(w, "unauthorized", http.StatusUnauthorized)
				return
			}
		}
		if strings.HasSuffix(r.URL.Path, "/info/refs") {
			s.infoRefs.Add(1)
			if h := s.hold.Swap(nil); h != nil {
				select {
				case <-*h:
				case <-r.Context().Done():
				}
			}
			time.Sleep(time.Duration(s.delay.Load()))
		}
		backend.ServeHTTP(w, r)
	}))
	tb.Cleanup(s.Close)
	return s
}

func (s *gitServer) repoURL() string { return s.URL + "/repo" }

// hangServer accepts TCP connections and never answers; it returns its
// address.
func hangServer(tb testing.TB) string {
	return serveTCP(tb, func(c net.Conn) { _, _ = io.Copy(io.Discard, c) })
}

// serveTCP listens on loopback and runs handle for each connection until
// the test ends, when it closes the listener and every connection and
// waits for the handlers. It returns the address.
func serveTCP(tb testing.TB, handle func(net.Conn)) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns []net.Conn
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				handle(c)
			}()
		}
	}()
	tb.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}

// closedAddr returns a loopback address nothing listens on.
func closedAddr(tb testing.TB) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// sshServer runs git-upload-pack for one accepted client key.
type sshServer struct {
	addr       string
	hostKey    ssh.Signer
	knownHosts string // a known_hosts file with hostKey for addr
	root       string
}

func newKey(tb testing.TB) ed25519.PrivateKey {
	tb.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	return priv
}

// keyPEM encodes priv in OpenSSH format, encrypted when passphrase is set.
func keyPEM(tb testing.TB, priv ed25519.PrivateKey, passphrase string) []byte {
	tb.Helper()
	var b *pem.Block
	var err error
	if passphrase == "" {
		b, err = ssh.MarshalPrivateKey(priv, "test")
	} else {
		b, err = ssh.MarshalPrivateKeyWithPassphrase(priv, "test", []byte(passphrase))
	}
	if err != nil {
		tb.Fatal(err)
	}
	return pem.EncodeToMemory(b)
}

func newSSHServer(tb testing.TB, root string, client ed25519.PrivateKey) *sshServer {
	tb.Helper()
	hostKey, err := ssh.NewSignerFromKey(newKey(tb))
	if err != nil {
		tb.Fatal(err)
	}
	clientPub, err := ssh.NewPublicKey(client.Public())
	if err != nil {
		tb.Fatal(err)
	}
	cfg := &ssh.ServerConfig{
		PublicKeyCallback: func(_ ssh.ConnMetadata, k ssh.PublicKey) (*ssh.Permissions, error) {
			if bytes.Equal(k.Marshal(), clientPub.Marshal()) {
				return nil, nil
			}
			return nil, fmt.Errorf("unknown key")
		},
	}
	cfg.AddHostKey(hostKey)
	s := &sshServer{hostKey: hostKey, root: root}
	s.addr = serveTCP(tb, func(c net.Conn) { s.serve(c, cfg) })
	s.knownHosts = writeKnownHosts(tb, s.addr, hostKey.PublicKey())
	return s
}

func writeKnownHosts(tb testing.TB, addr string, key ssh.PublicKey) string {
	tb.Helper()
	p := filepath.Join(tb.TempDir(), "known_hosts")
	line := knownhosts.Line([]string{knownhosts.Normalize(addr)}, key)
	if err := os.WriteFile(p, []byte(line+"\n"), 0o600); err != nil {
		tb.Fatal(err)
	}
	return p
}

func (s *sshServer) url(path string) string { return "ssh://git@" + s.addr + path }

func (s *sshServer) serve(c net.Conn, cfg *ssh.ServerConfig) {
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second)) // tests never hang on it
	sc, chans, reqs, err := ssh.NewServerConn(c, cfg)
	if err != nil {
		return
	}
	defer sc.Close()
	go ssh.DiscardRequests(reqs)
	for nc := range chans {
		if nc.ChannelType() != "session" {
			nc.Reject(ssh.UnknownChannelType, "session only")
			continue
		}
		ch, creqs, err := nc.Accept()
		if err != nil {
			return
		}
		go s.session(ch, creqs)
	}
}

func (s *sshServer) session(ch ssh.Channel, reqs <-chan *ssh.Request) {
	defer ch.Close()
	for req := range reqs {
		if req.Type != "exec" {
			req.Reply(false, nil)
			continue
		}
		var p struct{ Command string }
		if err := ssh.Unmarshal(req.Payload, &p); err != nil {
			req.Reply(false, nil)
			return
		}
		path, ok := strings.CutPrefix(p.Command, "git-upload-pack ")
		path = strings.Trim(path, "'")
		if !ok || !strings.HasPrefix(path, s.root) {
			req.Reply(false, nil)
			return
		}
		req.Reply(true, nil)
		go ssh.DiscardRequests(reqs)
		code := runUploadPack(ch, path)
		ch.SendRequest("exit-status", false, ssh.Marshal(struct{ Status uint32 }{code}))
		return
	}
}

func runUploadPack(ch ssh.Channel, path string) uint32 {
	cmd := exec.Command("git", "upload-pack", path)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return 1
	}
	cmd.Stdout = ch
	cmd.Stderr = ch.Stderr()
	if err := cmd.Start(); err != nil {
		return 1
	}
	go func() {
		io.Copy(stdin, ch)
		stdin.Close()
	}()
	if err := cmd.Wait(); err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			return uint32(ee.ExitCode())
		}
		return 1
	}
	return 0
}

// testLogger writes to t.Log so that logs can be checked for secrets.
type logBuf struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func newLogger(l *logBuf) *slog.Logger {
	return slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// noLeak fails if err's message contains any of the secrets.
func noLeak(t *testing.T, err error, secrets ...string) {
	t.Helper()
	if err == nil {
		t.Fatal("expected an error")
	}
	for _, s := range secrets {
		if s != "" && strings.Contains(err.Error(), s) {
			t.Fatalf("error leaks %q: %v", s, err)
		}
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// siblings lists dir's ".tmp-" and ".old-" siblings.
func siblings(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Dir(dir))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	base := filepath.Base(dir)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), base+".tmp-") || strings.HasPrefix(e.Name(), base+".old-") {
			out = append(out, e.Name())
		}
	}
	return out
}
