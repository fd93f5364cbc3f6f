package notify

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/stackd/stackd/daemon/spec"
)

// Defaults of Options.
const (
	DefaultTimeout   = 10 * time.Second
	DefaultRetries   = 3
	DefaultQueueSize = 256
	defaultBackoff   = time.Second
)

// Headers of a JSON webhook request.
const (
	SignatureHeader = "X-Stackd-Signature"
	EventHeader     = "X-Stackd-Event"
)

// slackResources is how many drifted resources a chat message names.
const slackResources = 3

// Options configure a Webhook notifier.
type Options struct {
	// URLs receive each event as JSON: the Event plus "source": "stackd".
	URLs []string
	// SlackURLs are Slack-compatible incoming webhooks (Slack, Mattermost,
	// Rocket.Chat): they receive {"text": "..."}.
	SlackURLs []string
	// Secret, when set, signs JSON requests: X-Stackd-Signature carries
	// "sha256=" and the hex HMAC-SHA256 of the body under Secret.
	Secret string
	// Timeout bounds one request (DefaultTimeout).
	Timeout time.Duration
	// Retries is how many times a failed request is tried again, with
	// exponential backoff from one second (DefaultRetries when 0;
	// negative: never).
	Retries int
	// QueueSize bounds the events waiting for delivery
	// (DefaultQueueSize); when it is full the oldest is dropped.
	QueueSize int
	// Logger hears about undelivered and dropped events; nil discards.
	Logger *slog.Logger
	// Client sends the requests; nil uses one with Timeout.
	Client *http.Client

	// backoffBase replaces the first retry delay; tests make it short.
	backoffBase time.Duration
}

func (o Options) withDefaults() Options {
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	switch {
	case o.Retries == 0:
		o.Retries = DefaultRetries
	case o.Retries < 0:
		o.Retries = 0
	}
	if o.QueueSize <= 0 {
		o.QueueSize = DefaultQueueSize
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Client == nil {
		o.Client = &http.Client{Timeout: o.Timeout}
	}
	if o.backoffBase <= 0 {
		o.backoffBase = defaultBackoff
	}
	return o
}

// CheckWebhookURL reports whether raw can receive notifications: an
// absolute http or https URL with a host. Its error never quotes raw,
// which may hold a secret.
func CheckWebhookURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return fmt.Errorf("invalid webhook URL: %w", err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return errors.New("invalid webhook URL: want http:// or https:// and a host")
	}
	return nil
}

// webhookTarget is one URL events go to.
type webhookTarget struct {
	url   string
	slack bool
	// label names the URL in logs: scheme and host only, since webhook
	// URLs carry secrets in their path (Slack), query or userinfo.
	label string
}

// Webhook is a notifier that posts events to webhooks. Notify
// only queues; one goroutine delivers the queue in order, each event to
// every URL in turn.
type Webhook struct {
	opts    Options
	log     *slog.Logger
	targets []webhookTarget

	ctx    context.Context // ends when Close gives up on the queue
	cancel context.CancelFunc
	wake   chan struct{}
	done   chan struct{}
	once   sync.Once

	mu       sync.Mutex
	queue    []Event
	closed   bool
	dropped  uint64
	reported uint64
}

// NewWebhook returns a notifier delivering to opts' URLs, its
// sender started; Close stops it. URLs that CheckWebhookURL refuses are
// logged and skipped.
func NewWebhook(opts Options) *Webhook {
	opts = opts.withDefaults()
	ctx, cancel := context.WithCancel(context.Background())
	n := &Webhook{opts: opts, log: opts.Logger, ctx: ctx, cancel: cancel,
		wake: make(chan struct{}, 1), done: make(chan struct{})}
	n.addTargets(opts.URLs, false)
	n.addTargets(opts.SlackURLs, true)
	go n.run()
	return n
}

func (n *Webhook) addTargets(urls []string, slack bool) {
	for i, raw := range urls {
		if err := CheckWebhookURL(raw); err != nil {
			n.log.Warn("skipping webhook", "index", i, "slack", slack, "err", err)
			continue
		}
		n.targets = append(n.targets, webhookTarget{url: raw, slack: slack, label: redactURL(raw)})
	}
}

// Notify queues e for delivery and returns at once. When the queue is
// full the oldest event is dropped; after Close, e is dropped.
func (n *Webhook) Notify(e Event) {
	e.Drift = e.Drift.Clone() // the daemon may change it once unlocked
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return
	}
	if len(n.queue) >= n.opts.QueueSize {
		n.queue[0] = Event{}
		n.queue = n.queue[1:]
		n.dropped++
	}
	n.queue = append(n.queue, e)
	n.mu.Unlock()
	select {
	case n.wake <- struct{}{}:
	default:
	}
}

// Dropped counts the events dropped because the queue was full.
func (n *Webhook) Dropped() uint64 {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.dropped
}

// Close stops taking events and waits for the queued ones to be
// delivered until ctx ends; then it abandons the rest, stops the sender
// and returns an error counting them. Close may be called more than once.
func (n *Webhook) Close(ctx context.Context) error {
	n.once.Do(func() {
		n.mu.Lock()
		n.closed = true
		n.mu.Unlock()
		select { // a wake already pending will do as well
		case n.wake <- struct{}{}:
		default:
		}
	})
	select {
	case <-n.done:
		return nil
	case <-ctx.Done():
	}
	n.cancel()
	<-n.done
	n.mu.Lock()
	left := len(n.queue)
	n.mu.Unlock()
	if left == 0 {
		return nil
	}
	n.log.Warn("notifications not delivered before shutdown", "events", left)
	return fmt.Errorf("close notifier: %d event(s) not delivered: %w", left, ctx.Err())
}

// run delivers queued events until Close.
func (n *Webhook) run() {
	defer close(n.done)
	defer n.cancel()
	for {
		e, ok := n.next()
		if !ok {
			return
		}
		n.deliver(e)
	}
}

// next waits for an event; false once the notifier is closed and the
// queue empty, or Close gave up.
func (n *Webhook) next() (Event, bool) {
	for {
		if n.ctx.Err() != nil {
			return Event{}, false
		}
		n.mu.Lock()
		if len(n.queue) > 0 {
			e := n.queue[0]
			n.queue[0] = Event{}
			n.queue = n.queue[1:]
			newDrops, total := n.dropped-n.reported, n.dropped
			n.reported = n.dropped
			n.mu.Unlock()
			if newDrops > 0 {
				n.log.Warn("notification queue full: dropped oldest events", "dropped", newDrops, "total", total)
			}
			return e, true
		}
		closed := n.closed
		n.mu.Unlock()
		if closed {
			return Event{}, false
		}
		select {
		case <-n.wake:
		case <-n.ctx.Done():
		}
	}
}

// deliver sends e to every target, logging those that failed for good.
func (n *Webhook) deliver(e Event) {
	var jsonBody, slackBody []byte
	for _, t := range n.targets {
		body, err := n.body(e, t.slack, &jsonBody, &slackBody)
		if err == nil {
			err = n.post(t, e.Kind, body)
		}
		if err != nil {
			n.log.Warn("notification not delivered", "webhook", t.label, "slack", t.slack,
				"event", e.Kind, "stack", e.Stack, "err", err)
			continue
		}
		n.log.Debug("notification delivered", "webhook", t.label, "event", e.Kind, "stack", e.Stack)
	}
}

// body returns the payload of e for a JSON or a chat target, encoding
// each at most once per event through the caches.
func (n *Webhook) body(e Event, slack bool, jsonBody, slackBody *[]byte) ([]byte, error) {
	cache, encode := jsonBody, jsonPayload
	if slack {
		cache, encode = slackBody, slackPayload
	}
	if *cache != nil {
		return *cache, nil
	}
	b, err := encode(e)
	if err != nil {
		return nil, fmt.Errorf("encode %s event: %w", e.Kind, err)
	}
	*cache = b
	return b, nil
}

// post sends body to t, trying again after network errors, 5xx, 408 and
// 429 with exponential backoff.
func (n *Webhook) post(t webhookTarget, kind string, body []byte) error {
	delay := n.opts.backoffBase
	for attempt := 0; ; attempt++ {
		retry, err := n.postOnce(t, kind, body)
		if err == nil {
			return nil
		}
		if !retry || attempt >= n.opts.Retries {
			return fmt.Errorf("attempt %d: %w", attempt+1, err)
		}
		n.log.Debug("notification failed; retrying", "webhook", t.label, "event", kind, "in", delay, "err", err)
		if !sleepCtx(n.ctx, delay) {
			return fmt.Errorf("attempt %d: %w (stopped retrying: %w)", attempt+1, err, n.ctx.Err())
		}
		delay *= 2
	}
}

// postOnce makes one request; retry tells whether a failure is worth
// another. Its error never holds the URL.
func (n *Webhook) postOnce(t webhookTarget, kind string, body []byte) (retry bool, err error) {
	ctx, cancel := context.WithTimeout(n.ctx, n.opts.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.url, bytes.NewReader(body))
	if err != nil {
		return false, errors.New("cannot build request")
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "stackd")
	if !t.slack {
		req.Header.Set(EventHeader, kind)
		if n.opts.Secret != "" {
			req.Header.Set(SignatureHeader, Sign(n.opts.Secret, body))
		}
	}
	resp, err := n.opts.Client.Do(req)
	if err != nil {
		return true, stripURL(err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) // lets the connection be reused
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return false, nil
	}
	return retryable(resp.StatusCode), fmt.Errorf("status %d", resp.StatusCode)
}

// retryable tells whether a request that got status code may succeed
// when tried again.
func retryable(code int) bool {
	return code >= 500 || code == http.StatusRequestTimeout || code == http.StatusTooManyRequests
}

// Sign returns the X-Stackd-Signature value of body under secret:
// "sha256=" and the hex HMAC-SHA256.
func Sign(secret string, body []byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

// jsonPayload is e as JSON, its fields plus "source": "stackd".
func jsonPayload(e Event) ([]byte, error) {
	return json.Marshal(struct {
		Source string `json:"source"`
		Event
	}{"stackd", e})
}

// slackPayload is the incoming-webhook message of e: {"text": "..."}.
func slackPayload(e Event) ([]byte, error) {
	return json.Marshal(struct {
		Text string `json:"text"`
	}{slackText(e)})
}

// slackText is a one-line chat message about e, in Slack's mrkdwn. Drift
// names resources, operations and properties, never values.
func slackText(e Event) string {
	emoji, title := eventTitle(e.Kind)
	text := fmt.Sprintf("%s stackd: %s on stack *%s*", emoji, title, slackEscape(e.Stack))
	detail := e.Message
	if e.Kind == DriftDetected && e.Drift != nil {
		detail = driftSummary(e.Drift)
	}
	if detail != "" {
		text += ": " + slackEscape(truncate(detail, 1000))
	}
	if e.Update != "" {
		text += " (update " + slackEscape(e.Update) + ")"
	}
	return text
}

// eventTitle returns the emoji and words that head a message of kind.
func eventTitle(kind string) (emoji, title string) {
	switch kind {
	case DriftDetected:
		return ":warning:", "drift detected"
	case DriftResolved:
		return ":white_check_mark:", "drift resolved"
	case UpdateFailed:
		return ":x:", "update failed"
	case StackStalled:
		return ":rotating_light:", "stack stalled"
	case StackRecovered:
		return ":white_check_mark:", "stack recovered"
	case PreviewFailed:
		return ":x:", "preview of a pull request failed"
	case ApprovalNeeded:
		return ":raised_hand:", "approval needed"
	case RolloutHalted:
		return ":octagonal_sign:", "rollout halted"
	}
	return ":information_source:", strings.ReplaceAll(kind, "_", " ")
}

// driftSummary counts the drifted resources of d and names the first few,
// e.g. "1 resource(s) changed outside Pulumi (update pkg:index:File note:
// content)".
func driftSummary(d *spec.DriftStatus) string {
	s := fmt.Sprintf("%d resource(s) changed outside Pulumi", len(d.Resources))
	if len(d.Resources) == 0 {
		return s
	}
	var parts []string
	for i, r := range d.Resources {
		if i == slackResources {
			parts = append(parts, fmt.Sprintf("and %d more", len(d.Resources)-i))
			break
		}
		parts = append(parts, describeResource(r))
	}
	return s + " (" + strings.Join(parts, "; ") + ")"
}

// describeResource is "op type name: prop, prop" for one drifted resource.
func describeResource(r spec.DriftedResource) string {
	typ, name := r.Type, r.URN
	if i := strings.LastIndex(r.URN, "::"); i >= 0 {
		name = r.URN[i+2:]
		if typ == "" {
			typ = urnType(r.URN[:i])
		}
	}
	s := strings.TrimSpace(r.Op + " " + typ + " " + name)
	if len(r.Properties) > 0 {
		props := r.Properties
		if len(props) > 5 {
			props = append(props[:5:5], "…")
		}
		s += ": " + strings.Join(props, ", ")
	}
	return s
}

// urnType is the resource type of a URN cut before its name: the last
// "$"-separated part of its last "::" part.
func urnType(prefix string) string {
	typ := prefix[strings.LastIndex(prefix, "::")+2:]
	return typ[strings.LastIndex(typ, "$")+1:]
}

// slackEscape escapes the characters Slack's mrkdwn gives a meaning.
func slackEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

// truncate cuts s to at most limit runes, marking the cut.
func truncate(s string, limit int) string {
	r := []rune(s)
	if len(r) <= limit {
		return s
	}
	return string(r[:limit]) + "…"
}

// redactURL is scheme://host of raw: all of a webhook URL logs may show.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "(invalid URL)"
	}
	return u.Scheme + "://" + u.Host
}

// stripURL removes the URL an HTTP client error quotes, keeping its cause.
func stripURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// sleepCtx waits for d; false when ctx ended first.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
