package web

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stackd/stackd/daemon/livelog"
)

// TestLogFetch: a stored log, a running one's bytes so far, and a follow
// of an update that already ended.
func TestLogFetch(t *testing.T) {
	live := livelog.New()
	_, _ = live.Write([]byte("Updating (dev)\nsecret: [secret]\n"))
	api := &fakeAPI{
		logs: map[string][]byte{"app-1": []byte("Previewing update (dev)\n")},
		live: map[string]*livelog.Log{"app-2": live},
	}
	url := startServer(t, api)
	for path, want := range map[string]string{
		"/api/v1/updates/app-1/log":          "Previewing update (dev)\n",
		"/api/v1/updates/app-1/log?follow=1": "Previewing update (dev)\n",
		"/api/v1/updates/app-2/log":          "Updating (dev)\nsecret: [secret]\n",
	} {
		resp, body := send(t, "GET", url+path, nil, "")
		if resp.StatusCode != 200 || string(body) != want || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
			t.Errorf("GET %s = %d %q %q", path, resp.StatusCode, resp.Header.Get("Content-Type"), body)
		}
	}
	if code, v := call(t, "GET", url+"/api/v1/updates/app-9/log?follow=1"); code != 404 {
		t.Fatalf("unknown update = %d %v", code, v)
	}
}

// follower reads a followed log as it arrives.
type follower struct {
	t    *testing.T
	resp *http.Response
	r    *bufio.Reader
}

func followLog(t *testing.T, url string) *follower {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != 200 {
		t.Fatalf("follow: %s", resp.Status)
	}
	return &follower{t: t, resp: resp, r: bufio.NewReader(resp.Body)}
}

// line reads the next line, failing after 30s (a failed test only).
func (f *follower) line() string {
	f.t.Helper()
	got := make(chan string, 1)
	go func() {
		s, _ := f.r.ReadString('\n')
		got <- s
	}()
	select {
	case s := <-got:
		return s
	case <-time.After(30 * time.Second):
		f.t.Fatal("no line within 30s")
		return ""
	}
}

// end waits for the response to end and returns what came before.
func (f *follower) end() string {
	f.t.Helper()
	got := make(chan string, 1)
	go func() {
		b, _ := io.ReadAll(f.r)
		got <- string(b)
	}()
	select {
	case s := <-got:
		return s
	case <-time.After(30 * time.Second):
		f.t.Fatal("the response did not end within 30s")
		return ""
	}
}

// TestLogFollow: a followed log streams each write as it happens and the
// response ends when the log is closed.
func TestLogFollow(t *testing.T) {
	live := livelog.New()
	_, _ = live.Write([]byte("step 1\n"))
	url := startServer(t, &fakeAPI{live: map[string]*livelog.Log{"app-2": live}})
	f := followLog(t, url+"/api/v1/updates/app-2/log?follow=1")
	if ct := f.resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Fatalf("Content-Type %q", ct)
	}
	if got := f.line(); got != "step 1\n" {
		t.Fatalf("first line %q", got)
	}
	_, _ = live.Write([]byte("step 2\n"))
	if got := f.line(); got != "step 2\n" {
		t.Fatalf("second line %q", got)
	}
	_, _ = live.Write([]byte("step 3\nst"))
	_, _ = live.Write([]byte("ep 4\n"))
	live.Close()
	if rest := f.end(); rest != "step 3\nstep 4\n" {
		t.Fatalf("rest %q", rest)
	}
}

// TestLogFollowOutlivesTimeouts: a quiet operation's log is followed past
// the server's read and write timeouts.
func TestLogFollowOutlivesTimeouts(t *testing.T) {
	live := livelog.New()
	_, _ = live.Write([]byte("start\n"))
	_, url := startWith(t, Options{API: &fakeAPI{live: map[string]*livelog.Log{"app-2": live}}}, func(s *Server) {
		s.srv.ReadTimeout, s.srv.WriteTimeout = 200*time.Millisecond, 200*time.Millisecond
	})
	f := followLog(t, url+"/api/v1/updates/app-2/log?follow=1")
	if got := f.line(); got != "start\n" {
		t.Fatalf("first line %q", got)
	}
	time.Sleep(600 * time.Millisecond)
	_, _ = live.Write([]byte("later\n"))
	if got := f.line(); got != "later\n" {
		t.Fatalf("line after the timeouts %q", got)
	}
	live.Close()
	if rest := f.end(); rest != "" {
		t.Fatalf("rest %q", rest)
	}
}

// TestLogFollowEndsOnStop: stopping the server ends a follow at once
// rather than waiting for the operation.
func TestLogFollowEndsOnStop(t *testing.T) {
	live := livelog.New()
	_, _ = live.Write([]byte("running\n"))
	s, url := startWith(t, Options{API: &fakeAPI{live: map[string]*livelog.Log{"app-2": live}}})
	f := followLog(t, url+"/api/v1/updates/app-2/log?follow=1")
	f.line()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.Stop(ctx); err != nil {
		t.Fatalf("stop: %v", err)
	}
	f.end()
}

// TestLogFollowOnAnotherReplica: the log of an update that another
// replica runs is streamed from that replica, with the client's token;
// a request one replica forwarded is never forwarded again.
func TestLogFollowOnAnotherReplica(t *testing.T) {
	live := livelog.New()
	_, _ = live.Write([]byte("step 1\n"))
	_, holder := startWith(t, Options{API: &fakeAPI{live: map[string]*livelog.Log{"app-2": live}}, Token: "tok", ReadRequiresToken: true})
	here := &fakeAPI{logs: map[string][]byte{"app-2": nil}, remote: map[string]string{"app-2": holder}}
	_, url := startWith(t, Options{API: here, Token: "tok", ReadRequiresToken: true})

	req, _ := http.NewRequest("GET", url+"/api/v1/updates/app-2/log?follow=1", nil)
	req.Header.Set("Authorization", "Bearer tok")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	followTwoSteps(t, resp, live)

	req, _ = http.NewRequest("GET", url+"/api/v1/updates/app-2/log", nil)
	req.Header.Set("Authorization", "Bearer tok")
	req.Header.Set(forwardedHeader, "1")
	resp2, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp2.Body)
	resp2.Body.Close()
	if resp2.StatusCode != 200 || len(body) != 0 {
		t.Fatalf("a forwarded request was forwarded again: %d %q", resp2.StatusCode, body)
	}
}

// followTwoSteps reads a followed log whose live log holds "step 1": the
// first line, then "step 2" once written, then its end once the live log
// closes. It closes resp's body.
func followTwoSteps(t *testing.T, resp *http.Response, live *livelog.Log) {
	t.Helper()
	defer resp.Body.Close()
	r := bufio.NewReader(resp.Body)
	if line, err := r.ReadString('\n'); err != nil || line != "step 1\n" {
		t.Fatalf("first line %q, %v (status %d)", line, err, resp.StatusCode)
	}
	_, _ = live.Write([]byte("step 2\n"))
	if line, err := r.ReadString('\n'); err != nil || line != "step 2\n" {
		t.Fatalf("second line %q, %v", line, err)
	}
	live.Close()
	if rest, err := io.ReadAll(r); len(rest) != 0 || err != nil {
		t.Fatalf("rest %q, %v", rest, err)
	}
}
