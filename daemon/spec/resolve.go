package spec

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// maxRefFile bounds a file read for a reference.
const maxRefFile = 1 << 20

// RefSources says where references are read from when a stack runs.
type RefSources struct {
	// SecretsDir holds Secret refs as <SecretsDir>/<name>/<key>, the layout
	// of a mounted Kubernetes secret.
	SecretsDir string
	// ConfigMapsDir holds configRef values as <ConfigMapsDir>/<name>/<key>.
	ConfigMapsDir string
	// LookupEnv reads the daemon's environment (os.LookupEnv).
	LookupEnv func(string) (string, bool)
	// StackOutput returns an output of another stack, secret or not.
	StackOutput func(stack, output string) (string, error)
	// EnvAllow are the environment variable names (globs) that Env
	// references of configs from Git may read; local configs read any.
	EnvAllow []string
}

// RefError is a reference that could not be read. It names what was
// looked for (file, variable, Secret, stack output), never a value.
type RefError struct {
	Path string // field path of the reference, e.g. "envRefs.TOKEN"
	Err  error
}

func (e *RefError) Error() string { return e.Path + ": " + e.Err.Error() }

func (e *RefError) Unwrap() error { return e.Err }

// ResolveRef reads the value r refers to for stack s. path names the
// reference in errors. Document data (Secret and ConfigMap documents of
// the config) wins over files.
func (c *Config) ResolveRef(s *Stack, path string, r ResourceRef, src RefSources) (string, error) {
	v, err := c.resolveRef(s, path, r, src)
	if err != nil {
		return "", &RefError{Path: path, Err: err}
	}
	return v, nil
}

// resolveRef reads r, at path of s's spec. A reference that a Git
// repository's committers wrote (Stack.FromGit) reads only the variables
// src.EnvAllow allows, and files of the config's own checkout: one that a
// StackSet filled from a git generator's parameters reads none.
func (c *Config) resolveRef(s *Stack, path string, r ResourceRef, src RefSources) (string, error) {
	switch r.Type {
	case RefLiteral:
		return r.Literal.Value, nil
	case RefEnv:
		lookup := src.LookupEnv
		if lookup == nil {
			lookup = os.LookupEnv
		}
		if s != nil && s.FromGit(path) && !envAllowed(src.EnvAllow, r.Env.Name) {
			return "", fmt.Errorf("a config from Git may not read the daemon's environment variable %s (allow it with --env-ref-allow)", r.Env.Name)
		}
		if v, ok := lookup(r.Env.Name); ok {
			return v, nil
		}
		return "", fmt.Errorf("environment variable %s is not set", r.Env.Name)
	case RefFS:
		p := r.Filesystem.Path
		if !filepath.IsAbs(p) {
			p = filepath.Join(s.Dir, p)
		}
		switch {
		case s.Root != "":
			return readRootFile(s.Root, p)
		case s.FromGit(path):
			return "", errGitParamFile
		}
		return readRefFile(p)
	case RefSecret:
		return dataValue(c.Secrets, src.SecretsDir, "Secret", r.Secret.Name, r.Secret.Key)
	case RefStackOutput:
		if src.StackOutput == nil {
			return "", errors.New("stack outputs cannot be read here")
		}
		return src.StackOutput(r.StackOutput.Stack, r.StackOutput.Output)
	}
	return "", fmt.Errorf("unknown reference type %q", r.Type)
}

// errGitParamFile refuses an FS reference that a StackSet of a local
// config filled from a git generator's parameters.
var errGitParamFile = errors.New("a file filled from a git generator's parameters, which its repository's committers write: a stack may read only files its template names itself")

// ResolveConfigRef reads a configRef's value.
func (c *Config) ResolveConfigRef(path string, r ConfigMapRef, src RefSources) (string, error) {
	v, err := dataValue(c.ConfigMaps, src.ConfigMapsDir, "ConfigMap", r.Name, r.Key)
	if err != nil {
		return "", &RefError{Path: path, Err: err}
	}
	return v, nil
}

// dataValue reads key of the named Secret or ConfigMap: from a document
// of the config when there is one, else from dir/name/key.
func dataValue(docs map[string]map[string]string, dir, kind, name, key string) (string, error) {
	if data, ok := docs[name]; ok {
		if v, ok := data[key]; ok {
			return v, nil
		}
		return "", fmt.Errorf("%s %q has no key %q", kind, name, key)
	}
	if dir == "" {
		return "", fmt.Errorf("no %s document named %q, and no directory is configured to read %ss from", kind, name, kind)
	}
	return readRefFile(filepath.Join(dir, name, key))
}

// readRefFile reads a reference's file. One trailing newline is dropped:
// editors add one, and a token or password never ends with it.
func readRefFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err // *PathError: names the file
	}
	defer f.Close()
	return readRef(f, path)
}

// readRef reads an opened reference file, named name in errors.
func readRef(f *os.File, path string) (string, error) {
	data, err := io.ReadAll(io.LimitReader(f, maxRefFile+1))
	switch {
	case err != nil:
		return "", err
	case len(data) > maxRefFile:
		return "", fmt.Errorf("%s is larger than %d bytes", path, maxRefFile)
	}
	data = bytes.TrimSuffix(data, []byte("\n"))
	data = bytes.TrimSuffix(data, []byte("\r"))
	return string(data), nil
}

// readRootFile reads path, which must lie below root, through root: a
// symbolic link cannot lead out of it.
func readRootFile(root, path string) (string, error) {
	rel, err := filepath.Rel(root, path)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return "", errors.New("the file is outside the config's repository")
	}
	r, err := os.OpenRoot(root)
	if err != nil {
		return "", err
	}
	defer r.Close()
	f, err := r.Open(rel)
	if err != nil {
		return "", fmt.Errorf("%s: %w", filepath.ToSlash(rel), unwrapPathError(err))
	}
	defer f.Close()
	return readRef(f, filepath.ToSlash(rel))
}

// envAllowed says whether name matches one of the globs.
func envAllowed(globs []string, name string) bool {
	for _, g := range globs {
		if ok, _ := path.Match(g, name); ok {
			return true
		}
	}
	return false
}

// dataAll reads every key of the named Secret or ConfigMap: a document of
// the config, else the files of dir/name (hidden ones, such as a
// Kubernetes mount's ..data, skipped).
func dataAll(docs map[string]map[string]string, dir, kind, name string) (map[string]string, error) {
	if data, ok := docs[name]; ok {
		return data, nil
	}
	if dir == "" {
		return nil, fmt.Errorf("no %s document named %q, and no directory is configured to read %ss from", kind, name, kind)
	}
	entries, err := os.ReadDir(filepath.Join(dir, name))
	if err != nil {
		return nil, err // *PathError: names the directory
	}
	out := map[string]string{}
	for _, e := range entries {
		if e.IsDir() || e.Name()[0] == '.' {
			continue
		}
		v, err := readRefFile(filepath.Join(dir, name, e.Name()))
		if err != nil {
			return nil, err
		}
		out[e.Name()] = v
	}
	return out, nil
}

// ConfigMapData reads every key of the named ConfigMap: a document of the
// config, else the files of <ConfigMapsDir>/<name>.
func (c *Config) ConfigMapData(name string, src RefSources) (map[string]string, error) {
	return dataAll(c.ConfigMaps, src.ConfigMapsDir, "ConfigMap", name)
}

// SecretData reads every key of the named Secret: a document of the
// config, else the files of <SecretsDir>/<name>.
func (c *Config) SecretData(name string, src RefSources) (map[string]string, error) {
	return dataAll(c.Secrets, src.SecretsDir, "Secret", name)
}

// SecretValue reads key of the named Secret: a document of the config,
// else the file <SecretsDir>/<name>/<key>.
func (c *Config) SecretValue(name, key string, src RefSources) (string, error) {
	return dataValue(c.Secrets, src.SecretsDir, "Secret", name, key)
}
