package spec

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"
)

// RepoPath is repoDir cleaned, relative to the repository root: PKO takes
// "/infra/app" as "infra/app" (both name the same directory of the
// checkout); "" for the root. It starts with ".." for a repoDir that
// escapes the repository, which validation refuses.
func (s *StackSpec) RepoPath() string {
	p := path.Clean(strings.TrimLeft(s.RepoDir, "/"))
	if p == "." {
		return ""
	}
	return p
}

// PathFilter is the globs whose files a new commit must change for the
// stack to run, or all when every change counts: spec.paths, else the
// files under repoDir, else (a project at the root) everything.
func (s *StackSpec) PathFilter() (globs []string, all bool) {
	switch {
	case len(s.Paths) > 0:
		return s.Paths, false
	case s.RepoPath() != "":
		return []string{s.RepoPath() + "/**"}, false
	}
	return nil, true
}

// checkGlob says why g is not a usable paths glob.
func checkGlob(g string) error {
	switch {
	case g == "":
		return errors.New("empty glob")
	case strings.HasPrefix(g, "/"):
		return errors.New("a glob is relative to the repository root: no leading /")
	}
	for _, seg := range strings.Split(g, "/") {
		if seg == ".." {
			return errors.New("a glob cannot leave the repository (..)")
		}
		if seg == "**" {
			continue
		}
		if _, err := path.Match(seg, ""); err != nil {
			return errors.New("malformed glob " + g)
		}
	}
	return nil
}

// MatchPath says whether file (slash-separated, relative to the
// repository root) matches glob: each segment as path.Match, and "**"
// for any number of segments (none included).
func MatchPath(glob, file string) bool {
	return matchSegs(strings.Split(glob, "/"), strings.Split(file, "/"))
}

func matchSegs(glob, file []string) bool {
	for len(glob) > 0 {
		if glob[0] == "**" {
			for i := 0; i <= len(file); i++ {
				if matchSegs(glob[1:], file[i:]) {
					return true
				}
			}
			return false
		}
		if len(file) == 0 {
			return false
		}
		if ok, _ := path.Match(glob[0], file[0]); !ok {
			return false
		}
		glob, file = glob[1:], file[1:]
	}
	return len(file) == 0
}

// HashPaths digests the files under root (a checkout; .git skipped) that
// match one of globs: their paths, modes and contents, or link targets.
// Equal digests mean that a commit changed none of them; the digest is
// empty when no file matches.
func HashPaths(root string, globs []string) (string, error) {
	h, n := sha256.New(), 0
	err := filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		if e.IsDir() {
			if rel == ".git" {
				return filepath.SkipDir
			}
			return nil
		}
		if !slices.ContainsFunc(globs, func(g string) bool { return MatchPath(g, rel) }) {
			return nil
		}
		n++
		fmt.Fprintf(h, "%s\x00%v\x00", rel, e.Type())
		if e.Type()&fs.ModeSymlink != 0 {
			target, err := os.Readlink(p)
			h.Write([]byte(target))
			return err
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.Copy(h, f)
		return err
	})
	if err != nil {
		return "", fmt.Errorf("digest the files of paths: %w", err)
	}
	if n == 0 {
		return "", nil // nothing to compare: such a stack always runs
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// WriteProject writes the Program as a Pulumi YAML project in dir (named
// after the Program), rewriting Pulumi.yaml only when it changed; it
// returns dir.
func (p *Program) WriteProject(dir string) (string, error) {
	body, _ := Plain(p.Program).(map[string]any)
	if body == nil {
		body = map[string]any{}
	}
	body["name"], body["runtime"] = p.Name, "yaml"
	data, err := yaml.Marshal(body)
	if err != nil {
		return "", fmt.Errorf("render program %q: %w", p.Name, err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("create program dir: %w", err)
	}
	path := filepath.Join(dir, "Pulumi.yaml")
	if old, err := os.ReadFile(path); err == nil && slices.Equal(old, data) {
		return dir, nil
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return "", fmt.Errorf("write program: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return "", fmt.Errorf("write program: %w", err)
	}
	return dir, nil
}
