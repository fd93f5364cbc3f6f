package runner

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// DefaultInstallTimeout bounds one `pulumi install`.
const DefaultInstallTimeout = 10 * time.Minute

// dependencyFiles are the files that say what a program depends on, by
// language: when one of them (or Pulumi.yaml) changes, `pulumi install`
// runs before the operation. A project with none of them (Pulumi YAML)
// needs no install.
var dependencyFiles = []string{
	"package.json", "package-lock.json", "yarn.lock", "pnpm-lock.yaml", "bun.lockb", // Node.js
	"requirements.txt", "pyproject.toml", "poetry.lock", "Pipfile", "Pipfile.lock", "uv.lock", // Python
	"go.mod", "go.sum", // Go
	"pom.xml", "build.gradle", "build.gradle.kts", // Java
	"packages.lock.json", "Directory.Packages.props", // .NET
}

// installIfChanged runs `pulumi install --no-plugins` in w's project when
// its dependencies changed since the last install for this stack (a
// digest of the dependency files and Pulumi.yaml, kept in the stack's
// state directory), as PKO's workspaces do. Plugins are left to the
// operation, which fetches missing ones into the shared PULUMI_HOME. The
// output goes to log; a failure is the operation's, with that output.
func (r *Runner) installIfChanged(ctx context.Context, w *workspace, log io.Writer) error {
	sum, found, err := dependencyDigest(w.WorkDir, w.ProjectDir)
	if err != nil || !found {
		return err
	}
	sumFile := filepath.Join(w.dir, "install.sum")
	if prev, err := readRegular(sumFile); err == nil && string(prev) == sum {
		return nil
	}
	timeout := r.opts.InstallTimeout
	if timeout <= 0 {
		timeout = DefaultInstallTimeout
	}
	ictx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	lw := newLogWriter(log, w.redact)
	fmt.Fprintf(lw.stdout, "stackd: the program's dependencies changed: pulumi install\n")
	_, stderr, code, err := r.cmd.RunIn(ictx, r.access(w), w.ProjectDir, nil, []io.Writer{lw.stdout}, []io.Writer{lw.stderr}, r.env(w),
		"install", "--no-plugins")
	lw.flush()
	if err != nil {
		msg := tailLines(stderr, 10)
		if errors.Is(ictx.Err(), context.DeadlineExceeded) {
			msg = fmt.Sprintf("timed out after %s", timeout)
		}
		if msg == "" {
			msg = fmt.Sprintf("exit code %d", code)
		}
		return &Error{Op: "install", Message: "pulumi install: " + w.redact.Replace(msg), ExitCode: code, Err: err}
	}
	if err := writeFileAtomic(sumFile, []byte(sum), 0o600); err != nil {
		return fmt.Errorf("stack %s: record the install: %w", w.Name, err)
	}
	return nil
}

// dependencyDigest hashes Pulumi.yaml and the dependency files of dir;
// found is false when dir has no dependency file.
func dependencyDigest(workDir, dir string) (string, bool, error) {
	h := sha256.New()
	found := false
	for _, name := range append([]string{"Pulumi.yaml", "Pulumi.yml"}, dependencyFiles...) {
		data, err := readProjectFile(workDir, dir, name)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return "", false, fmt.Errorf("read %s: %w", name, err)
		}
		found = found || slices.Contains(dependencyFiles, name)
		fmt.Fprintf(h, "%s %d\n", name, len(data))
		h.Write(data)
	}
	return hex.EncodeToString(h.Sum(nil)), found, nil
}
