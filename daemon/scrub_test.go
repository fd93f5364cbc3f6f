package daemon

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestScrubJSON(t *testing.T) {
	clean := strings.NewReplacer("CANARY", "[secret]", "12345678", "[secret]").Replace
	for in, want := range map[string]string{
		`"CANARY"`:                          `"[secret]"`,
		`{"a":["x CANARY y",{"CANARY":1}]}`: `{"a":["x [secret] y",{"[secret]":1}]}`,
		`12345678`:                          `"[secret]"`,
		`123`:                               `123`,
		`"quote \" CANARY"`:                 `"quote \" [secret]"`,
		`not json CANARY`:                   `"not json [secret]"`,
	} {
		got := ScrubJSON(json.RawMessage(in), clean)
		if string(got) != want || !json.Valid(got) {
			t.Errorf("ScrubJSON(%s) = %s, want %s", in, got, want)
		}
	}
}
