package forge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/stackd/stackd/daemon/review"
	"github.com/stackd/stackd/daemon/scrub"
)

// Config declares one forge.
type Config struct {
	Kind review.Kind
	// BaseURL is the forge's web address: https://github.com,
	// https://ghe.example.com, https://gitlab.example.com,
	// https://gitea.example.com; it may carry a path prefix and a port.
	// Empty means https://github.com or https://gitlab.com; Gitea has no
	// default.
	BaseURL string
	// Token is a personal, project or app access token. Empty means
	// anonymous: reads of public repositories work, writes fail.
	Token string
}

// Options tune the HTTP side of a forge client. The zero value is ready
// to use.
type Options struct {
	// Timeout bounds each HTTP attempt, from dialling to the end of the
	// answer's body; backoff between attempts is not counted. 0 means
	// 30s.
	Timeout time.Duration
	// Transport sends the requests; nil means a clone of
	// http.DefaultTransport (proxy settings from the environment).
	Transport http.RoundTripper
	// Logger gets one Info record per retry; nil means slog.Default().
	Logger *slog.Logger
	// MaxRetries is how many times a request is sent again after its
	// first attempt; 0 means 5, a negative number means never.
	MaxRetries int
	// MinBackoff and MaxBackoff bound the wait before a retry; 0 means
	// 1s and 30s. A Retry-After answer header is honoured up to
	// MaxBackoff.
	MinBackoff, MaxBackoff time.Duration
}

// The defaults of Options.
const (
	DefaultTimeout    = 30 * time.Second
	DefaultMaxRetries = 5
	DefaultMinBackoff = time.Second
	DefaultMaxBackoff = 30 * time.Second
)

// descriptionMax is the longest status description, in characters, that
// the forges take (GitHub's limit; the others take more).
const descriptionMax = 140

// maxPages bounds pagination loops against a server whose next page never
// ends.
const maxPages = 1000

// New returns the client of the forge c declares. It makes no request.
func New(c Config, o Options) (review.Forge, error) {
	o = o.withDefaults()
	base, err := parseBaseURL(c.BaseURL)
	if err != nil {
		return nil, fmt.Errorf("forge: base url: %w", err)
	}
	hc := newHTTPClient(c, o)
	switch c.Kind {
	case review.GitHub:
		return newGitHub(base, c.Token, hc)
	case review.GitLab:
		return newGitLab(base, c.Token, hc, o.Logger)
	case review.Gitea:
		return newGitea(base, c.Token, hc)
	}
	return nil, fmt.Errorf("forge: unknown kind %q", c.Kind)
}

func (o Options) withDefaults() Options {
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.Transport == nil {
		o.Transport = http.DefaultTransport
		if t, ok := http.DefaultTransport.(*http.Transport); ok {
			o.Transport = t.Clone()
		}
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	switch {
	case o.MaxRetries == 0:
		o.MaxRetries = DefaultMaxRetries
	case o.MaxRetries < 0:
		o.MaxRetries = 0
	}
	if o.MinBackoff <= 0 {
		o.MinBackoff = DefaultMinBackoff
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = DefaultMaxBackoff
	}
	if o.MaxBackoff < o.MinBackoff {
		o.MaxBackoff = o.MinBackoff
	}
	return o
}

// newHTTPClient returns the client every library sends through: its
// transport retries (see retry.go). It has no overall timeout: each
// attempt has its own, and the call's context bounds the whole.
func newHTTPClient(c Config, o Options) *http.Client {
	return &http.Client{Transport: &retryTransport{
		next:    o.Transport,
		policy:  retryPolicy{max: o.MaxRetries, minWait: o.MinBackoff, maxWait: o.MaxBackoff},
		timeout: o.Timeout,
		log:     o.Logger.With("forge", string(c.Kind)),
		secret:  c.Token,
	}}
}

// parseBaseURL checks a forge's web address and returns it without a
// trailing slash; "" stays "".
func parseBaseURL(raw string) (string, error) {
	if raw == "" {
		return "", nil
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", err
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return "", fmt.Errorf("%q: scheme must be http or https", u.Redacted())
	case u.Host == "":
		return "", fmt.Errorf("%q: no host", u.Redacted())
	case u.User != nil:
		return "", fmt.Errorf("%q: credentials belong in the token", u.Redacted())
	case u.RawQuery != "" || u.Fragment != "":
		return "", fmt.Errorf("%q: no query or fragment allowed", u.Redacted())
	}
	return strings.TrimRight(u.String(), "/"), nil
}

// splitRepo splits "owner/name" at its first slash.
func splitRepo(repo string) (owner, name string, err error) {
	owner, name, ok := strings.Cut(repo, "/")
	if !ok || owner == "" || name == "" || strings.Contains(name, "/") {
		return "", "", fmt.Errorf("repository %q is not owner/name", repo)
	}
	return owner, name, nil
}

// checkProjectPath checks a GitLab project's full path "group/sub/name".
func checkProjectPath(repo string) error {
	if repo == "" || strings.HasPrefix(repo, "/") || strings.HasSuffix(repo, "/") ||
		strings.Contains(repo, "//") {
		return fmt.Errorf("project path %q is not group/name", repo)
	}
	return nil
}

// truncate cuts s to at most n characters, ending with an ellipsis when
// it cut; it never splits a rune.
func truncate(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	runes := []rune(s)
	return string(runes[:n-1]) + "…"
}

// paths collects changed paths, dropping empties and repeats and keeping
// first-seen order.
type paths struct {
	seen map[string]bool
	list []string
}

func (p *paths) add(names ...string) {
	if p.seen == nil {
		p.seen = map[string]bool{}
	}
	for _, n := range names {
		if n != "" && !p.seen[n] {
			p.seen[n] = true
			p.list = append(p.list, n)
		}
	}
}

// errGone is what a commenter's edit returns when the comment is gone
// (the forge answered 404).
var errGone = errors.New("comment not found")

// commenter is the comment API of one pull request on one forge.
type commenter interface {
	// edit replaces the body of comment id; errGone if it is gone.
	edit(ctx context.Context, id int64, body string) error
	// find returns the first comment, oldest first, whose body holds
	// marker, with its body; id 0 if none does.
	find(ctx context.Context, marker string) (id int64, body string, err error)
	// create adds a comment and returns its id.
	create(ctx context.Context, body string) (int64, error)
}

// upsert implements review.Forge.UpsertComment over c.
func upsert(ctx context.Context, c commenter, marker, body string, id int64) (int64, error) {
	if marker == "" {
		return 0, errors.New("empty marker")
	}
	if id != 0 {
		err := c.edit(ctx, id, body)
		if !errors.Is(err, errGone) {
			return id, err
		}
	}
	found, old, err := c.find(ctx, marker)
	switch {
	case err != nil:
		return 0, err
	case found != 0 && old == body:
		return found, nil
	case found != 0:
		err := c.edit(ctx, found, body)
		if !errors.Is(err, errGone) {
			return found, err
		}
	}
	return c.create(ctx, body)
}

// redact returns err, or when its text holds secret an error whose text
// has it masked and that still unwraps to err.
func redact(err error, secret string) error {
	if err == nil || secret == "" {
		return err
	}
	msg := err.Error()
	clean := mask(msg, secret)
	if clean == msg {
		return err
	}
	return &redactedError{msg: clean, err: err}
}

// mask masks secret, raw or URL-escaped, in s, as stackd masks secrets
// everywhere (package scrub: "[secret]", values of 4 bytes or more).
func mask(s, secret string) string {
	if secret == "" {
		return s
	}
	forms := []string{secret, url.QueryEscape(secret), url.PathEscape(secret)}
	return scrub.New(nil, forms).Clean(s)
}

type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }
