package runner

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/stackd/stackd/daemon/model"
)

// benchHarness is a harness whose runner uses the toolchain directly (no
// recording wrapper), with the stack created and deployed once.
func benchHarness(b *testing.B) (*harness, model.Operation) {
	h := newHarness(b, testProgram)
	r, err := New(context.Background(), Options{Bin: toolchainBin(b), DataDir: h.dataDir,
		Env: []string{"PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION=true"}})
	if err != nil {
		b.Fatal(err)
	}
	h.r = r
	op := model.Operation{Workspace: h.workspace("first", secretOne), Type: model.UpdateUp}
	h.run(op)
	return h, op
}

// bareUp runs `pulumi up --yes --skip-preview` of the harness's stack
// with configFile, in the environment the runner gives its processes.
func (h *harness) bareUp(configFile string) time.Duration {
	return h.bare(configFile, "up", "--yes", "--skip-preview")
}

// bare runs a bare pulumi command on the harness's stack with configFile,
// in the environment the runner gives its processes, and times it.
func (h *harness) bare(configFile string, args ...string) time.Duration {
	h.t.Helper()
	bin := toolchainBin(h.t)
	cmd := exec.Command(filepath.Join(bin, "pulumi"), append(args, "--non-interactive",
		"--stack", "dev", "--config-file", configFile)...)
	cmd.Dir, cmd.Stdout, cmd.Stderr = h.project, io.Discard, io.Discard
	cmd.Env = []string{
		"PATH=" + bin + ":/usr/bin:/bin",
		"PULUMI_HOME=" + filepath.Join(h.dataDir, "pulumi-home"),
		"TMPDIR=" + filepath.Join(h.dataDir, "tmp"),
		"PULUMI_SKIP_UPDATE_CHECK=true",
		"PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION=true",
		"PULUMI_BACKEND_URL=file://" + h.ownBackend(),
		"PULUMI_CONFIG_PASSPHRASE_FILE=" + h.ownPassphrase(),
	}
	start := time.Now()
	if err := cmd.Run(); err != nil {
		h.t.Fatalf("bare pulumi %s: %v", args[0], err)
	}
	return time.Since(start)
}

// ownBackend is the file backend of the harness's stack, which the
// runner gives it in the data dir (see Runner.stateURL).
func (h *harness) ownBackend() string {
	h.t.Helper()
	dirs, _ := filepath.Glob(filepath.Join(h.dataDir, "backends", "*"))
	if len(dirs) != 1 {
		h.t.Fatalf("own backends %v, want one", dirs)
	}
	return dirs[0]
}

// ownPassphrase is the passphrase file of the harness's stack.
func (h *harness) ownPassphrase() string {
	h.t.Helper()
	files, _ := filepath.Glob(filepath.Join(h.dataDir, "passphrases", "*"))
	if len(files) != 1 {
		h.t.Fatalf("own passphrases %v, want one", files)
	}
	return files[0]
}

// report adds the mean times of both sides and their ratio.
func report(b *testing.B, n int, runner, bare time.Duration) {
	r, c := runner.Seconds()/float64(n), bare.Seconds()/float64(n)
	b.ReportMetric(r, "runner-s/op")
	b.ReportMetric(c, "bare-s/op")
	b.ReportMetric(r/c, "ratio")
}

// BenchmarkUpNoChange compares the runner's up of an unchanged stack (the
// daemon's resync) with a bare `pulumi up --yes --skip-preview` of the
// same stack. ns/op counts the runner alone.
func BenchmarkUpNoChange(b *testing.B) {
	h, op := benchHarness(b)
	configFile := filepath.Join(h.dataDir, "workspaces", "test", "Pulumi.dev.yaml")
	var runner, bare time.Duration
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		res := h.run(op)
		runner += time.Since(start)
		if res.Changes["same"] != 2 {
			b.Fatalf("changes %v, want none", res.Changes)
		}
		b.StopTimer()
		bare += h.bareUp(configFile)
		b.StartTimer()
	}
	report(b, b.N, runner, bare)
}

// contentLine is the content value in a stack config file.
var contentLine = regexp.MustCompile(`(?m)^(\s*runnertest:content:).*$`)

// BenchmarkUpChange compares the runner's up after a config change (the
// config file rewritten, the file resource updated) with a bare up of the
// same change, made by editing a copy of the config file.
func BenchmarkUpChange(b *testing.B) {
	h, op := benchHarness(b)
	data, err := os.ReadFile(filepath.Join(h.dataDir, "workspaces", "test", "Pulumi.dev.yaml"))
	if err != nil {
		b.Fatal(err)
	}
	bareFile := filepath.Join(b.TempDir(), "Pulumi.dev.yaml")
	var runner, bare time.Duration
	b.ResetTimer()
	for i := range b.N {
		op.Workspace = h.workspace("runner-"+strconv.Itoa(i), secretOne)
		start := time.Now()
		res := h.run(op)
		runner += time.Since(start)
		if res.Changes["update"] != 1 {
			b.Fatalf("changes %v, want an update", res.Changes)
		}
		b.StopTimer()
		edited := contentLine.ReplaceAll(data, []byte("${1} bare-"+strconv.Itoa(i)))
		if err := os.WriteFile(bareFile, edited, 0o600); err != nil {
			b.Fatal(err)
		}
		bare += h.bareUp(bareFile)
		b.StartTimer()
	}
	report(b, b.N, runner, bare)
}

// BenchmarkDriftCheck compares the runner's drift check of a drifted
// stack with a bare `pulumi refresh --preview-only` of the same stack.
func BenchmarkDriftCheck(b *testing.B) {
	h, op := benchHarness(b)
	if err := os.WriteFile(h.file, []byte("drifted"), 0o600); err != nil {
		b.Fatal(err)
	}
	configFile := filepath.Join(h.dataDir, "workspaces", "test", "Pulumi.dev.yaml")
	op.Type = model.UpdateDrift
	var runner, bare time.Duration
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		res := h.run(op)
		runner += time.Since(start)
		if len(res.Drift) != 1 {
			b.Fatalf("drift %v, want the file", res.Drift)
		}
		b.StopTimer()
		bare += h.bare(configFile, "refresh", "--preview-only")
		b.StartTimer()
	}
	report(b, b.N, runner, bare)
}
