package runner

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// toolchainBin returns the project's bin directory, which `make toolchain`
// fills: the CLI, the YAML language host and the test provider. Outside
// -short a missing toolchain fails the test: it is part of what the project
// builds, not an optional extra.
func toolchainBin(t testing.TB) string {
	t.Helper()
	if testing.Short() {
		t.Skip("needs the Pulumi toolchain (make toolchain)")
	}
	bin, err := filepath.Abs(filepath.Join("..", "bin"))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"pulumi", "pulumi-language-yaml", "pulumi-resource-stackdtest"} {
		if _, err := os.Stat(filepath.Join(bin, name)); err != nil {
			t.Fatalf("%s missing: run make toolchain (%v)", name, err)
		}
	}
	return bin
}

// pulumiEnv is a hermetic environment for the CLI: nothing of the
// machine's Pulumi state is read or written.
func pulumiEnv(t *testing.T, bin string) []string {
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	if err := os.Mkdir(state, 0o700); err != nil {
		t.Fatal(err)
	}
	return []string{
		"PATH=" + bin + string(os.PathListSeparator) + "/usr/bin:/bin",
		"HOME=" + dir,
		"PULUMI_HOME=" + filepath.Join(dir, "home"),
		"PULUMI_BACKEND_URL=file://" + state,
		"PULUMI_CONFIG_PASSPHRASE=test-passphrase",
		"PULUMI_SKIP_UPDATE_CHECK=true",
		"PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION=true",
	}
}

func TestToolchainVersion(t *testing.T) {
	bin := toolchainBin(t)
	out, err := exec.Command(filepath.Join(bin, "pulumi"), "version").Output()
	if err != nil {
		t.Fatalf("pulumi version: %v", err)
	}
	if got, want := strings.TrimSpace(string(out)), "v3.250.0"; got != want {
		t.Fatalf("pulumi version = %q, want %q", got, want)
	}
}

// TestToolchainRunsYAMLProgram deploys a provider-less Pulumi YAML program
// with the real CLI and language host on a file backend.
func TestToolchainRunsYAMLProgram(t *testing.T) {
	bin := toolchainBin(t)
	env := pulumiEnv(t, bin)
	project := t.TempDir()
	program := "name: smoke\nruntime: yaml\nvariables:\n  word: hello\noutputs:\n  greeting: ${word}\n"
	if err := os.WriteFile(filepath.Join(project, "Pulumi.yaml"), []byte(program), 0o600); err != nil {
		t.Fatal(err)
	}
	pulumi := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(filepath.Join(bin, "pulumi"), append(args, "--non-interactive")...)
		cmd.Dir, cmd.Env = project, env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("pulumi %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	pulumi("stack", "init", "dev")
	pulumi("up", "--yes", "--skip-preview")
	if got := strings.TrimSpace(pulumi("stack", "output", "greeting")); got != "hello" {
		t.Fatalf("output greeting = %q, want hello", got)
	}
}
