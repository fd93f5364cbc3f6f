package runner

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stackd/stackd/daemon/model"
)

func TestMissingIn(t *testing.T) {
	for _, tt := range []struct {
		msg  string
		want plugin
		ok   bool
	}{
		{`error: could not load plugin for aws provider 'default_6_0_0': no resource plugin 'pulumi-resource-aws' found in the workspace at version v6.0.0`,
			plugin{"resource", "aws", "6.0.0", ""}, true},
		{`no resource plugin 'pulumi-resource-x' found in the workspace at version v1.2.3-alpha.1 from http://127.0.0.1:8080/p/, install it`,
			plugin{"resource", "x", "1.2.3-alpha.1", "http://127.0.0.1:8080/p/"}, true},
		{`no language plugin 'pulumi-language-dotnet' found in the workspace or on your $PATH`,
			plugin{"language", "dotnet", "", ""}, true},
		{`error: preview failed: some other error`, plugin{}, false},
	} {
		got, ok := missingIn(&Error{Message: tt.msg})
		if ok != tt.ok || got != tt.want {
			t.Errorf("%q: %+v %v, want %+v %v", tt.msg, got, ok, tt.want, tt.ok)
		}
	}
	if _, ok := missingIn(errors.New("no resource plugin 'pulumi-resource-x' found in the workspace")); ok {
		t.Error("an error that is not the engine's counts")
	}
}

// TestAcquirePlugin: a program needs a provider version the plugin cache
// lacks, from a server it names; the engine downloads nothing itself, so
// the runner installs it into the stack's downloads from that server (a
// real one on loopback) and runs the operation again, its provider
// behind the wrapper under the sandbox.
func TestAcquirePlugin(t *testing.T) {
	h := newSandboxedHarness(t)
	tarball := pluginTarball(t, filepath.Join(toolchainBin(t), "pulumi-resource-stackdtest"))
	var served int
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/pulumi-resource-stackdtest-v0.2.0-linux-amd64.tar.gz" {
			http.NotFound(w, r)
			return
		}
		served++
		w.Header().Set("Content-Length", strconv.Itoa(len(tarball)))
		_, _ = w.Write(tarball)
	}))
	defer srv.Close()
	h.writeProgram(strings.Replace(testProgram, "      content: ${content}\n",
		"      content: ${content}\n    options:\n      version: 0.2.0\n      pluginDownloadURL: "+srv.URL+"/\n", 1))
	h.run(model.Operation{Workspace: h.workspace("acquired", "secret-token-1"), Type: model.UpdateUp})
	if got := h.onDisk(); got != "acquired" {
		t.Fatalf("the File holds %q", got)
	}
	if served != 1 {
		t.Errorf("the plugin was downloaded %d times, want once", served)
	}
	real := filepath.Join(h.dataDir, "workspaces", "test", "downloads", "plugins", "resource-stackdtest-v0.2.0", "pulumi-resource-stackdtest")
	if fi, err := os.Stat(real); err != nil || !fi.Mode().IsRegular() {
		t.Fatalf("the download is not in the stack's downloads: %v", err)
	}
	exe := filepath.Join(h.dataDir, "workspaces", "test", "pulumi-home", "plugins", "resource-stackdtest-v0.2.0", "pulumi-resource-stackdtest")
	if got, err := os.Readlink(exe); err != nil || got != h.r.wrapper {
		t.Errorf("the engine starts the download as %q (%v), want the wrapper %s", got, err, h.r.wrapper)
	}
	// A pull request's preview runs in a copy of the stack's state, and
	// uses the stack's downloads as they are.
	res := h.run(model.Operation{Workspace: h.workspace("previewed", "secret-token-1"), Type: model.UpdatePreview, ReadOnly: true})
	if res.Changes["update"] != 1 || served != 1 {
		t.Errorf("the read-only preview: changes %v, downloads %d; want an update, and no download", res.Changes, served)
	}
}

// pluginTarball is a plugin's .tar.gz, as a plugin server serves it,
// holding the executable at path.
func pluginTarball(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	gz, _ := gzip.NewWriterLevel(&buf, gzip.BestSpeed)
	tw := tar.NewWriter(gz)
	if err := tw.WriteHeader(&tar.Header{Name: filepath.Base(path), Mode: 0o755, Size: int64(len(data))}); err != nil {
		t.Fatal(err)
	}
	if _, err := tw.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
