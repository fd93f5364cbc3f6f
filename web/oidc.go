package web

import (
	"context"
	"net/http"
)

// Issuer is stackd's OpenID issuer of workload identities (the identity
// package implements it): web serves its discovery document and its
// JWKS to anyone, as every relying party needs them without a
// credential, and its emergency rotation to admins.
type Issuer interface {
	Discovery() []byte
	JWKS(ctx context.Context) ([]byte, error)
	Rotate(ctx context.Context, emergency bool) (string, error)
}

// Where the issuer's documents are served: the issuer URL's own path is
// the reverse proxy's to map (docs/credentials.md).
const (
	oidcDiscoveryPath = "/.well-known/openid-configuration"
	oidcJWKSPath      = "/.well-known/jwks.json"
)

// routeOIDC serves the issuer's documents and its rotation, when stackd
// is an issuer.
func (s *Server) routeOIDC(mux *http.ServeMux) {
	if s.opts.Issuer == nil {
		return
	}
	mux.HandleFunc("GET "+oidcDiscoveryPath, func(w http.ResponseWriter, _ *http.Request) {
		writeDocument(w, s.opts.Issuer.Discovery())
	})
	mux.HandleFunc("GET "+oidcJWKSPath, func(w http.ResponseWriter, r *http.Request) {
		data, err := s.opts.Issuer.JWKS(r.Context())
		if err != nil {
			s.log.Error("cannot serve the JWKS", "err", err)
			writeError(w, http.StatusServiceUnavailable, "the signing keys cannot be read now")
			return
		}
		writeDocument(w, data)
	})
	mux.HandleFunc("POST /api/v1/oidc/rotate", s.rotateKey)
}

// writeDocument serves one of the issuer's documents. Relying parties
// cache the JWKS; five minutes keep a rotation's new key visible soon.
func writeDocument(w http.ResponseWriter, data []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "public, max-age=300")
	_, _ = w.Write(data)
}

// rotateKey makes a new signing key at once (POST /api/v1/oidc/rotate):
// with ?emergency=true the previous key is withdrawn too, and the tokens
// it signed stop validating.
func (s *Server) rotateKey(w http.ResponseWriter, r *http.Request) {
	emergency := r.URL.Query().Get("emergency") == "true"
	kid, err := s.opts.Issuer.Rotate(r.Context(), emergency)
	if err != nil {
		s.log.Error("cannot rotate the signing key", "err", err)
		writeError(w, http.StatusInternalServerError, "cannot rotate the signing key: "+err.Error())
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"kid": kid, "emergency": emergency})
}
