package main

import (
	"archive/tar"
	"bytes"
	"cmp"
	"debug/elf"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The container image test builds the image with `make image` and runs it
// with podman and runc, as .ci/run installs them. The image is FROM
// scratch; see the Containerfile.

const (
	testImage = "localhost/stackd-test"
	testTag   = "test" // the image's version, and stackd's
	imageUID  = 65532
)

// containersConf is what podman needs on machines whose cgroups are in
// hybrid mode, where the default runtime (crun) and cgroup manager fail.
const containersConf = `[containers]
default_ulimits = []

[engine]
cgroup_manager = "cgroupfs"
`

// podman runs the podman CLI with runc and containersConf.
type podman struct {
	t    *testing.T
	path string
	env  []string
}

func newPodman(t *testing.T) *podman {
	t.Helper()
	path := tool(t, "podman")
	tool(t, "runc")
	conf := filepath.Join(t.TempDir(), "containers.conf")
	if err := os.WriteFile(conf, []byte(containersConf), 0o644); err != nil {
		t.Fatal(err)
	}
	return &podman{t: t, path: path, env: append(os.Environ(), "CONTAINERS_CONF="+conf)}
}

// try runs podman with args and returns its stdout, and an error holding
// its stderr when it fails.
func (p *podman) try(args ...string) (string, error) {
	cmd := exec.Command(p.path, append([]string{"--runtime", "runc"}, args...)...)
	cmd.Env = p.env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("podman %s: %v\n%s%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String(), nil
}

// run is try that fails the test on error.
func (p *podman) run(args ...string) string {
	p.t.Helper()
	out, err := p.try(args...)
	if err != nil {
		p.t.Fatal(err)
	}
	return strings.TrimSpace(out)
}

// start runs the test image detached, without an init process (stackd is
// PID 1 and reaps what pulumi leaves behind), in a container named name
// with podman's options. The container is removed
// when the test ends; its log is shown when the test failed.
func (p *podman) start(name string, options ...string) {
	p.t.Helper()
	p.startImage(testImage+":"+testTag, name, options...)
}

// startImage is start with another image.
func (p *podman) startImage(image, name string, options ...string) {
	p.t.Helper()
	p.run(append([]string{"run", "-d", "--name", name}, append(options, image)...)...)
	p.t.Cleanup(func() {
		if p.t.Failed() {
			logs, _ := p.logs(name)
			p.t.Logf("log of container %s:\n%s", name, logs)
		}
		if _, err := p.try("rm", "-f", "-t", "0", name); err != nil {
			p.t.Error(err)
		}
	})
}

// logs is the container's output: stackd logs to stderr.
func (p *podman) logs(name string) (string, error) {
	cmd := exec.Command(p.path, "--runtime", "runc", "logs", name)
	cmd.Env = p.env
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// waitLog waits until the container's log holds s.
func (p *podman) waitLog(name, s string, timeout time.Duration) {
	p.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		logs, err := p.logs(name)
		if err == nil && strings.Contains(logs, s) {
			return
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("container %s: no %q in its log after %v: %v\n%s", name, s, timeout, err, logs)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestContainerImage builds the image, checks what it holds, then runs it
// with a mounted config, secrets and data directory: stackd fetches a
// repository over HTTP, deploys its stack with the image's pulumi and
// YAML language host (and the test provider, mounted), and stops cleanly
// on SIGTERM. Last, it checks that the daemon is reachable through a
// published port only when told to listen on all interfaces.
func TestContainerImage(t *testing.T) {
	p, root := containerTest(t)

	began := time.Now()
	buildImage(t, root)
	t.Cleanup(func() { _, _ = p.try("rmi", "-f", testImage+":"+testTag, testImage+":latest") })
	t.Logf("make image: %v", time.Since(began).Round(time.Millisecond))

	checkImageConfig(t, p)
	checkImageFiles(t, p)
	ref := testImage + ":" + testTag
	if out := p.run("run", "--rm", "--entrypoint", "/usr/local/bin/stackd", ref, "version"); !strings.HasPrefix(out, "stackd "+testTag+" ") {
		t.Fatalf("stackd version in the image: %q", out)
	}
	if out := p.run("run", "--rm", "--entrypoint", "/usr/local/bin/pulumi", ref, "version"); !strings.HasPrefix(out, "v3.") {
		t.Fatalf("pulumi version in the image: %q", out)
	}

	began = time.Now()
	f := newStackFixture(t, root)
	name := f.deploy(p, ref)
	t.Logf("container started and deployed the stack in %v", time.Since(began).Round(time.Millisecond))

	// stackd runs as stackd (65532), as PID 1, and reaps the plugins
	// pulumi leaves behind: no zombie is left.
	top := p.run("top", name, "huser", "user", "comm")
	if !hasLine(top, fmt.Sprintf("%d stackd stackd", imageUID)) {
		t.Fatalf("podman top: stackd does not run as the user stackd (%d):\n%s", imageUID, top)
	}
	pid, err := strconv.Atoi(p.run("inspect", "--format", "{{.State.Pid}}", name))
	if err != nil {
		t.Fatal(err)
	}
	waitNoZombies(t, pid, 5*time.Second)

	began = time.Now()
	p.run("stop", "-t", "60", name)
	if code := p.run("inspect", "--format", "{{.State.ExitCode}}", name); code != "0" {
		t.Fatalf("the container exited with %s after SIGTERM", code)
	}
	t.Logf("stopped in %v", time.Since(began).Round(time.Millisecond))
	// The image's own stackd checks the store the daemon left.
	check := p.run("run", "--rm", "--network", "none", "-v", f.dataDir+":/var/lib/stackd",
		"--entrypoint", "/usr/local/bin/stackd", ref, "store", "check", "--data-dir", "/var/lib/stackd")
	if !strings.Contains(check, "1 stack") {
		t.Fatalf("store check after the stop: %s", check)
	}

	// On the default network, with the port published: the daemon listens
	// on the container's loopback unless STACKD_LISTEN says otherwise.
	began = time.Now()
	for _, told := range []bool{false, true} {
		name := fmt.Sprintf("stackd-test-port-%t-%s", told, strconv.FormatInt(time.Now().UnixNano(), 36))
		published := freeAddr(t)
		data := filepath.Join(t.TempDir(), "data")
		if err := os.Mkdir(data, 0o755); err != nil {
			t.Fatal(err)
		}
		opts := []string{"-p", published + ":8080", "-v", f.cfgDir + ":/etc/stackd:ro", "-v", data + ":/var/lib/stackd:U"}
		if told {
			opts = append(opts, "-e", "STACKD_LISTEN=0.0.0.0:8080")
		}
		p.start(name, opts...)
		p.waitLog(name, "stackd started", 30*time.Second)
		in := &instance{t: t, url: "http://" + published}
		if told {
			waitReadyz(t, in, 30*time.Second)
			continue
		}
		p.waitLog(name, "addr=127.0.0.1:8080", time.Second)
		if code, _, err := in.tryGet("/readyz", nil); err == nil {
			t.Fatalf("GET /readyz through the published port answered %d, though stackd was not told to listen beyond loopback", code)
		}
	}
	t.Logf("published-port checks: %v", time.Since(began).Round(time.Millisecond))
}

// stackFixture is what the container tests mount: a config whose stack
// tracks a repository served over HTTP with a token, the token as a
// secret, the test provider built statically, a data directory, and the
// directory the stack writes its file into.
type stackFixture struct {
	t                                               *testing.T
	cfgDir, dataDir, secretsDir, pluginsDir, outDir string
}

func newStackFixture(t *testing.T, root string) *stackFixture {
	t.Helper()
	r := newRepo(t)
	r.commit(map[string]string{"Pulumi.yaml": program("v1")})
	const token = "container-token"
	url := gitHTTP(t, filepath.Dir(r.dir), token) + "/repo"
	dir := t.TempDir()
	f := &stackFixture{t: t, cfgDir: filepath.Join(dir, "config"), dataDir: filepath.Join(dir, "data"),
		secretsDir: filepath.Join(dir, "secrets"), pluginsDir: filepath.Join(dir, "plugins"), outDir: filepath.Join(dir, "out")}
	for _, d := range []string{f.cfgDir, f.dataDir, filepath.Join(f.secretsDir, "git"), filepath.Join(f.pluginsDir, "bin"), f.outDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	buildStaticProvider(t, root, filepath.Join(f.pluginsDir, "bin"))
	if err := os.WriteFile(filepath.Join(f.secretsDir, "git", "token"), []byte(token), 0o600); err != nil {
		t.Fatal(err)
	}
	config := fmt.Sprintf(`stacks:
  - name: app
    stack: app
    projectRepo: %s
    branch: main
    config:
      path: /out/note.txt
    gitAuth:
      accessToken: {type: Secret, secret: {name: git, key: token}}
`, url)
	if err := os.WriteFile(filepath.Join(f.cfgDir, "stackd.yaml"), []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

// deploy runs image with the fixture mounted and waits until its stack
// is deployed; it returns the container's name. Host
// networking lets the container reach the repository on the host's
// loopback; STACKD_LISTEN keeps the daemon there too. :U gives the
// mounted directories to the container's user. path is the image's PATH
// with the test provider's directory added.
func (f *stackFixture) deploy(p *podman, image string, path ...string) string {
	t := f.t
	t.Helper()
	if len(path) == 0 {
		path = []string{"/usr/local/bin"}
	}
	name := "stackd-test-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	addr := freeAddr(t)
	p.startImage(image, name, "--network", "host",
		"-v", f.cfgDir+":/etc/stackd:ro",
		"-v", f.dataDir+":/var/lib/stackd:U",
		"-v", f.secretsDir+":/run/stackd-secrets:ro,U",
		"-v", f.pluginsDir+":/opt/stackdtest:U",
		"-v", f.outDir+":/out:U",
		"-e", "PATH="+strings.Join(append(path, "/opt/stackdtest/bin"), ":"),
		"-e", "STACKD_LISTEN="+addr,
		"-e", "STACKD_SECRETS_DIR=/run/stackd-secrets",
		"-e", "STACKD_SANDBOX_RW=/out", // the test program's File resource
		"-e", "STACKD_RETRY_BACKOFF=1s")
	in := &instance{t: t, url: "http://" + addr}
	waitReadyz(t, in, 30*time.Second)
	v := in.waitStack("app", "deployed", 2*time.Minute, isReady)
	if got := readFile(t, filepath.Join(f.outDir, "note.txt")); got != "hello v1" || output(v, "content") != "hello v1" {
		t.Fatalf("file = %q, output %q after the deploy", got, output(v, "content"))
	}
	return name
}

// containerTest skips under -short, and returns podman and the
// repository's root.
func containerTest(t *testing.T) (*podman, string) {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs the container image")
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	return newPodman(t), root
}

// buildImage runs `make image` in root, tagging testImage, or the make
// target and variables given.
func buildImage(t *testing.T, root string, target ...string) {
	t.Helper()
	if len(target) == 0 {
		target = []string{"image", "IMAGE=" + testImage}
	}
	cmd := exec.Command(tool(t, "make"), append([]string{"-C", root, "VERSION=" + testTag}, target...)...)
	// Not the settings of a make running this test.
	cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool {
		return strings.HasPrefix(kv, "MAKEFLAGS=") || strings.HasPrefix(kv, "MFLAGS=") || strings.HasPrefix(kv, "MAKELEVEL=")
	})
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make %s: %v\n%s", target[0], err, out)
	}
}

// buildStaticProvider builds the test provider without cgo into dir: the
// image has no C library.
func buildStaticProvider(t *testing.T, root, dir string) {
	t.Helper()
	cmd := exec.Command("go", "build", "-trimpath", "-o", filepath.Join(dir, "pulumi-resource-stackdtest"), ".")
	cmd.Dir = filepath.Join(root, "testdata", "provider")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build the test provider: %v\n%s", err, out)
	}
}

// checkImageConfig checks the image's user, entrypoint and environment,
// and logs its size.
func checkImageConfig(t *testing.T, p *podman) {
	t.Helper()
	checkConfigOf(t, p, testImage+":"+testTag, "STACKD_PULUMI_BIN=/usr/local/bin")
}

// checkConfigOf checks the user, entrypoint, environment (env too),
// working directory and volume that every stackd image has.
func checkConfigOf(t *testing.T, p *podman, ref string, env ...string) {
	t.Helper()
	var img []struct {
		Size   int64
		Config struct {
			User       string
			Entrypoint []string
			Cmd        []string
			Env        []string
			WorkingDir string
			Volumes    map[string]any
		}
	}
	if err := json.Unmarshal([]byte(p.run("image", "inspect", ref)), &img); err != nil || len(img) != 1 {
		t.Fatalf("podman image inspect: %v %+v", err, img)
	}
	c := img[0].Config
	t.Logf("image %s: %.1f MB", ref, float64(img[0].Size)/1e6)
	if c.User != fmt.Sprintf("%d:%d", imageUID, imageUID) {
		t.Errorf("image user %q, want %d:%d", c.User, imageUID, imageUID)
	}
	if !slices.Equal(c.Entrypoint, []string{"/usr/local/bin/stackd", "run"}) || len(c.Cmd) != 0 {
		t.Errorf("entrypoint %q, cmd %q", c.Entrypoint, c.Cmd)
	}
	for _, kv := range append([]string{"STACKD_CONFIG=/etc/stackd", "STACKD_DATA_DIR=/var/lib/stackd"}, env...) {
		if !slices.Contains(c.Env, kv) {
			t.Errorf("the image's environment lacks %s: %q", kv, c.Env)
		}
	}
	for _, kv := range c.Env {
		if strings.HasPrefix(kv, "STACKD_LISTEN=") {
			t.Errorf("the image sets %s: stackd must listen beyond loopback only when told so", kv)
		}
	}
	if _, ok := c.Volumes["/var/lib/stackd"]; !ok || c.WorkingDir != "/var/lib/stackd" {
		t.Errorf("volumes %v, working dir %q", c.Volumes, c.WorkingDir)
	}
}

// checkImageFiles checks that the image holds exactly the expected files,
// owners and modes, and that its programs are static.
func checkImageFiles(t *testing.T, p *podman) {
	t.Helper()
	archive := filepath.Join(t.TempDir(), "image.tar")
	p.run("save", "--format", "docker-archive", "-o", archive, testImage+":"+testTag)
	files, err := imageFiles(archive)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"etc drwxr-xr-x 0:0",
		"etc/group -rw-r--r-- 0:0",
		"etc/passwd -rw-r--r-- 0:0",
		"etc/ssl drwxr-xr-x 0:0",
		"etc/ssl/certs drwxr-xr-x 0:0",
		"etc/ssl/certs/ca-certificates.crt -rw-r--r-- 0:0",
		"etc/stackd drwxr-xr-x 0:0",
		"tmp dtrwxrwxrwx 0:0",
		"usr drwxr-xr-x 0:0",
		"usr/local drwxr-xr-x 0:0",
		"usr/local/bin drwxr-xr-x 0:0",
		"usr/local/bin/pulumi -rwxr-xr-x 0:0",
		"usr/local/bin/pulumi-language-yaml -rwxr-xr-x 0:0",
		"usr/local/bin/stackd -rwxr-xr-x 0:0",
		"var drwxr-xr-x 0:0",
		"var/lib drwxr-xr-x 0:0",
		fmt.Sprintf("var/lib/stackd drwx------ %d:%d", imageUID, imageUID),
	}
	var got []string
	for _, f := range files {
		got = append(got, f.String())
	}
	if !slices.Equal(got, want) {
		t.Fatalf("the image's files:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for _, f := range files {
		switch {
		case strings.HasPrefix(f.path, "usr/local/bin/"):
			if f.interp || len(f.libs) > 0 {
				t.Errorf("%s is not static: interpreter %t, libraries %q", f.path, f.interp, f.libs)
			}
		case f.path == "etc/passwd":
			if !strings.Contains(string(f.data), fmt.Sprintf("\nstackd:x:%d:%d:", imageUID, imageUID)) {
				t.Errorf("/etc/passwd:\n%s", f.data)
			}
		case f.path == "etc/ssl/certs/ca-certificates.crt":
			if !bytes.Contains(f.data, []byte("-----BEGIN CERTIFICATE-----")) {
				t.Errorf("/etc/ssl/certs/ca-certificates.crt holds no certificate")
			}
		}
	}
}

// imageFile is a file of an image, as a container sees it.
type imageFile struct {
	path     string
	mode     os.FileMode
	uid, gid int
	data     []byte   // of small files
	interp   bool     // of ELF programs: whether they need a dynamic loader
	libs     []string // of ELF programs: the shared libraries they need
}

func (f imageFile) String() string {
	return fmt.Sprintf("%s %v %d:%d", f.path, f.mode, f.uid, f.gid)
}

// imageFiles reads an image saved in docker-archive format and returns
// its files, sorted: each layer in order, the later one winning.
func imageFiles(archive string) ([]imageFile, error) {
	var manifest []struct{ Layers []string }
	layers := map[string][]imageFile{}
	err := eachTarEntry(archive, func(h *tar.Header, r io.Reader) error {
		switch {
		case h.Name == "manifest.json":
			return json.NewDecoder(r).Decode(&manifest)
		case h.Typeflag == tar.TypeReg && strings.HasSuffix(h.Name, ".tar"):
			files, err := layerFiles(r)
			layers[h.Name] = files
			return err
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(manifest) != 1 || len(manifest[0].Layers) == 0 {
		return nil, fmt.Errorf("%s: unexpected manifest %+v", archive, manifest)
	}
	merged := map[string]imageFile{}
	for _, name := range manifest[0].Layers {
		files, ok := layers[name]
		if !ok {
			return nil, fmt.Errorf("%s: layer %s missing", archive, name)
		}
		for _, f := range files {
			if base := filepath.Base(f.path); strings.HasPrefix(base, ".wh.") {
				return nil, fmt.Errorf("%s: layer %s deletes files (%s)", archive, name, f.path)
			}
			merged[f.path] = f
		}
	}
	var out []imageFile
	for _, f := range merged {
		out = append(out, f)
	}
	slices.SortFunc(out, func(a, b imageFile) int { return strings.Compare(a.path, b.path) })
	return out, nil
}

func eachTarEntry(path string, fn func(h *tar.Header, r io.Reader) error) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return eachTarStreamEntry(f, fn)
}

func eachTarStreamEntry(r io.Reader, fn func(h *tar.Header, r io.Reader) error) error {
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := fn(h, tr); err != nil {
			return fmt.Errorf("%s: %w", h.Name, err)
		}
	}
}

// layerFiles lists one layer's entries, with the content of small files
// and what the ELF programs need at run time.
func layerFiles(r io.Reader) ([]imageFile, error) {
	var files []imageFile
	err := eachTarStreamEntry(r, func(h *tar.Header, r io.Reader) error {
		f := imageFile{path: strings.TrimSuffix(strings.TrimPrefix(h.Name, "./"), "/"),
			mode: h.FileInfo().Mode(), uid: h.Uid, gid: h.Gid}
		if f.path == "" || f.path == "." {
			return nil
		}
		if h.Typeflag == tar.TypeReg {
			data, err := io.ReadAll(r)
			if err != nil {
				return err
			}
			if ef, err := elf.NewFile(bytes.NewReader(data)); err == nil {
				for _, prog := range ef.Progs {
					if prog.Type == elf.PT_INTERP {
						f.interp = true
					}
				}
				f.libs, _ = ef.ImportedLibraries()
			} else if len(data) < 1<<20 {
				f.data = data
			}
		}
		files = append(files, f)
		return nil
	})
	return files, err
}

// waitReadyz polls /readyz until it answers 200.
func waitReadyz(t *testing.T, in *instance, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		code, body, err := in.tryGet("/readyz", nil)
		if err == nil && code == http.StatusOK {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET %s/readyz: %d %s %v", in.url, code, body, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// hasLine reports whether out has a line with the fields of want.
func hasLine(out, want string) bool {
	for _, line := range strings.Split(out, "\n") {
		if slices.Equal(strings.Fields(line), strings.Fields(want)) {
			return true
		}
	}
	return false
}

// waitNoZombies waits until no process below pid is a zombie.
func waitNoZombies(t *testing.T, pid int, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		var zombies []string
		for _, p := range descendants(pid) {
			data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(p), "stat"))
			if err != nil {
				continue
			}
			s := string(data)
			comm := s[strings.IndexByte(s, '(')+1 : strings.LastIndexByte(s, ')')]
			if fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:]); len(fields) > 0 && fields[0] == "Z" {
				zombies = append(zombies, fmt.Sprintf("%d (%s)", p, comm))
			}
		}
		if len(zombies) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("zombie processes in the container: %v", zombies)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestContainerImageOnBase builds the image variant of Containerfile.base
// on a Debian base that holds pulumi and the YAML language host where
// Pulumi's official images keep them (/pulumi/bin, on PATH), and runs a
// YAML stack in it: the same user, paths and entrypoint as the scratch
// image, with the base's pulumi. No registry is reachable here, so the
// Debian base is made with mmdebstrap from Debian's packages.
func TestContainerImageOnBase(t *testing.T) {
	p, root := containerTest(t)
	began := time.Now()
	base := pulumiDebianBase(t, p)
	t.Logf("Debian base with pulumi: %v", time.Since(began).Round(time.Millisecond))

	began = time.Now()
	const image = testImage + "-base"
	buildImage(t, root, "image-base", "IMAGE="+image, "BASE_IMAGE="+base)
	t.Cleanup(func() { _, _ = p.try("rmi", "-f", image+":"+testTag, image+":latest") })
	t.Logf("make image-base: %v", time.Since(began).Round(time.Millisecond))
	ref := image + ":" + testTag
	checkConfigOf(t, p, ref)
	if out := p.run("run", "--rm", "--entrypoint", "sh", ref, "-c", "command -v pulumi; id"); !strings.Contains(out, "/pulumi/bin/pulumi\n") ||
		!strings.Contains(out, fmt.Sprintf("uid=%d(stackd) gid=%d(stackd)", imageUID, imageUID)) {
		t.Fatalf("pulumi and the user in the image:\n%s", out)
	}

	began = time.Now()
	f := newStackFixture(t, root)
	name := f.deploy(p, ref, "/pulumi/bin", "/usr/local/bin", "/usr/bin", "/bin")
	t.Logf("container started and deployed the stack in %v", time.Since(began).Round(time.Millisecond))
	if top := p.run("top", name, "huser", "user", "comm"); !hasLine(top, fmt.Sprintf("%d stackd stackd", imageUID)) {
		t.Fatalf("podman top: stackd does not run as the user stackd (%d):\n%s", imageUID, top)
	}
	p.run("stop", "-t", "60", name)
	if code := p.run("inspect", "--format", "{{.State.ExitCode}}", name); code != "0" {
		t.Fatalf("the container exited with %s after SIGTERM", code)
	}
}

// pulumiDebianBase makes a Debian image in the shape of Pulumi's official
// ones: a minimal Debian with the pinned pulumi CLI and YAML language host
// in /pulumi/bin, on PATH. It returns the image's name; it is removed when
// the test ends. STACKD_TEST_DEBIAN_MIRROR overrides the Debian mirror.
func pulumiDebianBase(t *testing.T, p *podman) string {
	t.Helper()
	mirror := cmp.Or(os.Getenv("STACKD_TEST_DEBIAN_MIRROR"), "http://deb.debian.org/debian")
	dir := t.TempDir()
	rootfs := filepath.Join(dir, "rootfs.tar")
	cmd := exec.Command(tool(t, "mmdebstrap"), "--variant=minbase", "bookworm", rootfs, mirror)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("mmdebstrap: %v\n%s", err, out)
	}
	const debian, base = "localhost/stackd-test-debian:bookworm", "localhost/stackd-test-pulumi-debian:test"
	p.run("import", rootfs, debian)
	t.Cleanup(func() { _, _ = p.try("rmi", "-f", base, debian) })

	ctx := filepath.Join(dir, "context")
	bin := toolchainBin(t)
	if err := os.MkdirAll(ctx, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, b := range []string{"pulumi", "pulumi-language-yaml"} {
		data, err := os.ReadFile(filepath.Join(bin, b))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(ctx, b), data, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	containerfile := "FROM " + debian + `
COPY pulumi pulumi-language-yaml /pulumi/bin/
ENV PATH=/pulumi/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
CMD ["pulumi"]
`
	if err := os.WriteFile(filepath.Join(ctx, "Containerfile"), []byte(containerfile), 0o644); err != nil {
		t.Fatal(err)
	}
	p.run("build", "-t", base, ctx)
	return base
}
