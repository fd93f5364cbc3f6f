package runner

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"gopkg.in/yaml.v3"
)

// installAmbient installs each provider found on the CLI's PATH into the
// shared plugin cache (see plugins.go), so that programs find it there
// with PATH ignored. A provider whose version cannot be read, or that
// pulumi does not install, is logged and left out: programs that need it
// then fail with pulumi's "no resource plugin" error, and the log says
// why.
func (r *Runner) installAmbient(ctx context.Context, providers []string) {
	for _, path := range providers {
		if err := r.installProvider(ctx, path); err != nil {
			r.log.Warn("a provider on PATH is not installed into the plugin cache", "path", path, "err", err)
		}
	}
}

// installProvider installs the provider binary at path into the shared
// cache as resource-<name>-v<version>, unless the cache holds the same
// binary already. A rebuilt binary of the same version replaces the
// cached one.
func (r *Runner) installProvider(ctx context.Context, path string) error {
	name := strings.TrimPrefix(filepath.Base(path), "pulumi-resource-")
	version, err := r.providerVersion(ctx, path)
	if err != nil {
		return err
	}
	cached := filepath.Join(r.pluginDir(), "resource-"+name+"-v"+version, filepath.Base(path))
	if same, err := sameContent(path, cached); err != nil {
		return err
	} else if same {
		return nil
	}
	_, stderr, _, err := r.cmd.RunIn(ctx, r.installAccess(path), r.tmpDir(), nil, nil, nil, nil,
		"plugin", "install", "resource", name, version, "--file", path, "--reinstall")
	if err != nil {
		return fmt.Errorf("pulumi plugin install resource %s %s: %w: %s", name, version, err, tailLines(stderr, 5))
	}
	r.log.Info("installed a provider from PATH into the plugin cache", "provider", name, "version", version)
	return nil
}

// installAccess is what the processes that install the provider at path
// may reach in the sandbox: the provider, and the shared PULUMI_HOME
// and the data dir's temporary directory to write.
func (r *Runner) installAccess(path string) Access {
	return Access{ReadOnly: []string{path}, ReadWrite: []string{filepath.Dir(r.pluginDir()), r.tmpDir()}}
}

// tmpDir is the data dir's temporary directory.
func (r *Runner) tmpDir() string { return filepath.Join(r.opts.DataDir, "tmp") }

// providerVersion is the version the provider at path reports in its
// schema.
func (r *Runner) providerVersion(ctx context.Context, path string) (string, error) {
	out, stderr, _, err := r.cmd.RunIn(ctx, r.installAccess(path), r.tmpDir(), nil, nil, nil, nil,
		"package", "get-schema", path)
	if err != nil {
		return "", fmt.Errorf("read its schema: %w: %s", err, tailLines(stderr, 5))
	}
	var schema struct {
		Version string `json:"version"`
	}
	if err := json.Unmarshal([]byte(out), &schema); err != nil {
		return "", fmt.Errorf("read its schema: %w", err)
	}
	if schema.Version == "" {
		return "", errors.New("its schema names no version; install it with pulumi plugin install, or declare it in the project's Pulumi.yaml (plugins.providers)")
	}
	return strings.TrimPrefix(schema.Version, "v"), nil
}

// sameContent says whether the files a and b have the same content; a
// missing b is not the same.
func sameContent(a, b string) (bool, error) {
	sb, err := fileDigest(b)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	sa, err := fileDigest(a)
	if err != nil {
		return false, err
	}
	return sa == sb, nil
}

// checkProjectPlugins checks the plugins a project declares in its
// Pulumi.yaml (plugins.providers, languages, analyzers). The engine runs
// each from its path in the checkout, itself, where the runner cannot put
// the wrapper that confines plugins to the program's domain (see
// engine.go): such a plugin would run beside the engine, able to forge
// what approval and policies judge. So a declaration is refused unless
// allowed (Options.ProjectPlugins, which trusts every committer as much as
// the operator). An allowed provider must hold an executable
// pulumi-resource-<name> inside the checkout. A declaration that cannot
// work is an error naming the file, the line and column, and the field,
// before any process runs, instead of pulumi's error in the middle of the
// operation.
func checkProjectPlugins(workDir, projectDir string, allowed bool) error {
	path, err := projectFile(projectDir)
	if err != nil {
		return err
	}
	data, err := readProjectFile(workDir, projectDir, filepath.Base(path))
	if err != nil {
		return fmt.Errorf("read project: %w", err)
	}
	var p struct {
		Plugins struct {
			Providers []yaml.Node `yaml:"providers"`
			Languages []yaml.Node `yaml:"languages"`
			Analyzers []yaml.Node `yaml:"analyzers"`
		} `yaml:"plugins"`
	}
	if err := yaml.Unmarshal(data, &p); err != nil {
		return fmt.Errorf("%s: plugins: %w", filepath.Base(path), err)
	}
	if !allowed {
		for _, kind := range []struct {
			name  string
			nodes []yaml.Node
		}{{"providers", p.Plugins.Providers}, {"languages", p.Plugins.Languages}, {"analyzers", p.Plugins.Analyzers}} {
			if nodes := kind.nodes; len(nodes) > 0 {
				return fmt.Errorf("%s:%d:%d: plugins.%s[0]: a plugin committed with the program would run beside the engine, outside the program's sandbox; "+
					"stackd runs plugins from its plugin cache (a provider on the daemon's PATH is installed there) unless --allow-project-plugins trusts every committer",
					filepath.Base(path), nodes[0].Line, nodes[0].Column, kind.name)
			}
		}
	}
	for i, n := range p.Plugins.Providers {
		var pl struct {
			Name    string `yaml:"name"`
			Version string `yaml:"version"`
			Path    string `yaml:"path"`
		}
		where := fmt.Sprintf("%s:%d:%d: plugins.providers[%d]", filepath.Base(path), n.Line, n.Column, i)
		if err := n.Decode(&pl); err != nil {
			return fmt.Errorf("%s: %w", where, err)
		}
		if err := checkProjectPlugin(workDir, projectDir, pl.Name, pl.Path); err != nil {
			return fmt.Errorf("%s: %w", where, err)
		}
	}
	return nil
}

// checkProjectPlugin checks one declared provider: see
// checkProjectPlugins.
func checkProjectPlugin(workDir, projectDir, name, path string) error {
	if name == "" {
		return errors.New("name: missing")
	}
	if path == "" {
		return fmt.Errorf("%s: path: missing (pulumi runs a declared plugin from its path; a provider of the registry needs no declaration: it is downloaded)", name)
	}
	dir := path
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(projectDir, dir)
	}
	rel, err := filepath.Rel(workDir, filepath.Clean(dir))
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return fmt.Errorf("%s: path %q leads outside the checkout, which programs cannot reach", name, path)
	}
	bin := filepath.Join(dir, "pulumi-resource-"+name)
	fi, err := os.Stat(bin)
	if err != nil {
		return fmt.Errorf("%s: path %q holds no pulumi-resource-%s", name, path, name)
	}
	if !fi.Mode().IsRegular() || fi.Mode()&0o111 == 0 {
		return fmt.Errorf("%s: path %q: pulumi-resource-%s is not an executable file", name, path, name)
	}
	return nil
}

// fileDigest is the hex SHA-256 of the file at path, of the daemon's
// own directories.
func fileDigest(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:]), nil
}
