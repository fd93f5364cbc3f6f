package scrub

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
)

func TestURLs(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"no url here", "no url here"},
		{"https://git.example/app.git", "https://git.example/app.git"},
		{"clone https://gitlab.example/g/app.git?private_token=glpat-123&ref=main failed",
			"clone https://gitlab.example/g/app.git?private_token=[secret]&ref=main failed"},
		{"postgres://u:pw@db:5432/state?sslmode=disable&password=x",
			"postgres://[secret]@db:5432/state?sslmode=disable&password=[secret]"},
		{"https://TOKEN123@github.com/o/r", "https://[secret]@github.com/o/r"},
		{"ssh://git@host/r.git", "ssh://git@host/r.git"},
		{"ssh://git:hunter2@host/r.git", "ssh://git:[secret]@host/r.git"},
		{"hashivault://key?token=s.abc", "hashivault://key?token=[secret]"},
		{"awskms://alias/x?region=us-east-1", "awskms://alias/x?region=us-east-1"},
		{"s3://b/k?X-Amz-Signature=ab12&X-Amz-Credential=AK%2Fx&x=1",
			"s3://b/k?X-Amz-Signature=[secret]&X-Amz-Credential=[secret]&x=1"},
		{"https://h/cb#access_token=abc&state=1", "https://h/cb#access_token=[secret]&state=1"},
		{"https://h/p#section", "https://h/p#section"},
		{"'https://h?token=abc' and \"https://u:p@h2/x\"", "'https://h?token=[secret]' and \"https://[secret]@h2/x\""},
		{`{"u":"https://h?a=1\u0026token=abc\"x"}`, `{"u":"https://h?a=1\u0026token=[secret]\"x"}`},
		{"https://h/?next=https://u:p@inner/x", "https://h/?next=https://[secret]@inner/x"},
		{"git+https://git.example/cfg.git//stacks?ref=main", "git+https://git.example/cfg.git//stacks?ref=main"},
		{"://nothing", "://nothing"},
		{"1://x?token=a", "1://x?token=a"},
		{"azblob://c?sig=zzz;key=k", "azblob://c?sig=[secret];key=[secret]"},
		{"file:///var/lib/stackd/backend", "file:///var/lib/stackd/backend"},
		{"https://h?token=", "https://h?token="},
	} {
		got := URLs(c.in)
		if got != c.want {
			t.Errorf("URLs(%q)\n got %q\nwant %q", c.in, got, c.want)
		}
		if again := URLs(got); again != got {
			t.Errorf("URLs is not idempotent on %q: %q", got, again)
		}
	}
}

func TestRedactorClean(t *testing.T) {
	r := NewRedactor("hunter22", "tok-AAAA", "AAAA-long", "multi\nline-secret\n", "ab", "secret", "a\"b<c>")
	for _, c := range []struct{ in, want string }{
		{"pw hunter22 ok", "pw [secret] ok"},
		{"hunter22hunter22", "[secret][secret]"},
		{"overlap tok-AAAA-long end", "overlap [secret] end"}, // two secrets sharing AAAA: one mask
		{"short ab stays", "short ab stays"},
		{"line-secret alone", "[secret] alone"},
		{"the word secret stays: [secret]", "the word secret stays: [secret]"},
		{`json: "a\"b\u003cc\u003e" and a\"b<c>`, `json: "[secret]" and [secret]`},
		{"b64 " + "aHVudGVyMjI=", "b64 [secret]"},
		{"url-escaped a%22b%3Cc%3E", "url-escaped [secret]"},
		{"\x1b[31mhunter\x1b[0m22", "[secret]"},
		{"https://x?token=zzz hunter22", "https://x?token=[secret] [secret]"},
	} {
		got := r.Clean(c.in)
		if got != c.want {
			t.Errorf("Clean(%q) = %q, want %q", c.in, got, c.want)
		}
		if again := r.Clean(got); again != got {
			t.Errorf("Clean is not idempotent on %q: %q", got, again)
		}
	}
}

// TestMatcherAgainstNaive compares the matcher with a plain search of
// every pattern at every position, on random texts over a small alphabet
// where patterns overlap and nest.
func TestMatcherAgainstNaive(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	word := func(n int) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = "abc"[rng.IntN(3)]
		}
		return string(b)
	}
	for round := range 300 {
		var patterns []string
		for range 1 + rng.IntN(8) {
			patterns = append(patterns, word(1+rng.IntN(5)))
		}
		text := word(rng.IntN(60))
		m := newMatcher(patterns)
		covered := make([]bool, len(text))
		for _, p := range patterns {
			for i := 0; i+len(p) <= len(text); i++ {
				if text[i:i+len(p)] == p {
					for j := i; j < i+len(p); j++ {
						covered[j] = true
					}
				}
			}
		}
		got := make([]bool, len(text))
		for _, sp := range m.find(text) {
			for j := sp.start; j < sp.end; j++ {
				got[j] = true
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(covered) {
			t.Fatalf("round %d: patterns %q text %q: covered %v, want %v", round, patterns, text, got, covered)
		}
	}
}

func TestWith(t *testing.T) {
	base := NewRedactor("daemon-token")
	child := base.With("preview-secret")
	base.Add("added-later")
	if got := child.Clean("daemon-token preview-secret added-later"); got != "[secret] [secret] [secret]" {
		t.Errorf("child cleans %q", got)
	}
	if got := base.Clean("preview-secret"); got != "preview-secret" {
		t.Errorf("the base learned the child's secret: %q", got)
	}
	v := child.Version()
	base.Add("one-more")
	if child.Version() == v {
		t.Error("the child's version did not grow with its parent's")
	}
}

func TestRedactorJSON(t *testing.T) {
	r := NewRedactor("hunter22")
	for in, want := range map[string]string{
		`{"a":"x"}`:                           `{"a":"x"}`,
		`{"a":"hunter22","b":[1,"hunter22"]}`: `{"a":"[secret]","b":[1,"[secret]"]}`,
		`"https://h?a=1\u0026token=abc"`:      `"https://h?a=1\u0026token=[secret]"`,
		`"\u001b[1mbold"`:                     `"bold"`,
	} {
		got := r.JSON(json.RawMessage(in))
		if string(got) != want || !json.Valid(got) {
			t.Errorf("JSON(%s) = %s, want %s", in, got, want)
		}
	}
}

func TestAddIsConcurrencySafe(t *testing.T) {
	r := NewRedactor()
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			for j := range 50 {
				r.Add(fmt.Sprintf("secret-%d-%d", i, j))
			}
		})
		wg.Go(func() {
			for range 200 {
				_ = r.Clean("secret-1-1 and secret-2-2")
			}
		})
	}
	wg.Wait()
	if got := r.Clean("secret-3-49"); got != "[secret]" {
		t.Errorf("Clean = %q after the adds", got)
	}
}

func TestWriterLearnsWhileWriting(t *testing.T) {
	var out strings.Builder
	r := NewRedactor()
	w := r.Writer(&out)
	_, _ = w.Write([]byte("a new-secret-1\nb new-"))
	r.Add("new-secret-1")
	_, _ = w.Write([]byte("secret-1\n"))
	w.Close()
	if want := "a new-secret-1\nb [secret]\n"; out.String() != want {
		t.Errorf("wrote %q, want %q", out.String(), want)
	}
}

func TestHandler(t *testing.T) {
	var buf bytes.Buffer
	r := NewRedactor("hunter22")
	log := slog.New(NewHandler(slog.NewJSONHandler(&buf, nil), r)).With("bound", "x hunter22")
	log.Info("msg hunter22", "err", errors.New("auth hunter22 failed"), "url", "https://h?token=t0k",
		"list", []string{"hunter22"}, "n", 3, slog.Group("g", "s", "hunter22"))
	text := buf.String()
	if strings.Contains(text, "hunter22") || strings.Contains(text, "t0k") {
		t.Fatalf("the log shows a secret: %s", text)
	}
	for _, want := range []string{`"msg":"msg [secret]"`, `"err":"auth [secret] failed"`, `"bound":"x [secret]"`,
		`"n":3`, `"g":{"s":"[secret]"}`, `"list":"[[secret]]"`} {
		if !strings.Contains(text, want) {
			t.Errorf("the log lacks %s: %s", want, text)
		}
	}
}

// BenchmarkClean scrubs a 1 MiB log, mostly lines without secrets, with
// 1,000 secrets (each in its five forms).
func BenchmarkClean(b *testing.B) {
	rng := rand.New(rand.NewPCG(3, 4))
	var secrets []string
	for i := range 1000 {
		secrets = append(secrets, fmt.Sprintf("sk-%d-%016x", i, rng.Uint64()))
	}
	r := NewRedactor(secrets...)
	var log strings.Builder
	for i := 0; log.Len() < 1<<20; i++ {
		fmt.Fprintf(&log, "    +  pkg:index:Resource res-%d created (0.%03ds) https://api.example/v1/items/%d?ref=main\n", i, i%1000, i)
		if i%100 == 0 {
			log.WriteString("leak: " + secrets[i%len(secrets)] + "\n")
		}
	}
	text := log.String()
	b.SetBytes(int64(len(text)))
	b.ResetTimer()
	for b.Loop() {
		if out := r.Clean(text); !strings.Contains(out, "[secret]") {
			b.Fatal("nothing scrubbed")
		}
	}
}

// BenchmarkAdd builds the matcher of 1,000 secrets.
func BenchmarkAdd(b *testing.B) {
	var secrets []string
	for i := range 1000 {
		secrets = append(secrets, fmt.Sprintf("sk-%d-%016x", i, i*7919))
	}
	for b.Loop() {
		NewRedactor(secrets...)
	}
}
