package scrub

import (
	"encoding/base64"
	"strings"
	"testing"
)

func TestJWTs(t *testing.T) {
	b64 := base64.RawURLEncoding.EncodeToString
	header := b64([]byte(`{"alg":"RS256","kid":"k1","typ":"JWT"}`))
	payload := b64([]byte(`{"iss":"https://stackd.example.com","sub":"stack:a:op:up:scope:write"}`))
	sig := b64([]byte(strings.Repeat("s", 256)))
	tok := header + "." + payload + "." + sig
	notHeader := b64([]byte(`{"name":"a","kind":"b","more":"c"}`)) + "." + payload + "." + sig
	for _, c := range []struct{ in, want string }{
		{"token " + tok + " end", "token " + Mask + " end"},
		{`{"seen":"` + tok + `"}`, `{"seen":"` + Mask + `"}`},
		{tok + "\n" + tok, Mask + "\n" + Mask},
		{"no token here", "no token here"},
		// Three base64url parts whose first is JSON without "alg": no
		// token, kept.
		{notHeader, notHeader},
		{"eyJ.short.parts", "eyJ.short.parts"},
	} {
		if got := JWTs(c.in); got != c.want {
			t.Errorf("JWTs(%.60q) = %.80q, want %.80q", c.in, got, c.want)
		}
		if got := JWTs(JWTs(c.in)); got != JWTs(c.in) {
			t.Errorf("JWTs is not idempotent on %.60q", c.in)
		}
	}
	// Clean masks tokens no secret list knows.
	if got := NewRedactor().Clean("old value " + tok); got != "old value "+Mask {
		t.Errorf("Clean = %q", got)
	}
	var nilRedactor *Redactor
	if got := nilRedactor.Clean(tok); got != Mask {
		t.Errorf("a nil Redactor's Clean = %q", got)
	}
}
