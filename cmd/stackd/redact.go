package main

import (
	"net/url"
	"os"
	"strings"
)

// minURLSecret is the length from which a path segment or query value of
// a notification webhook URL counts as a secret: Slack's and Discord's
// tokens are such segments, while "/hooks" or "/services" are not.
const minURLSecret = 16

// daemonSecrets are the daemon's own secrets that its flags name, for
// the daemon-wide redactor: the webhook secret, the notification URLs and
// signing secret, the forge tokens, the config-Git credentials and the
// etcd client key. The API token (maybe generated) is added where it is
// read; the runner tells the passphrases and the secret daemon-wide
// environment itself. A file that cannot be read is skipped here: it
// fails the start where it is read for use.
func (f *runFlags) daemonSecrets() []string {
	var out []string
	read := func(path string) string {
		if path == "" {
			return ""
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return ""
		}
		s := strings.TrimSpace(string(data))
		out = append(out, s)
		return s
	}
	for _, p := range []string{f.tokenFile, f.webhookFile, f.notifySecret, f.sourceFlags.tokenFile, f.sourceFlags.passwordFile,
		f.sourceFlags.sshKeyFile, f.sourceFlags.passphraseFile, f.clusterFlags.keyFile} {
		read(p)
	}
	urls := append(append([]string(nil), f.notifyURLs...), f.notifySlack...)
	for _, p := range append(append([]string(nil), f.notifyURLFiles...), f.notifySlackFiles...) {
		urls = append(urls, read(p))
	}
	for _, u := range urls {
		out = append(out, webhookURLSecrets(u)...)
	}
	for _, v := range f.forgeFlags.tokenFiles {
		if _, file, ok := strings.Cut(v, "="); ok {
			read(file)
		}
	}
	return out
}

// webhookURLSecrets are the secret parts of a notification webhook URL:
// all of it, its user info, and its long path segments and query values.
func webhookURLSecrets(raw string) []string {
	out := []string{raw}
	u, err := url.Parse(raw)
	if err != nil {
		return out
	}
	if u.User != nil {
		p, _ := u.User.Password()
		out = append(out, u.User.Username(), p)
	}
	for _, seg := range strings.Split(u.Path, "/") {
		if len(seg) >= minURLSecret {
			out = append(out, seg)
		}
	}
	for _, vs := range u.Query() {
		for _, v := range vs {
			if len(v) >= minURLSecret {
				out = append(out, v)
			}
		}
	}
	return out
}
