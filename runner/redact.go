package runner

import (
	"bytes"
	"cmp"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/stackd/stackd/daemon/spec"
)

// Shorter values are not redacted: replacing every "yes" or "1" of a log
// would garble it and protect nothing.
const minRedactSecret = 4

// redactor masks the secrets the runner knows of w in text: its secret
// config values, the values of its environment that are secret by kind
// (SecretEnv) or by name, the daemon-wide environment's secret-named
// values, the passphrases, the backend URL's userinfo and the tokens of
// the stack's earlier operations that may still be good. A plain value
// such as a region stays readable. Each is masked as written, JSON-escaped and in
// base64.
func (r *Runner) redactor(w *workspace) *redactor {
	var secrets []string
	for _, v := range w.Config {
		if v.Secret && len(v.Value) >= minRedactSecret {
			secrets = append(secrets, v.Value)
		}
	}
	for k, v := range w.Env {
		if (slices.Contains(w.SecretEnv, k) || spec.SecretName(k)) && len(v) >= minRedactSecret {
			secrets = append(secrets, v)
		}
	}
	secrets = append(secrets, r.secretDaemonEnv...)
	secrets = append(secrets, r.tokens.secrets(w.Name)...)
	if len(r.passphrase) >= minRedactSecret {
		secrets = append(secrets, r.passphrase)
	}
	if w.ownPassphrase {
		if data, err := os.ReadFile(w.passphraseFile); err == nil && len(bytes.TrimSpace(data)) >= minRedactSecret {
			secrets = append(secrets, string(bytes.TrimSpace(data)))
			if filepath.Dir(w.passphraseFile) == r.passphrasesDir() && r.opts.Secrets != nil {
				r.opts.Secrets(string(bytes.TrimSpace(data))) // a stack's own; a preview's scratch one is not kept
			}
		}
	}
	if u, err := url.Parse(w.backend); err == nil && u.User != nil && len(u.User.String()) >= minRedactSecret {
		secrets = append(secrets, u.User.String())
		if p, ok := u.User.Password(); ok && len(p) >= minRedactSecret {
			secrets = append(secrets, p)
		}
	}
	return newRedactor(secrets)
}

// passphrasesDir holds the passphrases of the stacks that have their own.
func (r *Runner) passphrasesDir() string { return filepath.Join(r.opts.DataDir, "passphrases") }

// learnSecrets tells Options.Secrets the shared passphrase, the stacks'
// own passphrases and the secret values of the daemon-wide environment.
func (r *Runner) learnSecrets() {
	if r.opts.Secrets == nil {
		return
	}
	values := append([]string{r.passphrase}, r.secretDaemonEnv...)
	files, _ := filepath.Glob(filepath.Join(r.passphrasesDir(), "*"))
	for _, f := range files {
		if data, err := os.ReadFile(f); err == nil {
			values = append(values, string(bytes.TrimSpace(data)))
		}
	}
	r.opts.Secrets(values...)
}

// redactor masks secrets; longest is the length of the longest form it
// masks, which a writer that cuts a long line keeps back. It learns more
// while an operation runs (a token made anew), and is safe for
// concurrent use.
type redactor struct {
	mu      sync.RWMutex
	rep     *strings.Replacer
	longest int
	secrets []string
}

// newRedactor masks each secret, longest first, with "[redacted]".
func newRedactor(secrets []string) *redactor {
	r := &redactor{}
	r.add(secrets...)
	return r
}

// add masks secrets too.
func (r *redactor) add(secrets ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.secrets = append(r.secrets, secrets...)
	var forms []string
	for _, s := range r.secrets {
		quoted, _ := json.Marshal(s)
		forms = append(forms, s, string(quoted[1:len(quoted)-1]), base64.StdEncoding.EncodeToString([]byte(s)))
	}
	slices.SortFunc(forms, func(a, b string) int { return cmp.Compare(len(b), len(a)) })
	forms = slices.Compact(forms)
	var pairs []string
	for _, f := range forms {
		pairs = append(pairs, f, "[redacted]")
	}
	r.rep, r.longest = strings.NewReplacer(pairs...), 0
	if len(forms) > 0 {
		r.longest = len(forms[0])
	}
}

// Replace masks the secrets in s.
func (r *redactor) Replace(s string) string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.rep.Replace(s)
}

// held is how much of a line's end a writer keeps back: a secret may
// begin there.
func (r *redactor) held() int {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return max(0, r.longest-1)
}

// maxLogLine bounds what a logWriter holds back waiting for a newline.
const maxLogLine = 64 << 10

// logWriter passes an operation's stdout and stderr to its Log line by
// line, redacted. It never fails a write, so that a failing Log cannot
// disturb the process.
type logWriter struct {
	mu     sync.Mutex
	w      io.Writer
	redact *redactor
	stdout *lineWriter
	stderr *lineWriter
	// omit, when set, drops the lines that hold it.
	omit string
}

// lineWriter is one stream of a logWriter.
type lineWriter struct {
	lw  *logWriter
	buf []byte
}

// newLogWriter writes to w; a nil w discards.
func newLogWriter(w io.Writer, redact *redactor) *logWriter {
	lw := &logWriter{w: w, redact: redact}
	lw.stdout, lw.stderr = &lineWriter{lw: lw}, &lineWriter{lw: lw}
	return lw
}

func (l *lineWriter) Write(p []byte) (int, error) {
	if l.lw.w == nil {
		return len(p), nil
	}
	l.lw.mu.Lock()
	defer l.lw.mu.Unlock()
	l.buf = append(l.buf, p...)
	// Only the new bytes can end a line: no rescan of a long partial one.
	if j := bytes.LastIndexByte(p, '\n'); j >= 0 {
		n := len(l.buf) - len(p) + j + 1
		l.lw.emit(l.buf[:n])
		l.buf = slices.Delete(l.buf, 0, n)
	}
	if len(l.buf) > maxLogLine {
		// A line this long is cut. It is redacted whole first, and the
		// tail that may hold the start of a secret still to come is kept.
		text := l.lw.redact.Replace(string(l.buf))
		cut := max(0, len(text)-l.lw.redact.held())
		_, _ = io.WriteString(l.lw.w, text[:cut])
		l.buf = append(l.buf[:0], text[cut:]...)
	}
	return len(p), nil
}

// emit writes text, whole lines, redacted. Called with mu held.
func (l *logWriter) emit(text []byte) {
	if l.omit != "" && bytes.Contains(text, []byte(l.omit)) {
		var kept []byte
		for line := range bytes.Lines(text) {
			if !bytes.Contains(line, []byte(l.omit)) {
				kept = append(kept, line...)
			}
		}
		text = kept
	}
	_, _ = io.WriteString(l.w, l.redact.Replace(string(text)))
}

// flush writes what is left of unfinished lines.
func (l *logWriter) flush() {
	if l.w == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range []*lineWriter{l.stdout, l.stderr} {
		if len(s.buf) > 0 {
			l.emit(s.buf)
			s.buf = nil
		}
	}
}
