package daemon

import (
	"bytes"
	"encoding/json"
)

// ScrubJSON applies clean to every string of a JSON value, and to the
// text of every number and boolean, which becomes a string when clean
// changes it; the result is valid JSON. Invalid JSON is cleaned as text
// and returned as a JSON string, so that it can be stored and served.
func ScrubJSON(raw json.RawMessage, clean func(string) string) json.RawMessage {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		out, _ := json.Marshal(clean(string(raw)))
		return out
	}
	out, err := json.Marshal(scrubValue(v, clean))
	if err != nil {
		out, _ = json.Marshal(clean(string(raw)))
	}
	return out
}

func scrubValue(v any, clean func(string) string) any {
	switch t := v.(type) {
	case string:
		return clean(t)
	case json.Number:
		if c := clean(t.String()); c != t.String() {
			return c
		}
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, e := range t {
			out[clean(k)] = scrubValue(e, clean)
		}
		return out
	case []any:
		for i, e := range t {
			t[i] = scrubValue(e, clean)
		}
	}
	return v
}
