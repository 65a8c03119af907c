// Package api is berthd's HTTP API (CONTRACT.md): routes, request decoding, the
// status mapping of the sentinel errors, health, stats and metrics. Handlers never
// touch state: they ask actors through supervisors.Ask and answer what comes back.
package api

import (
	"cmp"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/berth-dev/berth/messages"
)

// maxErrorText keeps every error body under 4 KiB.
const maxErrorText = 1024

// wireErrors is the one table that turns messages' sentinels into CONTRACT.md's
// statuses, validation codes and codes; the first match wins.
var wireErrors = []struct {
	kind                 error
	status               int
	validationCode, code string
}{
	{messages.ErrInvalidManifest, http.StatusBadRequest, "invalid_manifest", ""},
	{messages.ErrUnknownSKU, http.StatusBadRequest, "unknown_sku", ""},
	{messages.ErrImageNotAllowed, http.StatusBadRequest, "image_not_allowed", ""},
	{messages.ErrBadRequest, http.StatusBadRequest, "", ""},
	{messages.ErrAlreadyProvisioned, http.StatusConflict, "", "already_provisioned"},
	{messages.ErrInvalidState, http.StatusConflict, "", ""},
	{messages.ErrNotFound, http.StatusNotFound, "", ""},
	{messages.ErrDisabled, http.StatusForbidden, "", ""},
	{messages.ErrDemoteExceedsTier, http.StatusUnprocessableEntity, "", "demote_exceeds_tier"},
	// 421: this backend is not the one the request was meant for. Never 400 (a
	// permanent refusal closes the lease) nor 409 (already provisioned).
	{messages.ErrStorageMismatch, http.StatusMisdirectedRequest, "", "storage_identity_mismatch"},
	{messages.ErrNotRetained, http.StatusUnprocessableEntity, "", ""},
	{messages.ErrInsufficientResources, http.StatusServiceUnavailable, "", "insufficient_resources"},
	{messages.ErrLifecyclePending, http.StatusServiceUnavailable, "", "lifecycle_pending"},
	{messages.ErrBusy, http.StatusServiceUnavailable, "", ""},
	{messages.ErrUnavailable, http.StatusServiceUnavailable, "", ""},
}

// statusOf maps an error onto its wire status and body.
func statusOf(err error) (int, messages.ErrorBody) {
	for _, e := range wireErrors {
		if errors.Is(err, e.kind) {
			return e.status, messages.ErrorBody{Error: safeText(err), ValidationCode: e.validationCode, Code: e.code}
		}
	}
	return http.StatusInternalServerError, messages.ErrorBody{Error: "internal error"}
}

func safeText(err error) string {
	s := cmp.Or(messages.SafeMessage(err), "error")
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
