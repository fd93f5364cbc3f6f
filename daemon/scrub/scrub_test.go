package scrub

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestJSON(t *testing.T) {
	clean := strings.NewReplacer("CANARY", "[secret]", "12345678", "[secret]").Replace
	for in, want := range map[string]string{
		`"CANARY"`:                          `"[secret]"`,
		`{"a":["x CANARY y",{"CANARY":1}]}`: `{"a":["x [secret] y",{"[secret]":1}]}`,
		`12345678`:                          `"[secret]"`,
		`123`:                               `123`,
		`"quote \" CANARY"`:                 `"quote \" [secret]"`,
		`not json CANARY`:                   `"not json [secret]"`,
	} {
		got := JSON(json.RawMessage(in), clean)
		if string(got) != want || !json.Valid(got) {
			t.Errorf("JSON(%s) = %s, want %s", in, got, want)
		}
	}
}

func TestWriter(t *testing.T) {
	var out strings.Builder
	s := New(&out, []string{"hunter22", "ab", "multi\nline-secret"})
	for _, part := range []string{"pass: hun", "ter22\nshort ab ok\n", "line-secret tail"} {
		s.Write([]byte(part))
	}
	s.Close()
	want := "pass: [secret]\nshort ab ok\n[secret] tail"
	if out.String() != want {
		t.Fatalf("scrubbed = %q, want %q", out.String(), want)
	}
}

// TestLongLine: output without newlines is cut once it is long,
// and a secret straddling the cut is still scrubbed.
func TestLongLine(t *testing.T) {
	const secret = "CANARY-0123456789abcdef"
	for _, at := range []int{maxPartial - 5, maxPartial, maxPartial + 2} {
		var out strings.Builder
		s := New(&out, []string{secret})
		text := strings.Repeat("x", at) + secret + strings.Repeat("y", 70<<10)
		for i := 0; i < len(text); i += 5 {
			_, _ = s.Write([]byte(text[i:min(i+5, len(text))]))
		}
		if len(s.partial) > maxPartial {
			t.Errorf("holds %d bytes of a line", len(s.partial))
		}
		s.Close()
		if got := out.String(); strings.Contains(got, "CANARY") || !strings.Contains(got, "[secret]") {
			t.Errorf("secret at %d: the log shows it or lost it", at)
		}
	}
}
