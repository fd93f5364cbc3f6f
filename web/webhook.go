package web

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
)

// webhookPath receives push and pull-request events from GitHub, GitLab
// and Gitea/Forgejo.
const webhookPath = "/api/v1/webhooks/git"

// forgeEvent is a webhook request as its forge describes it.
type forgeEvent struct {
	forge string
	// event is the forge's event name.
	event string
	// push is whether event is a branch or tag push; pullRequest whether
	// it is a pull (merge) request's.
	push, pullRequest bool
	// verify checks the request's signature or token against secret.
	verify func(body []byte, secret string) bool
}

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

// webhook handles POST /api/v1/webhooks/git. The request is verified
// before anything else is read from it: 401 for a bad or missing
// signature. A verified branch push makes the stacks and Git config
// sources tracking that branch of that repository poll at once (202
// naming them: {"stacks": [...], "sources": [...]}, sources left out
// when none); a verified pull-request event goes to Options.Previews
// (see pullRequest); any other verified event is acknowledged and
// ignored (202). A verified delivery whose body or delivery id came
// within the last deliveryWindow is a replay: acknowledged, ignored.
func (s *Server) webhook(w http.ResponseWriter, r *http.Request) {
	if s.opts.WebhookSecret == "" {
		writeError(w, http.StatusNotFound, "webhooks are not configured")
		return
	}
	ev, ok := detectForge(r.Header)
	if !ok {
		writeError(w, http.StatusBadRequest, "not a GitHub, GitLab or Gitea webhook")
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		writeBodyError(w, err)
		return
	}
	if !ev.verify(body, s.opts.WebhookSecret) {
		s.log.Warn("webhook rejected: bad signature", "forge", ev.forge, "remote", r.RemoteAddr)
		writeError(w, http.StatusUnauthorized, "bad or missing webhook signature")
		return
	}
	if seen := s.deliveries.seen(deliveryKeys(ev.forge, r.Header, body), time.Now()); seen != "" {
		writeJSON(w, http.StatusAccepted, map[string]string{"ignored": seen + " seen already"})
		return
	}
	if ev.pullRequest {
		s.pullRequest(w, ev, body)
		return
	}
	if !ev.push {
		writeJSON(w, http.StatusAccepted, map[string]string{"ignored": ev.forge + " event " + ev.event})
		return
	}
	s.push(w, ev.forge, body)
}

// deliveryKeys are what identifies a delivery: the SHA-256 of its signed
// body, and the forge's delivery id when it sends one. A replay is caught
// by either, so changing or dropping the delivery header of a captured
// request does not make it new. The body's hash is not scoped to the
// forge: the same body signed with the same secret under another forge's
// headers is the same replay. Real events differ in their bodies: forges
// put the new head, an update time or both in each.
func deliveryKeys(forge string, h http.Header, body []byte) []deliveryKey {
	sum := sha256.Sum256(body)
	keys := []deliveryKey{{"sha256:" + hex.EncodeToString(sum[:]), "an identical body"}}
	if id := deliveryID(h); id != "" {
		keys = append(keys, deliveryKey{forge + "/" + id, "delivery " + id})
	}
	return keys
}

// deliveryKey is one key of a delivery and how an answer names it.
type deliveryKey struct{ key, name string }

// deliveryID is the forge's id of a webhook delivery, which a redelivery
// (or a replay of a captured request) repeats.
func deliveryID(h http.Header) string {
	for _, k := range []string{"X-GitHub-Delivery", "X-Gitea-Delivery", "X-Forgejo-Delivery", "X-Gitlab-Event-UUID", "Idempotency-Key"} {
		if v := h.Get(k); v != "" {
			return v
		}
	}
	return ""
}

// deliveryWindow is how long a delivery's keys are remembered;
// maxDeliveries bounds how many.
const (
	deliveryWindow = 10 * time.Minute
	maxDeliveries  = 4096
)

// recentDeliveries remembers the delivery keys of the last deliveryWindow.
type recentDeliveries struct {
	mu sync.Mutex
	at map[string]time.Time
}

// seen returns the name of the first of keys that came within the
// window, or "" when none did, and then it remembers them all. A replay
// adds nothing to what is remembered: varying its delivery id cannot fill
// the memory and wash out the body's hash. A key's window runs from when
// it was first seen.
func (d *recentDeliveries) seen(keys []deliveryKey, now time.Time) string {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, k := range keys {
		if at, ok := d.at[k.key]; ok && now.Sub(at) < deliveryWindow {
			return k.name
		}
	}
	for _, k := range keys {
		d.remember(k.key, now)
	}
	return ""
}

// remember records key at now, first dropping expired keys when the map
// is full.
func (d *recentDeliveries) remember(key string, now time.Time) {
	if d.at == nil || len(d.at) >= maxDeliveries {
		for k, at := range d.at {
			if now.Sub(at) >= deliveryWindow {
				delete(d.at, k)
			}
		}
		if d.at == nil || len(d.at) >= maxDeliveries {
			d.at = map[string]time.Time{} // a flood: start over rather than grow
		}
	}
	d.at[key] = now
}

// push handles a verified push payload.
func (s *Server) push(w http.ResponseWriter, forge string, body []byte) {
	var p pushEvent
	if err := json.Unmarshal(body, &p); err != nil {
		writeError(w, http.StatusBadRequest, "push payload: "+err.Error())
		return
	}
	branch, isBranch := strings.CutPrefix(p.Ref, "refs/heads/")
	urls := p.urls()
	var ignored string
	switch {
	case !isBranch || branch == "":
		ignored = "not a branch push: " + p.Ref
	case p.Deleted || isZeroSHA(p.After):
		ignored = "branch deleted: " + branch
	case len(urls) == 0:
		ignored = "the payload names no repository"
	}
	if ignored != "" {
		writeJSON(w, http.StatusAccepted, map[string]string{"ignored": ignored})
		return
	}
	res := s.api.Push(urls, branch)
	if res.Stacks == nil {
		res.Stacks = []string{}
	}
	s.log.Info("push webhook", "forge", forge, "repository", urls[0], "branch", branch,
		"stacks", res.Stacks, "sources", res.Sources)
	writeJSON(w, http.StatusAccepted, res)
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

// detectForge names the forge that sent a webhook by its event header.
// Gitea and Forgejo also send GitHub's headers, so they are looked for
// first.
func detectForge(h http.Header) (forgeEvent, bool) {
	ev, ok := forgeOf(h)
	ev.pullRequest = ok && isPullRequestEvent(ev.forge, ev.event)
	return ev, ok
}

// forgeOf reads the forge, its event name and how to verify the request
// from the headers.
func forgeOf(h http.Header) (forgeEvent, bool) {
	for _, prefix := range []string{"Gitea", "Forgejo"} {
		if ev := h.Get("X-" + prefix + "-Event"); ev != "" {
			sig := h.Get("X-" + prefix + "-Signature")
			return forgeEvent{forge: strings.ToLower(prefix), event: ev, push: ev == "push",
				verify: func(body []byte, secret string) bool { return validHMAC(body, secret, sig) }}, true
		}
	}
	if ev := h.Get("X-Gitlab-Event"); ev != "" {
		token := h.Get("X-Gitlab-Token")
		return forgeEvent{forge: "gitlab", event: ev, push: ev == "Push Hook",
			verify: func(_ []byte, secret string) bool { return token != "" && equalSecret(token, secret) }}, true
	}
	if ev := h.Get("X-GitHub-Event"); ev != "" {
		sig, ok := strings.CutPrefix(h.Get("X-Hub-Signature-256"), "sha256=")
		return forgeEvent{forge: "github", event: ev, push: ev == "push",
			verify: func(body []byte, secret string) bool { return ok && validHMAC(body, secret, sig) }}, true
	}
	return forgeEvent{}, false
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

// writeBodyError answers a request whose body could not be read: 413 past
// the body limit.
func writeBodyError(w http.ResponseWriter, err error) {
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		writeError(w, http.StatusRequestEntityTooLarge, "request body too large")
		return
	}
	writeError(w, http.StatusBadRequest, "read request body: "+err.Error())
}
