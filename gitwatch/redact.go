package gitwatch

import (
	"fmt"
	"net/url"
	"sort"
	"strings"

	"github.com/stackd/stackd/daemon/model"
)

// minBareUserSecret is the length from which the user of an http(s) URL
// without a password counts as a secret (https://TOKEN@host/repo is how
// tokens are often embedded); shorter users such as "git" are left alone so
// that scrubbing does not mangle every message.
const minBareUserSecret = 8

// SanitizeURL returns u without credentials, for messages and logs.
//
// For ssh:// URLs the user is kept and a password dropped; for every other
// scheme (http, https, git, file...) the whole userinfo is dropped, since a
// lone "user" there is often a token. Query values are replaced by "***".
// scp-like addresses (user@host:path) keep the user and drop anything after
// a ':' in it. A string that does not parse keeps everything but its
// userinfo, which becomes "***".
func SanitizeURL(u string) string {
	if !strings.Contains(u, "://") {
		return sanitizeSCP(u)
	}
	p, err := url.Parse(u)
	if err != nil {
		return sanitizeUnparsed(u)
	}
	if p.User != nil {
		if keepsUser(p.Scheme) && p.User.Username() != "" {
			p.User = url.User(p.User.Username())
		} else {
			p.User = nil
		}
	}
	if p.RawQuery != "" {
		p.RawQuery = redactQuery(p.Query())
	}
	return p.String()
}

func keepsUser(scheme string) bool {
	switch strings.ToLower(scheme) {
	case "ssh", "git+ssh", "ssh+git":
		return true
	}
	return false
}

func redactQuery(q url.Values) string {
	for k := range q {
		q[k] = []string{"***"}
	}
	return strings.ReplaceAll(q.Encode(), "%2A", "*")
}

// sanitizeSCP handles user@host:path and plain paths. An '@' whose prefix
// has no '/' is taken to end a userinfo.
func sanitizeSCP(u string) string {
	at := strings.Index(u, "@")
	if at < 0 || strings.Contains(u[:at], "/") {
		return u
	}
	user := u[:at]
	if i := strings.IndexByte(user, ':'); i >= 0 {
		user = user[:i]
	}
	return user + u[at:]
}

func sanitizeUnparsed(u string) string {
	i := strings.Index(u, "://")
	scheme, rest := u[:i+3], u[i+3:]
	if q := strings.IndexAny(rest, "?#"); q >= 0 {
		rest = rest[:q]
	}
	end := strings.IndexByte(rest, '/')
	if end < 0 {
		end = len(rest)
	}
	if at := strings.LastIndex(rest[:end], "@"); at >= 0 {
		rest = "***" + rest[at:]
	}
	return scheme + rest
}

// scrubber removes one source's credentials from error messages.
type scrubber struct {
	rawURL   string
	cleanURL string
	secrets  []string // longest first
}

func newScrubber(src model.GitSource) scrubber {
	s := scrubber{rawURL: src.URL, cleanURL: SanitizeURL(src.URL)}
	if a := src.Auth; a != nil {
		s.secrets = append(s.secrets, a.Password, a.SSHPassphrase, string(a.SSHPrivateKey), a.BearerToken)
	}
	s.secrets = append(s.secrets, urlSecrets(src.URL)...)
	kept := s.secrets[:0]
	for _, v := range s.secrets {
		if v != "" {
			kept = append(kept, v)
		}
	}
	s.secrets = kept
	sort.Slice(s.secrets, func(i, j int) bool { return len(s.secrets[i]) > len(s.secrets[j]) })
	return s
}

// urlSecrets returns the secret parts of a URL's userinfo, raw and
// percent-encoded.
func urlSecrets(raw string) []string {
	if !strings.Contains(raw, "://") {
		at := strings.Index(raw, "@")
		if at < 0 || strings.Contains(raw[:at], "/") {
			return nil
		}
		if _, pw, ok := strings.Cut(raw[:at], ":"); ok {
			return []string{pw}
		}
		return nil
	}
	p, err := url.Parse(raw)
	if err != nil {
		// Unparsable: treat whatever precedes the last '@' of the
		// authority as secret.
		rest := raw[strings.Index(raw, "://")+3:]
		if end := strings.IndexAny(rest, "/?#"); end >= 0 {
			rest = rest[:end]
		}
		if at := strings.LastIndex(rest, "@"); at >= 0 {
			return []string{rest[:at]}
		}
		return nil
	}
	if p.User == nil {
		return nil
	}
	var out []string
	if pw, ok := p.User.Password(); ok {
		out = append(out, pw, url.QueryEscape(pw), p.User.String())
	} else if name := p.User.Username(); !keepsUser(p.Scheme) && len(name) >= minBareUserSecret {
		out = append(out, name, p.User.String())
	}
	return out
}

// clean replaces the raw URL by its sanitized form and every secret by
// "***".
func (s scrubber) clean(msg string) string {
	if s.rawURL != "" && s.rawURL != s.cleanURL {
		msg = strings.ReplaceAll(msg, s.rawURL, s.cleanURL)
	}
	for _, v := range s.secrets {
		msg = strings.ReplaceAll(msg, v, "***")
	}
	return msg
}

// errorf wraps err with lowercase context built from format and args; the
// message of the result is scrubbed.
func (s scrubber) errorf(err error, format string, args ...any) error {
	if err == nil {
		return nil
	}
	msg := fmt.Sprintf(format, args...) + ": " + err.Error()
	return &scrubbedError{msg: s.clean(msg), err: err}
}

// scrubbedError carries a credential-free message. Unwrap gives the cause
// for errors.Is and errors.As; the cause's own text is not scrubbed, so
// print the returned error, never its causes.
type scrubbedError struct {
	msg string
	err error
}

func (e *scrubbedError) Error() string { return e.msg }
func (e *scrubbedError) Unwrap() error { return e.err }
