package api

// Storage-bound requests (the seed's "runtime storage-identity verification,
// backend_storage_id query and X-Fred-Backend-Storage-ID response header"): a
// newer providerd binds a request to the storage identity it saw, by the
// /_fred/storage/{storage_id}/… form of a route or a backend_storage_id query
// value; fred v0.13's client binds nothing and is answered as before.

import (
	"net/http"
	"strings"

	"github.com/berth-dev/berth/messages"
)

const (
	// StorageHeader names berthd's storage identity on every protected answer.
	StorageHeader = "X-Fred-Backend-Storage-ID"
	// storagePrefix is the storage-bound form of every protected route.
	storagePrefix = "/_fred/storage/{storage_id}"
	storageQuery  = "backend_storage_id"
)

// Storage is berthd's storage identity, as the protected routes name and verify it.
type Storage struct {
	ID string // the storage_id of state.db and its marker, sent in every callback
	// Attest proves at runtime that the marker and state.db still say ID (the
	// data dir was not swapped, unmounted or restored under the process); an
	// error refuses the request before it changes anything. nil: not verified.
	Attest func() error
}

// namesStorage sets the identity header on every answer of a protected route,
// refusals included: a caller learns which backend refused it.
func (s *server) namesStorage(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.d.Storage.ID != "" {
			w.Header().Set(StorageHeader, s.d.Storage.ID)
		}
		next.ServeHTTP(w, r)
	})
}

// bound runs an authenticated request only when berthd's storage identity still
// verifies (else 503, retryable) and every identity the request is bound to is
// berthd's (else 421 storage_identity_mismatch, before anything changes).
func (s *server) bound(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.d.Storage.Attest != nil {
			if err := s.d.Storage.Attest(); err != nil {
				s.d.Log.Error().Err(err).Str("path", r.URL.Path).Msg("storage identity not verified: request refused")
				writeError(w, messages.Refuse(messages.ErrUnavailable, "the backend's storage identity could not be verified"))
				return
			}
		}
		claims := r.URL.Query()[storageQuery]
		if strings.HasPrefix(r.Pattern, storagePrefix) {
			claims = append(claims, r.PathValue("storage_id"))
		}
		for _, c := range claims {
			if c != s.d.Storage.ID {
				writeError(w, messages.Refuse(messages.ErrStorageMismatch,
					"the request is bound to backend storage %q; this backend's storage identity is %s", c, s.d.Storage.ID))
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}
