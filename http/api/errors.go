// Package api is berthd's HTTP API (CONTRACT.md): routes, request decoding, the
// status mapping of the sentinel errors, health, stats and metrics. Handlers never
// touch state: they ask actors through supervisors.Ask and answer what comes back.
package api

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/berth-dev/berth/messages"
)

// maxErrorText keeps every error body under 4 KiB.
const maxErrorText = 1024

// statusOf maps an error onto its wire status and body: the one table that turns
// messages' sentinels into CONTRACT.md's statuses, validation codes and codes.
func statusOf(err error) (int, messages.ErrorBody) {
	body := messages.ErrorBody{Error: safeText(err)}
	switch {
	case errors.Is(err, messages.ErrInvalidManifest):
		body.ValidationCode = "invalid_manifest"
		return http.StatusBadRequest, body
	case errors.Is(err, messages.ErrUnknownSKU):
		body.ValidationCode = "unknown_sku"
		return http.StatusBadRequest, body
	case errors.Is(err, messages.ErrImageNotAllowed):
		body.ValidationCode = "image_not_allowed"
		return http.StatusBadRequest, body
	case errors.Is(err, messages.ErrBadRequest):
		return http.StatusBadRequest, body
	case errors.Is(err, messages.ErrAlreadyProvisioned):
		body.Code = "already_provisioned"
		return http.StatusConflict, body
	case errors.Is(err, messages.ErrInvalidState):
		return http.StatusConflict, body
	case errors.Is(err, messages.ErrNotFound):
		return http.StatusNotFound, body
	case errors.Is(err, messages.ErrDemoteExceedsTier):
		body.Code = "demote_exceeds_tier"
		return http.StatusUnprocessableEntity, body
	case errors.Is(err, messages.ErrNotRetained):
		return http.StatusUnprocessableEntity, body
	case errors.Is(err, messages.ErrInsufficientResources):
		body.Code = "insufficient_resources"
		return http.StatusServiceUnavailable, body
	case errors.Is(err, messages.ErrLifecyclePending):
		body.Code = "lifecycle_pending"
		return http.StatusServiceUnavailable, body
	case errors.Is(err, messages.ErrBusy), errors.Is(err, messages.ErrUnavailable):
		return http.StatusServiceUnavailable, body
	}
	body.Error = "internal error"
	return http.StatusInternalServerError, body
}

func safeText(err error) string {
	s := messages.SafeMessage(err)
	if s == "" {
		s = "error"
	}
	if len(s) > maxErrorText {
		s = s[:maxErrorText]
		for !utf8.ValidString(s) {
			s = s[:len(s)-1]
		}
	}
	return strings.ToValidUTF8(s, "?")
}

// writeError answers err with its mapped status.
func writeError(w http.ResponseWriter, err error) {
	status, body := statusOf(err)
	if status == http.StatusServiceUnavailable && body.Code == "" {
		w.Header().Set("Retry-After", "1")
	}
	writeJSON(w, status, body)
}

// writeJSON answers v as JSON with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		status, data = http.StatusInternalServerError, []byte(`{"error":"internal error"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(data, '\n'))
}
