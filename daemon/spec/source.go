package spec

import (
	"errors"
	"fmt"
	"net/url"
	"path"
	"strings"
)

// gitSourcePrefix marks a --config value as a Git source.
const gitSourcePrefix = "git+"

// Source is where part of the config is read: a local file or directory,
// or a directory of a Git repository at a branch, tag or commit.
type Source struct {
	// Path is a local file or directory; empty for a Git source.
	Path string
	// Git is set for a Git source.
	Git *GitDir
	// MaxBytes bounds the size of the source's config files together
	// (Input.MaxBytes: DefaultMaxSourceBytes when 0, none when negative).
	MaxBytes int64
}

// GitDir is a directory of a Git repository, written like a Terraform
// module source: git+<repository URL>//<path>?ref=<branch|tag|commit>.
type GitDir struct {
	// URL is the repository, as git takes it (https://, ssh://, file://,
	// git@host:path). It never carries credentials.
	URL string `json:"url"`
	// Path is the directory inside the repository; empty for its root.
	Path string `json:"path,omitempty"`
	// Ref is the branch or tag to follow, or the full SHA of a pinned
	// commit. Empty follows the repository's default branch (HEAD).
	Ref string `json:"ref,omitempty"`
}

// String is the source as it is written on the command line.
func (s Source) String() string {
	if s.Git == nil {
		return s.Path
	}
	return s.Git.String()
}

// String writes g back in the git+URL//path?ref= form.
func (g GitDir) String() string {
	s := gitSourcePrefix + g.URL
	if g.Path != "" {
		s += "//" + g.Path
	}
	if g.Ref != "" {
		s += "?ref=" + g.Ref
	}
	return s
}

// Pinned says whether Ref is a commit rather than a branch or tag.
func (g GitDir) Pinned() bool { return IsFullSHA(g.Ref) }

// ParseSource reads one --config value: a local path, or a Git source
// git+<repository URL>[//<path>][?ref=<branch|tag|commit>].
func ParseSource(s string) (Source, error) {
	if !strings.HasPrefix(s, gitSourcePrefix) {
		if strings.TrimSpace(s) == "" {
			return Source{}, errors.New("empty config path")
		}
		return Source{Path: s}, nil
	}
	g, err := parseGitDir(strings.TrimPrefix(s, gitSourcePrefix))
	if err != nil {
		return Source{}, fmt.Errorf("config source %q: %w", redactUserinfo(s), err)
	}
	return Source{Git: g}, nil
}

func parseGitDir(s string) (*GitDir, error) {
	rest, query, _ := strings.Cut(s, "?")
	q, err := url.ParseQuery(query)
	if err != nil {
		return nil, fmt.Errorf("query: %w", err)
	}
	g := &GitDir{Ref: q.Get("ref")}
	for k := range q {
		if k != "ref" {
			return nil, fmt.Errorf("unknown parameter %q (only ref is known)", k)
		}
	}
	// The path follows the first "//" after the scheme's "://".
	start := 0
	if i := strings.Index(rest, "://"); i >= 0 {
		start = i + len("://")
		if strings.HasPrefix(rest[start:], "/") { // file:///abs: the path's own slash
			start++
		}
	}
	g.URL = rest
	if i := strings.Index(rest[start:], "//"); i >= 0 {
		g.URL, g.Path = rest[:start+i], rest[start+i+2:]
	}
	if g.URL == "" {
		return nil, errors.New("no repository URL")
	}
	if err := checkSourceURL(g.URL); err != nil {
		return nil, err
	}
	if g.Path != "" {
		clean := path.Clean(g.Path)
		if path.IsAbs(clean) || clean == ".." || strings.HasPrefix(clean, "../") {
			return nil, fmt.Errorf("path %q must stay inside the repository", g.Path)
		}
		if clean == "." {
			clean = ""
		}
		g.Path = clean
	}
	if g.Ref != "" && strings.ContainsAny(g.Ref, " ~^:\\") {
		return nil, fmt.Errorf("ref %q is not a branch, tag or commit", g.Ref)
	}
	return g, nil
}

// checkSourceURL refuses credentials in the URL: they would show in
// status, logs and metrics. The --config-git-* flags carry them.
func checkSourceURL(u string) error {
	if !strings.Contains(u, "://") {
		return nil // scp-like git@host:path names a user, not a secret
	}
	p, err := url.Parse(u)
	if err != nil {
		if strings.Contains(u, "@") {
			// The parser's errors quote parts of the URL, which may be
			// parts of a password.
			return errors.New("the repository URL does not parse, and seems to hold credentials; give them with the --config-git-* flags")
		}
		return fmt.Errorf("repository URL: %w", err)
	}
	if _, hasPassword := p.User.Password(); hasPassword {
		return errors.New("the repository URL holds a password; give credentials with the --config-git-* flags")
	}
	if p.User != nil && p.Scheme != "ssh" {
		return errors.New("the repository URL holds a user name; give credentials with the --config-git-* flags")
	}
	return nil
}

// redactUserinfo hides what stands between "://" and the last "@" in s,
// so that an error about a URL holding credentials never repeats them,
// whatever characters a password holds.
func redactUserinfo(s string) string {
	i := strings.Index(s, "://")
	if i < 0 {
		return s
	}
	rest := s[i+3:]
	at := strings.LastIndex(rest, "@")
	if at < 0 {
		return s
	}
	return s[:i+3] + "***" + rest[at:]
}

// IsLocalPath says whether a projectRepo is a path rather than a URL.
func IsLocalPath(u string) bool {
	return strings.HasPrefix(u, "/") || strings.HasPrefix(u, "./") || strings.HasPrefix(u, "../")
}

// RepoKeys are the RepoKey of each URL.
func RepoKeys(urls []string) map[string]bool {
	want := map[string]bool{}
	for _, u := range urls {
		want[RepoKey(u)] = true
	}
	return want
}

// RepoKey identifies a repository across the ways of writing its URL:
// scheme, user, letter case of the host, a ".git" suffix and a trailing
// slash do not matter; "git@host:path" is "host/path".
func RepoKey(u string) string {
	u = strings.TrimSpace(u)
	if i := strings.Index(u, "://"); i >= 0 {
		if p, err := url.Parse(u); err == nil {
			u = strings.ToLower(p.Hostname()) + p.Path
		}
	} else if at := strings.Index(u, "@"); at >= 0 {
		if host, path, ok := strings.Cut(u[at+1:], ":"); ok {
			u = strings.ToLower(host) + "/" + path
		}
	}
	u = strings.TrimSuffix(strings.TrimSuffix(u, "/"), ".git")
	return strings.TrimSuffix(u, "/")
}
