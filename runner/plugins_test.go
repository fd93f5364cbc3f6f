package runner

import (
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
)

func mkfile(t *testing.T, path, content string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
}

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// TestMirrorPlugins: a stack's plugin directory shows the shared plugins
// and its own downloads as real directories of links (pulumi lists only
// directories), skips installs in progress, moves a plugin an older
// version let the engine download there to the downloads, and drops
// mirrors of plugins gone; confined, a plugin's executable leads to the
// wrapper, and a hidden link beside it to the real one.
func TestMirrorPlugins(t *testing.T) {
	root := t.TempDir()
	shared, own, downloads := filepath.Join(root, "shared"), filepath.Join(root, "own"), filepath.Join(root, "downloads", "plugins")
	mkfile(t, filepath.Join(shared, "resource-a-v1.0.0", "pulumi-resource-a"), "a", 0o755)
	mkfile(t, filepath.Join(shared, "resource-a-v1.0.0", "README.md"), "read me", 0o644)
	mkfile(t, filepath.Join(shared, "resource-a-v1.0.0.lock"), "", 0o600)
	mkfile(t, filepath.Join(shared, "resource-b-v2.0.0", "pulumi-resource-b"), "b", 0o755)
	mkfile(t, filepath.Join(shared, "resource-c-v3.0.0", "pulumi-resource-c"), "c", 0o755)
	mkfile(t, filepath.Join(shared, "resource-c-v3.0.0.partial"), "", 0o600)
	mkfile(t, filepath.Join(downloads, "resource-d-v4.0.0", "pulumi-resource-d"), "d", 0o755)
	// A data dir of an older version linked the whole cache.
	if err := os.Symlink(shared, own); err != nil {
		t.Fatal(err)
	}
	ws, err := os.OpenRoot(root)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	wrapper := filepath.Join(root, "stackd")
	m := mirror{shared: []string{shared}, downloads: downloads, ws: ws, own: "own", wrapper: wrapper}
	if err := mirrorPlugins(m); err != nil {
		t.Fatal(err)
	}
	if got, want := dirNames(t, own), []string{"resource-a-v1.0.0", "resource-b-v2.0.0", "resource-d-v4.0.0"}; !slices.Equal(got, want) {
		t.Fatalf("mirrored %v, want %v", got, want)
	}
	a := filepath.Join(own, "resource-a-v1.0.0")
	if fi, err := os.Lstat(a); err != nil || !fi.IsDir() {
		t.Fatalf("the mirror of a plugin is no directory: %v %v", fi, err)
	}
	for link, want := range map[string]string{
		"pulumi-resource-a":       wrapper,
		".pulumi-resource-a.real": filepath.Join(shared, "resource-a-v1.0.0", "pulumi-resource-a"),
		"README.md":               filepath.Join(shared, "resource-a-v1.0.0", "README.md"),
	} {
		if got, err := os.Readlink(filepath.Join(a, link)); err != nil || got != want {
			t.Errorf("%s leads to %q (%v), want %q", link, got, err, want)
		}
	}

	// An older version let the engine download e into the stack's
	// plugin directory; b leaves the cache.
	mkfile(t, filepath.Join(own, "resource-e-v5.0.0", "pulumi-resource-e"), "e", 0o755)
	if err := os.RemoveAll(filepath.Join(shared, "resource-b-v2.0.0")); err != nil {
		t.Fatal(err)
	}
	m.wrapper = ""
	if err := mirrorPlugins(m); err != nil {
		t.Fatal(err)
	}
	if got, want := dirNames(t, own), []string{"resource-a-v1.0.0", "resource-d-v4.0.0", "resource-e-v5.0.0"}; !slices.Equal(got, want) {
		t.Fatalf("after a change: %v, want %v", got, want)
	}
	if got := readFileString(t, filepath.Join(downloads, "resource-e-v5.0.0", "pulumi-resource-e")); got != "e" {
		t.Errorf("the download was not moved: %q", got)
	}
	if got := readFileString(t, filepath.Join(own, "resource-e-v5.0.0", "pulumi-resource-e")); got != "e" {
		t.Errorf("unconfined, through the mirror: %q", got)
	}
	if _, err := os.Lstat(filepath.Join(a, ".pulumi-resource-a.real")); err == nil {
		t.Error("unconfined, the mirror keeps the wrapper's link")
	}
}

// TestMirrorPluginsFollowsNoLink: a program replaced its mirror of a
// plugin with a link to the shared plugin's directory, and the mirror's
// directory with a link elsewhere; mirroring again removes the links,
// and neither the shared plugin nor the link's target is touched.
func TestMirrorPluginsFollowsNoLink(t *testing.T) {
	root := t.TempDir()
	shared, own := filepath.Join(root, "shared"), filepath.Join(root, "own")
	binary := filepath.Join(shared, "resource-a-v1.0.0", "pulumi-resource-a")
	mkfile(t, binary, "the provider", 0o755)
	elsewhere := filepath.Join(t.TempDir(), "elsewhere")
	mkfile(t, filepath.Join(elsewhere, "keep"), "keep", 0o600)
	ws, err := os.OpenRoot(root)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	m := mirror{shared: []string{shared}, downloads: filepath.Join(root, "downloads"), ws: ws, own: "own"}
	if err := mirrorPlugins(m); err != nil {
		t.Fatal(err)
	}
	mirrorDir := filepath.Join(own, "resource-a-v1.0.0")
	if err := os.RemoveAll(mirrorDir); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Dir(binary), mirrorDir); err != nil {
		t.Fatal(err)
	}
	if err := mirrorPlugins(m); err != nil {
		t.Fatal(err)
	}
	if got := readFileString(t, binary); got != "the provider" {
		t.Fatalf("the shared plugin now holds %q", got)
	}
	if fi, err := os.Lstat(binary); err != nil || !fi.Mode().IsRegular() {
		t.Fatalf("the shared plugin is no longer a regular file: %v %v", fi, err)
	}
	if fi, err := os.Lstat(mirrorDir); err != nil || !fi.IsDir() {
		t.Fatalf("the mirror is not a directory again: %v %v", fi, err)
	}

	if err := os.RemoveAll(own); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(elsewhere, own); err != nil {
		t.Fatal(err)
	}
	if err := mirrorPlugins(m); err != nil {
		t.Fatal(err)
	}
	if got := dirNames(t, elsewhere); !slices.Equal(got, []string{"keep"}) {
		t.Errorf("the mirroring wrote through a link: %s holds %v", elsewhere, got)
	}
	if got := readFileString(t, filepath.Join(elsewhere, "keep")); got != "keep" {
		t.Errorf("the link's target changed: %q", got)
	}
}

// TestReadRegularRefuses: the runner's reads in a directory a program
// may write take regular files only, through no link leading out.
func TestReadRegularRefuses(t *testing.T) {
	dir, outside := t.TempDir(), filepath.Join(t.TempDir(), "secret")
	mkfile(t, outside, "secret", 0o600)
	mkfile(t, filepath.Join(dir, "own"), "own", 0o600)
	for name, make := range map[string]func(string) error{
		"link-out":  func(p string) error { return os.Symlink(outside, p) },
		"link-up":   func(p string) error { return os.Symlink("../"+filepath.Base(filepath.Dir(outside))+"/secret", p) },
		"fifo":      func(p string) error { return syscall.Mkfifo(p, 0o600) },
		"directory": func(p string) error { return os.Mkdir(p, 0o700) },
	} {
		if err := make(filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
		if data, err := readRegular(filepath.Join(dir, name)); err == nil {
			t.Errorf("%s: read %q, want an error", name, data)
		}
	}
	if err := os.Symlink("own", filepath.Join(dir, "link-in")); err != nil {
		t.Fatal(err)
	}
	if data, err := readRegular(filepath.Join(dir, "link-in")); err != nil || string(data) != "own" {
		t.Errorf("a link inside the directory: %q, %v", data, err)
	}
}

// TestAmbientProviders: the first provider of each name on PATH, only
// executables.
func TestAmbientProviders(t *testing.T) {
	root := t.TempDir()
	d1, d2 := filepath.Join(root, "d1"), filepath.Join(root, "d2")
	mkfile(t, filepath.Join(d1, "pulumi-resource-x"), "x1", 0o755)
	mkfile(t, filepath.Join(d2, "pulumi-resource-x"), "x2", 0o755)
	mkfile(t, filepath.Join(d2, "pulumi-resource-y"), "y", 0o755)
	mkfile(t, filepath.Join(d2, "pulumi-resource-notexec"), "n", 0o644)
	mkfile(t, filepath.Join(d2, "pulumi-language-yaml"), "l", 0o755)
	found := ambientProviders(d1 + string(os.PathListSeparator) + "relative" + string(os.PathListSeparator) + d2)
	want := []string{filepath.Join(d1, "pulumi-resource-x"), filepath.Join(d2, "pulumi-resource-y")}
	if !slices.Equal(found, want) {
		t.Fatalf("found %v, want %v", found, want)
	}
}

func readFileString(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}
