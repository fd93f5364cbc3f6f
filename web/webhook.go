package web

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/stackd/stackd/web/forgehook"
)

// webhookPath receives push and pull-request events from GitHub, GitLab
// and Gitea/Forgejo.
const webhookPath = "/api/v1/webhooks/git"

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
	hook, ok := forgehook.Detect(r.Header)
	if !ok {
		writeError(w, http.StatusBadRequest, "not a GitHub, GitLab or Gitea webhook")
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		writeBodyError(w, err)
		return
	}
	if !hook.Verify(body, s.opts.WebhookSecret) {
		s.log.Warn("webhook rejected: bad signature", "forge", hook.Forge, "remote", r.RemoteAddr)
		writeError(w, http.StatusUnauthorized, "bad or missing webhook signature")
		return
	}
	if seen := s.deliveries.seen(deliveryKeys(hook.Forge, r.Header, body), time.Now()); seen != "" {
		writeJSON(w, http.StatusAccepted, map[string]string{"ignored": seen + " seen already"})
		return
	}
	if hook.PullRequest {
		s.pullRequest(w, hook, body)
		return
	}
	if !hook.Push {
		writeJSON(w, http.StatusAccepted, map[string]string{"ignored": hook.Forge + " event " + hook.Event})
		return
	}
	s.push(w, hook.Forge, body)
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
	if id := forgehook.DeliveryID(h); id != "" {
		keys = append(keys, deliveryKey{forge + "/" + id, "delivery " + id})
	}
	return keys
}

// deliveryKey is one key of a delivery and how an answer names it.
type deliveryKey struct{ key, name string }

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
	branch, urls, ignored, err := forgehook.ParsePush(body)
	if answeredPayload(w, ignored, err) {
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

// answeredPayload answers a verified payload that cannot be read (400)
// or that needs nothing (202, with why it is ignored), and says whether
// it did.
func answeredPayload(w http.ResponseWriter, ignored string, err error) bool {
	switch {
	case err != nil:
		writeError(w, http.StatusBadRequest, err.Error())
	case ignored != "":
		writeJSON(w, http.StatusAccepted, map[string]string{"ignored": ignored})
	default:
		return false
	}
	return true
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
