package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// browser is headless Chromium driven through the DevTools protocol on
// the pipe --remote-debugging-pipe opens (fd 3 in, fd 4 out, messages
// ending in a NUL byte): a page that a test navigates, fills in and
// clicks, as a person would, keeping its cookies between pages.
type browser struct {
	t       *testing.T
	in      *os.File
	session string

	mu      sync.Mutex
	next    int
	pending map[int]chan cdpReply
}

type cdpReply struct {
	Result json.RawMessage `json:"result"`
	Error  *struct {
		Message string `json:"message"`
	} `json:"error"`
}

// startBrowser starts Chromium with one page, ended with the test.
func startBrowser(t *testing.T, chromium string) *browser {
	t.Helper()
	toChrome, ours, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	theirs, fromChrome, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	cmd := exec.CommandContext(ctx, chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
		"--disable-component-update", "--no-first-run", "--hide-scrollbars", "--user-data-dir="+t.TempDir(),
		"--remote-debugging-pipe", "about:blank")
	cmd.ExtraFiles = []*os.File{toChrome, fromChrome}
	cmd.WaitDelay = 5 * time.Second
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	toChrome.Close()
	fromChrome.Close()
	b := &browser{t: t, in: ours, pending: map[int]chan cdpReply{}}
	go b.read(theirs)
	t.Cleanup(func() {
		ours.Close()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		theirs.Close()
		cancel()
		if t.Failed() {
			t.Logf("chromium's stderr:\n%s", stderr.String())
		}
	})
	var target struct{ TargetID string }
	b.call("Target.createTarget", map[string]any{"url": "about:blank"}, &target)
	var attached struct{ SessionID string }
	b.call("Target.attachToTarget", map[string]any{"targetId": target.TargetID, "flatten": true}, &attached)
	b.session = attached.SessionID
	return b
}

// read hands Chromium's replies to their callers; events are dropped.
func (b *browser) read(out *os.File) {
	r := bufio.NewReader(out)
	for {
		msg, err := r.ReadBytes(0)
		if err != nil {
			return
		}
		var m struct {
			ID *int `json:"id"`
			cdpReply
		}
		if json.Unmarshal(msg[:len(msg)-1], &m) != nil || m.ID == nil {
			continue
		}
		b.mu.Lock()
		ch := b.pending[*m.ID]
		delete(b.pending, *m.ID)
		b.mu.Unlock()
		if ch != nil {
			ch <- m.cdpReply
		}
	}
}

// call sends a command to the page (to the browser before one is
// attached) and decodes its result into out.
func (b *browser) call(method string, params, out any) error {
	b.t.Helper()
	b.mu.Lock()
	b.next++
	id, ch := b.next, make(chan cdpReply, 1)
	b.pending[id] = ch
	b.mu.Unlock()
	msg := map[string]any{"id": id, "method": method, "params": params}
	if b.session != "" {
		msg["sessionId"] = b.session
	}
	data, _ := json.Marshal(msg)
	if _, err := b.in.Write(append(data, 0)); err != nil {
		b.t.Fatalf("%s: %v", method, err)
	}
	select {
	case r := <-ch:
		if r.Error != nil {
			return fmt.Errorf("%s: %s", method, r.Error.Message)
		}
		if out != nil {
			return json.Unmarshal(r.Result, out)
		}
		return nil
	case <-time.After(30 * time.Second):
		b.t.Fatalf("%s: no answer from chromium", method)
		return nil
	}
}

// eval evaluates a JavaScript expression in the page and returns its
// value as a string (JSON for what is not a string).
func (b *browser) eval(expr string) (string, error) {
	b.t.Helper()
	var r struct {
		Result struct {
			Value json.RawMessage `json:"value"`
		} `json:"result"`
		ExceptionDetails *struct {
			Text string `json:"text"`
		} `json:"exceptionDetails"`
	}
	if err := b.call("Runtime.evaluate", map[string]any{"expression": expr, "returnByValue": true}, &r); err != nil {
		return "", err
	}
	if r.ExceptionDetails != nil {
		return "", fmt.Errorf("%s: %s", expr, r.ExceptionDetails.Text)
	}
	var s string
	if json.Unmarshal(r.Result.Value, &s) == nil {
		return s, nil
	}
	return string(r.Result.Value), nil
}

// must is eval, failing the test on an error.
func (b *browser) must(expr string) string {
	b.t.Helper()
	v, err := b.eval(expr)
	if err != nil {
		b.t.Fatal(err)
	}
	return v
}

// open loads url and waits for the page it ends on.
func (b *browser) open(url string) {
	b.t.Helper()
	b.act(func() {
		if err := b.call("Page.navigate", map[string]any{"url": url}, nil); err != nil {
			b.t.Fatal(err)
		}
	})
}

// click clicks the element selector finds and waits for the page it
// leads to.
func (b *browser) click(selector string) {
	b.t.Helper()
	b.act(func() { b.must(fmt.Sprintf("document.querySelector(%q).click()", selector)) })
}

// act does what leaves the page, and waits until another page is
// loaded: the page is marked first, so that the old one, still there
// while the request is on its way, is not taken for the new one.
func (b *browser) act(do func()) {
	b.t.Helper()
	b.must("window.stackdOldPage = true")
	do()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if v, err := b.eval(`!window.stackdOldPage && document.readyState === "complete"`); err == nil && v == "true" {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	b.t.Fatalf("no new page loaded; the page is %s", b.must("location.href"))
}

// text is the visible text of the page.
func (b *browser) text() string {
	b.t.Helper()
	return b.must("document.body.innerText")
}

// path is the page's path and query.
func (b *browser) path() string {
	b.t.Helper()
	return b.must("location.pathname + location.search")
}

// html is the page's markup.
func (b *browser) html() string {
	b.t.Helper()
	return b.must("document.documentElement.outerHTML")
}

// wantText fails unless the page's text holds each of wants.
func (b *browser) wantText(wants ...string) {
	b.t.Helper()
	text := b.text()
	for _, w := range wants {
		if !strings.Contains(text, w) {
			b.t.Fatalf("the page %s lacks %q:\n%s", b.path(), w, text)
		}
	}
}
