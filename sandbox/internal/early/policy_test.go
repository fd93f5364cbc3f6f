package early

import (
	"encoding/json"
	"slices"
	"testing"
)

// jsonPolicy is the sandbox package's programPolicy, as encoding/json
// writes and reads it.
type jsonPolicy struct {
	ReadOnly   []string `json:"ro,omitempty"`
	ReadWrite  []string `json:"rw,omitempty"`
	ConnectTCP []uint16 `json:"tcp,omitempty"`
	Env        []string `json:"env,omitempty"`
}

func TestParsePolicyReadsWhatJSONWrites(t *testing.T) {
	odd := []string{
		"", "/plain/path", `/with "quotes" and \back\slashes`, "/tab\there/new\nline/cr\r", "/ctl\x01\x1f\b\f",
		"/html<>&", "/é/日本/😀", "/line\u2028sep\u2029", "/bad\xffutf8\xc3", "/nul\x00byte", "/slash/",
	}
	cases := []jsonPolicy{
		{},
		{ReadOnly: []string{"/a"}},
		{ReadOnly: []string{"/a", "/b"}, ReadWrite: []string{"/c"}, ConnectTCP: []uint16{0, 1, 443, 65535}, Env: []string{"HOME=/h", "TMPDIR=/t"}},
		{ReadOnly: odd, ReadWrite: odd, Env: odd},
		{ConnectTCP: []uint16{8080}},
	}
	for _, c := range cases {
		data, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := parsePolicy(string(data))
		if !ok {
			t.Errorf("%s: not read", data)
			continue
		}
		checkSame(t, string(data), got)
	}
}

func TestParsePolicyLeavesTheRestToJSON(t *testing.T) {
	for _, data := range []string{
		``, `{`, `{}x`, ` {}`, `{ }`, `{"ro": ["/a"]}`, `{"RO":["/a"]}`, `{"ro":["/a"],"ro":["/b"]}`,
		`{"other":1}`, `{"ro":null}`, `{"ro":"/a"}`, `{"ro":["/a",]}`, `{"ro":[,"/a"]}`, `{"tcp":[01]}`,
		`{"tcp":[65536]}`, `{"tcp":[-1]}`, `{"tcp":[1e2]}`, `{"tcp":[1.0]}`, `{"ro":["\ud800"]}`,
		`{"ro":["\ud83d\ude00"]}`, `{"ro":["\x"]}`, `{"ro":["\u12"]}`, "{\"ro\":[\"a\tb\"]}",
		"{\"ro\":[\"\xff\"]}", "{\"ro\":[\"\xed\xa0\x80\"]}", "{\"ro\":[\"\xc0\x80\"]}", `{"ro":["/a"]`,
		`{"ro":["/a"]}}`, `{,"ro":["/a"]}`, `{"ro":["/a"],}`,
	} {
		if p, ok := parsePolicy(data); ok {
			t.Errorf("%q read as %+v; it is for encoding/json", data, p)
		}
	}
}

func FuzzParsePolicy(f *testing.F) {
	f.Add(`{"ro":["/a","/b\u003c"],"rw":["/c\n"],"tcp":[1,2],"env":["A=b"]}`)
	f.Add(`{"env":["é\\\/"]}`)
	f.Fuzz(func(t *testing.T, data string) {
		if p, ok := parsePolicy(data); ok {
			checkSame(t, data, p)
		}
	})
}

// checkSame fails unless encoding/json reads data as got.
func checkSame(t *testing.T, data string, got policy) {
	t.Helper()
	var want jsonPolicy
	if err := json.Unmarshal([]byte(data), &want); err != nil {
		t.Fatalf("%q read, but encoding/json says %v", data, err)
	}
	if !sameStrings(got.ro, want.ReadOnly) || !sameStrings(got.rw, want.ReadWrite) || !sameStrings(got.env, want.Env) ||
		!slices.Equal(got.tcp, want.ConnectTCP) && len(got.tcp)+len(want.ConnectTCP) > 0 {
		t.Errorf("%q read as %+v, encoding/json reads %+v", data, got, want)
	}
}

func sameStrings(a, b []string) bool {
	return slices.Equal(a, b) || len(a) == 0 && len(b) == 0
}
