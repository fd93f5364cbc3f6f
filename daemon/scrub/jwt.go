package scrub

import (
	"encoding/base64"
	"encoding/json"
	"regexp"
	"strings"
)

// compactJWS finds what may be a JSON Web Token: three base64url parts,
// the first of which starts with '{"' (eyJ).
var compactJWS = regexp.MustCompile(`eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{16,}`)

// JWTs masks every JSON Web Token in text: a bearer credential whoever
// holds it may use (stackd's own cloud tokens, a Kubernetes service
// account's, an identity provider's), whether or not the Redactor knows
// it, so that a token that a program left in its state, or that
// another replica or an earlier run of stackd made, never reaches what
// stackd stores, serves or sends. A token is three base64url parts whose
// first is a JSON header naming its algorithm ("alg"). JWTs is
// idempotent.
func JWTs(text string) string {
	if !strings.Contains(text, "eyJ") {
		return text
	}
	return compactJWS.ReplaceAllStringFunc(text, func(tok string) string {
		header, _, _ := strings.Cut(tok, ".")
		data, err := base64.RawURLEncoding.DecodeString(header)
		if err != nil {
			return tok
		}
		var h struct {
			Alg *string `json:"alg"`
		}
		if json.Unmarshal(data, &h) != nil || h.Alg == nil {
			return tok
		}
		return Mask
	})
}
