package web

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stackd/stackd/daemon/model"
	"github.com/stackd/stackd/web/webtest"
)

const hookSecret = "hook-secret"

func sign(secret, body string) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(body))
	return hex.EncodeToString(mac.Sum(nil))
}

// Push payloads as each forge sends them, trimmed to what matters.
const (
	githubPush = `{"ref":"refs/heads/main","after":"4b825dc642cb6eb9a060e54bf8d69288fbee4904","deleted":false,
		"repository":{"clone_url":"https://github.com/acme/infra.git","ssh_url":"git@github.com:acme/infra.git",
		"html_url":"https://github.com/acme/infra","git_url":"git://github.com/acme/infra.git"}}`
	gitlabPush = `{"object_kind":"push","ref":"refs/heads/main","after":"4b825dc642cb6eb9a060e54bf8d69288fbee4904",
		"project":{"git_http_url":"https://gitlab.com/acme/infra.git","git_ssh_url":"git@gitlab.com:acme/infra.git",
		"web_url":"https://gitlab.com/acme/infra"},
		"repository":{"url":"git@gitlab.com:acme/infra.git","homepage":"https://gitlab.com/acme/infra"}}`
	giteaPush = `{"ref":"refs/heads/release","after":"4b825dc642cb6eb9a060e54bf8d69288fbee4904",
		"repository":{"clone_url":"https://gitea.example/acme/infra.git","ssh_url":"git@gitea.example:acme/infra.git",
		"html_url":"https://gitea.example/acme/infra"}}`
)

func githubHeaders(event, sig string) http.Header {
	return http.Header{"X-Github-Event": {event}, "X-Hub-Signature-256": {"sha256=" + sig}}
}

func gitlabHeaders(event, token string) http.Header {
	return http.Header{"X-Gitlab-Event": {event}, "X-Gitlab-Token": {token}}
}

// giteaHeaders are Gitea's, which include GitHub's for compatibility.
func giteaHeaders(event, sig string) http.Header {
	h := githubHeaders(event, sig)
	h["X-Gitea-Event"], h["X-Gitea-Signature"] = []string{event}, []string{sig}
	return h
}

func TestWebhookPush(t *testing.T) {
	tests := []struct {
		name   string
		header http.Header
		body   string
		urls   []string
		branch string
	}{
		{"github", githubHeaders("push", sign(hookSecret, githubPush)), githubPush,
			[]string{"https://github.com/acme/infra.git", "git@github.com:acme/infra.git", "https://github.com/acme/infra", "git://github.com/acme/infra.git"}, "main"},
		{"gitlab", gitlabHeaders("Push Hook", hookSecret), gitlabPush,
			[]string{"https://gitlab.com/acme/infra", "git@gitlab.com:acme/infra.git", "https://gitlab.com/acme/infra.git"}, "main"},
		{"gitea", giteaHeaders("push", sign(hookSecret, giteaPush)), giteaPush,
			[]string{"https://gitea.example/acme/infra.git", "git@gitea.example:acme/infra.git", "https://gitea.example/acme/infra"}, "release"},
		{"forgejo", http.Header{"X-Forgejo-Event": {"push"}, "X-Forgejo-Signature": {sign(hookSecret, giteaPush)}}, giteaPush,
			[]string{"https://gitea.example/acme/infra.git", "git@gitea.example:acme/infra.git", "https://gitea.example/acme/infra"}, "release"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			api := &fakeAPI{pushed: model.PushResult{Stacks: []string{"infra-dev", "infra-prod"},
				Sources: []string{"git+https://github.com/acme/infra.git//stacks?ref=main"}}}
			// A configured API token does not apply to the webhook.
			_, url := startWith(t, Options{API: api, WebhookSecret: hookSecret, Token: "api-token"})
			code, v := callWith(t, "POST", url+webhookPath, tt.header, tt.body)
			if code != 202 || len(v["stacks"].([]any)) != 2 || len(v["sources"].([]any)) != 1 {
				t.Fatalf("push = %d %v", code, v)
			}
			api.mu.Lock()
			pushes := api.pushes
			api.mu.Unlock()
			if len(pushes) != 1 || pushes[0].branch != tt.branch || !sameSet(pushes[0].urls, tt.urls) {
				t.Fatalf("Push calls = %+v, want %v %s", pushes, tt.urls, tt.branch)
			}
		})
	}
}

// TestWebhookPushNothing: a push nothing tracks names no stack, as an
// empty list, and leaves sources out.
func TestWebhookPushNothing(t *testing.T) {
	_, url := startWith(t, Options{API: &fakeAPI{}, WebhookSecret: hookSecret})
	code, v := callWith(t, "POST", url+webhookPath, githubHeaders("push", sign(hookSecret, githubPush)), githubPush)
	if stacks, ok := v["stacks"].([]any); code != 202 || !ok || len(stacks) != 0 || v["sources"] != nil {
		t.Fatalf("push = %d %v", code, v)
	}
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// TestWebhookRejected: a bad or missing signature is a 401 and polls
// nothing, whatever the event.
func TestWebhookRejected(t *testing.T) {
	api := &fakeAPI{}
	_, url := startWith(t, Options{API: api, WebhookSecret: hookSecret})
	tampered := strings.Replace(githubPush, "main", "prod", 1)
	good := sign(hookSecret, githubPush)
	for _, tt := range []struct {
		name string
		h    http.Header
		body string
	}{
		{"github wrong secret", githubHeaders("push", sign("other", githubPush)), githubPush},
		{"github tampered body", githubHeaders("push", good), tampered},
		{"github no signature", http.Header{"X-Github-Event": {"push"}}, githubPush},
		{"github sha1 only", http.Header{"X-Github-Event": {"push"}, "X-Hub-Signature": {"sha1=" + good}}, githubPush},
		{"github not hex", githubHeaders("push", "zz"), githubPush},
		{"github ping unsigned", http.Header{"X-Github-Event": {"ping"}}, githubPush},
		{"gitlab wrong token", gitlabHeaders("Push Hook", "hook-secreT"), gitlabPush},
		{"gitlab no token", http.Header{"X-Gitlab-Event": {"Push Hook"}}, gitlabPush},
		{"gitea wrong signature", giteaHeaders("push", sign("other", githubPush)), githubPush},
		{"gitea GitHub signature only", http.Header{"X-Gitea-Event": {"push"}, "X-Hub-Signature-256": {"sha256=" + good}}, githubPush},
	} {
		if code, v := callWith(t, "POST", url+webhookPath, tt.h, tt.body); code != 401 {
			t.Errorf("%s = %d %v, want 401", tt.name, code, v)
		}
	}
	if _, _, pushes := api.calls(); pushes != 0 {
		t.Fatalf("Push called %d times", pushes)
	}
	if code, v := callWith(t, "POST", url+webhookPath, http.Header{"Content-Type": {"application/json"}}, githubPush); code != 400 {
		t.Errorf("no forge headers = %d %v, want 400", code, v)
	}
}

// TestWebhookIgnored: verified events other than branch pushes are
// acknowledged and poll nothing.
func TestWebhookIgnored(t *testing.T) {
	api := &fakeAPI{}
	_, url := startWith(t, Options{API: api, WebhookSecret: hookSecret})
	ping := `{"zen":"Keep it logically awesome.","hook_id":1}`
	tag := strings.Replace(githubPush, "refs/heads/main", "refs/tags/v1.0.0", 1)
	deleted := strings.Replace(githubPush, "4b825dc642cb6eb9a060e54bf8d69288fbee4904", "0000000000000000000000000000000000000000", 1)
	noRepo := `{"ref":"refs/heads/main"}`
	for name, req := range map[string]struct {
		h    http.Header
		body string
	}{
		"github ping":     {githubHeaders("ping", sign(hookSecret, ping)), ping},
		"github issues":   {githubHeaders("issues", sign(hookSecret, ping)), ping},
		"github tag push": {githubHeaders("push", sign(hookSecret, tag)), tag},
		"branch deleted":  {githubHeaders("push", sign(hookSecret, deleted)), deleted},
		"no repository":   {githubHeaders("push", sign(hookSecret, noRepo)), noRepo},
		"gitlab tag push": {gitlabHeaders("Tag Push Hook", hookSecret), gitlabPush},
		"gitea create":    {giteaHeaders("create", sign(hookSecret, giteaPush)), giteaPush},
	} {
		if code, v := callWith(t, "POST", url+webhookPath, req.h, req.body); code != 202 || v["ignored"] == nil {
			t.Errorf("%s = %d %v, want 202 ignored", name, code, v)
		}
	}
	if _, _, pushes := api.calls(); pushes != 0 {
		t.Fatalf("Push called %d times", pushes)
	}
	bad := `{"ref": 42}`
	if code, v := callWith(t, "POST", url+webhookPath, githubHeaders("push", sign(hookSecret, bad)), bad); code != 400 {
		t.Errorf("bad payload = %d %v, want 400", code, v)
	}
	big := strings.Repeat(" ", maxBody+1)
	if code, v := callWith(t, "POST", url+webhookPath, githubHeaders("push", sign(hookSecret, big)), big); code != 413 {
		t.Errorf("oversized body = %d %v, want 413", code, v)
	}
}

// TestWebhookDeliveryOnce: a delivery the forge sends again (or a
// captured request replayed) with the same delivery id is acknowledged
// and not acted on twice; another delivery is.
func TestWebhookDeliveryOnce(t *testing.T) {
	api := &fakeAPI{}
	_, url := startWith(t, Options{API: api, WebhookSecret: hookSecret})
	h := githubHeaders("push", sign(hookSecret, githubPush))
	h.Set("X-GitHub-Delivery", "72d3162e-cc78-11e3-81ab-4c9367dc0958")
	for range 2 {
		if code, v := callWith(t, "POST", url+webhookPath, h, githubPush); code != 202 {
			t.Fatalf("push = %d %v", code, v)
		}
	}
	next := strings.Replace(githubPush, "4b825dc6", "5c936ed7", 1)
	h = githubHeaders("push", sign(hookSecret, next))
	h.Set("X-GitHub-Delivery", "72d3162e-cc78-11e3-81ab-4c9367dc0959")
	callWith(t, "POST", url+webhookPath, h, next)
	api.mu.Lock()
	defer api.mu.Unlock()
	if len(api.pushes) != 2 {
		t.Fatalf("%d pushes acted on, want 2", len(api.pushes))
	}
}

// TestWebhookReplayedBody: a captured request replayed with its delivery
// header changed, dropped, or swapped for another forge's headers over
// the same signed body is acknowledged as a replay and not acted on, for
// push and pull-request events alike; nor is a body sent again under the
// id of a delivery already seen.
func TestWebhookReplayedBody(t *testing.T) {
	api, previews := &fakeAPI{}, &fakePreviews{}
	_, url := startWith(t, Options{API: api, WebhookSecret: hookSecret, Previews: previews})
	gh := webtest.Payload(t, "github-pull-request.json", nil)
	gl := webtest.Payload(t, "gitlab-merge-request.json", nil)
	withID := func(h http.Header, k, id string) http.Header {
		if id != "" {
			h.Set(k, id)
		}
		return h
	}
	const id1, id2 = "72d3162e-cc78-11e3-81ab-4c9367dc0958", "8b1a2c3d-cc78-11e3-81ab-4c9367dc0958"
	other := strings.Replace(githubPush, "4b825dc6", "5c936ed7", 1)
	for _, tt := range []struct {
		name   string
		h      http.Header
		body   string
		replay bool
	}{
		{"push", withID(githubHeaders("push", sign(hookSecret, githubPush)), "X-GitHub-Delivery", id1), githubPush, false},
		{"push, new delivery id", withID(githubHeaders("push", sign(hookSecret, githubPush)), "X-GitHub-Delivery", id2), githubPush, true},
		{"push, no delivery id", githubHeaders("push", sign(hookSecret, githubPush)), githubPush, true},
		{"push, as gitea", withID(giteaHeaders("push", sign(hookSecret, githubPush)), "X-Gitea-Delivery", "g-1"), githubPush, true},
		{"another push, a seen id", withID(githubHeaders("push", sign(hookSecret, other)), "X-GitHub-Delivery", id1), other, true},
		{"pull request", withID(githubHeaders("pull_request", sign(hookSecret, gh)), "X-GitHub-Delivery", "pr-1"), gh, false},
		{"pull request, new delivery id", withID(githubHeaders("pull_request", sign(hookSecret, gh)), "X-GitHub-Delivery", "pr-2"), gh, true},
		{"pull request, no delivery id", githubHeaders("pull_request", sign(hookSecret, gh)), gh, true},
		{"merge request", withID(gitlabHeaders("Merge Request Hook", hookSecret), "X-Gitlab-Event-UUID", "mr-1"), gl, false},
		{"merge request, new uuid", withID(gitlabHeaders("Merge Request Hook", hookSecret), "X-Gitlab-Event-UUID", "mr-2"), gl, true},
		{"merge request, no uuid", gitlabHeaders("Merge Request Hook", hookSecret), gl, true},
	} {
		code, v := callWith(t, "POST", url+webhookPath, tt.h, tt.body)
		ignored, _ := v["ignored"].(string)
		if code != 202 || tt.replay != strings.HasSuffix(ignored, "seen already") {
			t.Errorf("%s = %d %v, replay %v", tt.name, code, v, tt.replay)
		}
	}
	if _, _, pushes := api.calls(); pushes != 1 {
		t.Errorf("%d pushes acted on, want 1", pushes)
	}
	if evs := previews.taken(); len(evs) != 2 {
		t.Errorf("%d pull-request events previewed, want 2", len(evs))
	}
}

// TestRecentDeliveries: a key is remembered for the window from when it
// was first seen; a delivery is seen when any of its keys is; a replay
// remembers none of its new keys, so varying its delivery id cannot fill
// the memory; the memory is bounded.
func TestRecentDeliveries(t *testing.T) {
	var d recentDeliveries
	now := time.Now()
	body := deliveryKey{"sha256:ab", "an identical body"}
	key := func(id string) deliveryKey { return deliveryKey{"github/" + id, "delivery " + id} }
	if d.seen([]deliveryKey{body, key("a")}, now) != "" {
		t.Fatal("a first delivery is new")
	}
	if got := d.seen([]deliveryKey{{"sha256:cd", ""}, key("a")}, now.Add(time.Minute)); got != "delivery a" {
		t.Fatalf("same id, other body: seen %q", got)
	}
	if got := d.seen([]deliveryKey{body, key("b")}, now.Add(time.Minute)); got != "an identical body" {
		t.Fatalf("same body, other id: seen %q", got)
	}
	if _, ok := d.at["github/b"]; ok || len(d.at) != 2 {
		t.Fatalf("a replay's keys were remembered: %v", d.at)
	}
	if d.seen([]deliveryKey{body, key("a")}, now.Add(deliveryWindow+time.Minute)) != "" {
		t.Fatal("a delivery is remembered for the window only")
	}
	for i := range maxDeliveries + 10 {
		d.seen([]deliveryKey{key(fmt.Sprint(i))}, now)
	}
	if len(d.at) > maxDeliveries {
		t.Fatalf("%d keys remembered", len(d.at))
	}
}
