// Package forgehook reads the webhook requests of GitHub, GitLab and
// Gitea/Forgejo: which forge sent one and which event, whether its
// signature (or GitLab's token) is the shared secret's, and what its push
// or pull-request payload says. Package web's handler answers them.
package forgehook

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// Hook is a webhook request as its forge describes it.
type Hook struct {
	// Forge is "github", "gitlab", "gitea" or "forgejo".
	Forge string
	// Event is the forge's event name.
	Event string
	// Push is whether Event is a branch or tag push; PullRequest whether
	// it is a pull (merge) request's.
	Push, PullRequest bool
	// verify checks the request's signature or token against secret.
	verify func(body []byte, secret string) bool
}

// Verify reports whether the request's signature (GitHub, Gitea,
// Forgejo) or token (GitLab) is that of secret over body.
func (h Hook) Verify(body []byte, secret string) bool { return h.verify(body, secret) }

// pushEvent holds the fields of a push payload stackd reads; GitHub and
// Gitea fill repository, GitLab project and repository.
type pushEvent struct {
	Ref        string   `json:"ref"`
	After      string   `json:"after"`
	Deleted    bool     `json:"deleted"`
	Repository repoURLs `json:"repository"`
	Project    repoURLs `json:"project"`
}

// repoURLs are the ways forges name a repository in a push payload.
type repoURLs struct {
	CloneURL   string `json:"clone_url"`
	SSHURL     string `json:"ssh_url"`
	HTMLURL    string `json:"html_url"`
	GitURL     string `json:"git_url"`
	GitHTTPURL string `json:"git_http_url"`
	GitSSHURL  string `json:"git_ssh_url"`
	WebURL     string `json:"web_url"`
	URL        string `json:"url"`
	Homepage   string `json:"homepage"`
}

// DeliveryID is the forge's id of a webhook delivery, which a redelivery
// (or a replay of a captured request) repeats; "" when it sends none.
func DeliveryID(h http.Header) string {
	for _, k := range []string{"X-GitHub-Delivery", "X-Gitea-Delivery", "X-Forgejo-Delivery", "X-Gitlab-Event-UUID", "Idempotency-Key"} {
		if v := h.Get(k); v != "" {
			return v
		}
	}
	return ""
}

// ParsePush reads a verified push payload: the branch pushed and the
// repository's URLs, or why the push needs nothing (ignored: not a
// branch, a deleted branch, no repository), or a payload error.
func ParsePush(body []byte) (branch string, urls []string, ignored string, err error) {
	var p pushEvent
	if err := json.Unmarshal(body, &p); err != nil {
		return "", nil, "", fmt.Errorf("push payload: %w", err)
	}
	branch, isBranch := strings.CutPrefix(p.Ref, "refs/heads/")
	urls = p.urls()
	switch {
	case !isBranch || branch == "":
		ignored = "not a branch push: " + p.Ref
	case p.Deleted || isZeroSHA(p.After):
		ignored = "branch deleted: " + branch
	case len(urls) == 0:
		ignored = "the payload names no repository"
	}
	return branch, urls, ignored, nil
}

// urls lists the payload's repository URLs, without blanks or repeats.
func (p *pushEvent) urls() []string {
	var out []string
	seen := map[string]bool{}
	for _, r := range []repoURLs{p.Repository, p.Project} {
		for _, u := range []string{r.CloneURL, r.SSHURL, r.HTMLURL, r.GitURL, r.GitHTTPURL, r.GitSSHURL, r.WebURL, r.URL, r.Homepage} {
			if u != "" && !seen[u] {
				seen[u] = true
				out = append(out, u)
			}
		}
	}
	return out
}

// isZeroSHA reports whether sha is the all-zero commit forges send for a
// deleted branch.
func isZeroSHA(sha string) bool {
	return sha != "" && strings.Trim(sha, "0") == ""
}

// Detect names the forge that sent a webhook by its event header; ok is
// false when no forge did. Gitea and Forgejo also send GitHub's headers,
// so they are looked for first.
func Detect(h http.Header) (hook Hook, ok bool) {
	hook, ok = forgeOf(h)
	hook.PullRequest = ok && isPullRequestEvent(hook.Forge, hook.Event)
	return hook, ok
}

// forgeOf reads the forge, its event name and how to verify the request
// from the headers.
func forgeOf(h http.Header) (Hook, bool) {
	for _, prefix := range []string{"Gitea", "Forgejo"} {
		if ev := h.Get("X-" + prefix + "-Event"); ev != "" {
			sig := h.Get("X-" + prefix + "-Signature")
			return Hook{Forge: strings.ToLower(prefix), Event: ev, Push: ev == "push",
				verify: func(body []byte, secret string) bool { return validHMAC(body, secret, sig) }}, true
		}
	}
	if ev := h.Get("X-Gitlab-Event"); ev != "" {
		token := h.Get("X-Gitlab-Token")
		return Hook{Forge: "gitlab", Event: ev, Push: ev == "Push Hook",
			verify: func(_ []byte, secret string) bool { return token != "" && equalSecret(token, secret) }}, true
	}
	if ev := h.Get("X-GitHub-Event"); ev != "" {
		sig, ok := strings.CutPrefix(h.Get("X-Hub-Signature-256"), "sha256=")
		return Hook{Forge: "github", Event: ev, Push: ev == "push",
			verify: func(body []byte, secret string) bool { return ok && validHMAC(body, secret, sig) }}, true
	}
	return Hook{}, false
}

// validHMAC reports whether sig is the hex HMAC-SHA256 of body keyed with
// secret, comparing in constant time.
func validHMAC(body []byte, secret, sig string) bool {
	got, err := hex.DecodeString(strings.TrimSpace(sig))
	if err != nil || len(got) != sha256.Size {
		return false
	}
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(body)
	return hmac.Equal(got, mac.Sum(nil))
}

// equalSecret compares two secrets in constant time; hashing first makes
// the time independent of their lengths too (as package web compares its
// API token).
func equalSecret(got, want string) bool {
	g, w := sha256.Sum256([]byte(got)), sha256.Sum256([]byte(want))
	return subtle.ConstantTimeCompare(g[:], w[:]) == 1
}
