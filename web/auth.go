package web

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"
)

// openPaths never need the API token: probes, and the webhook, which is
// authenticated by its own signature or secret.
var openPaths = map[string]bool{
	"/healthz":  true,
	"/readyz":   true,
	webhookPath: true,
}

// requireToken answers 401 to a request that needs the API token and does
// not carry it: with a token configured, every request but GET and HEAD,
// and those too with ReadRequiresToken. It guards the UI's routes as well.
func (s *Server) requireToken(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.needsToken(r) && !s.authorized(r) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="stackd"`)
			writeError(w, http.StatusUnauthorized, "a valid API token is required (Authorization: Bearer <token>)")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// needsToken reports whether r must carry the API token.
func (s *Server) needsToken(r *http.Request) bool {
	if s.opts.Token == "" || openPaths[r.URL.Path] {
		return false
	}
	return !isRead(r.Method) || s.opts.ReadRequiresToken
}

// isRead reports whether method changes nothing.
func isRead(method string) bool {
	return method == http.MethodGet || method == http.MethodHead
}

// authorized reports whether r carries the API token as
// "Authorization: Bearer <token>", or no token is configured. The
// comparison takes the same time whatever the token's content or length.
func (s *Server) authorized(r *http.Request) bool {
	if s.opts.Token == "" {
		return true
	}
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	return equalSecret(strings.TrimSpace(token), s.opts.Token)
}

// equalSecret compares two secrets in constant time; hashing first makes
// the time independent of their lengths too.
func equalSecret(got, want string) bool {
	g, w := sha256.Sum256([]byte(got)), sha256.Sum256([]byte(want))
	return subtle.ConstantTimeCompare(g[:], w[:]) == 1
}
