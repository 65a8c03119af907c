// Package messages is berth's vocabulary: the commands, events, replies and value
// types actors exchange, and the sentinel errors the wire maps to status codes.
package messages

import (
	"errors"
	"fmt"
)

// Sentinel errors. Every refusal that reaches the wire wraps exactly one of these;
// http/api maps them to status codes and codes (CONTRACT.md) in one table.
var (
	// ErrBadRequest: malformed JSON, missing fields, non-canonical UUIDs, bad query values. 400.
	ErrBadRequest = errors.New("bad request")
	// ErrInvalidManifest: the tenant manifest breaks a rule. 400 validation_code invalid_manifest.
	ErrInvalidManifest = errors.New("invalid manifest")
	// ErrUnknownSKU: an item's SKU resolves to no profile. 400 validation_code unknown_sku.
	ErrUnknownSKU = errors.New("unknown sku")
	// ErrImageNotAllowed: an image's registry is outside allowed_registries. 400 validation_code image_not_allowed.
	ErrImageNotAllowed = errors.New("image not allowed")
	// ErrAlreadyProvisioned: the lease exists and is not failed. 409 code already_provisioned.
	ErrAlreadyProvisioned = errors.New("already provisioned")
	// ErrInvalidState: the lease exists but the command does not apply to its status. Bare 409.
	ErrInvalidState = errors.New("invalid state")
	// ErrNotFound: no such lease (or not in a state that exposes the resource). 404.
	ErrNotFound = errors.New("not found")
	// ErrInsufficientResources: the pool or a tenant quota cannot hold the lease. 503 code insufficient_resources.
	ErrInsufficientResources = errors.New("insufficient resources")
	// ErrLifecyclePending: a close cannot finish yet; retry later. 503 code lifecycle_pending.
	ErrLifecyclePending = errors.New("lifecycle pending")
	// ErrBusy: an actor's backlog is over its limit or it did not answer in time. 503.
	ErrBusy = errors.New("busy")
	// ErrUnavailable: a dependency (store, Docker) is unhealthy. 503.
	ErrUnavailable = errors.New("unavailable")
	// ErrNotRetained: a restore names no retained data this tenant may claim. Bare 422.
	ErrNotRetained = errors.New("nothing retained")
	// ErrDemoteExceedsTier: the retained data does not fit the requested smaller
	// disk tier. 422 code demote_exceeds_tier.
	ErrDemoteExceedsTier = errors.New("retained data exceeds the requested tier")
)

// Refusal is a wire-visible error: a sentinel Kind plus a tenant-safe message that
// may be shown to the caller verbatim. Internal detail stays in wrapped causes and logs.
type Refusal struct {
	Kind error  // one of the sentinels above
	Msg  string // tenant-safe, no runtime data
}

func (r *Refusal) Error() string { return r.Msg }
func (r *Refusal) Unwrap() error { return r.Kind }

// Refuse builds a Refusal with a formatted tenant-safe message.
func Refuse(kind error, format string, args ...any) error {
	return &Refusal{Kind: kind, Msg: fmt.Sprintf(format, args...)}
}

// SafeMessage returns the tenant-safe text of err: the Refusal's message when there
// is one, else the sentinel's own text. Causes never leak.
func SafeMessage(err error) string {
	var r *Refusal
	if errors.As(err, &r) && r.Msg != "" {
		return r.Msg
	}
	for _, s := range []error{ErrBadRequest, ErrInvalidManifest, ErrUnknownSKU, ErrImageNotAllowed,
		ErrAlreadyProvisioned, ErrInvalidState, ErrNotFound, ErrInsufficientResources,
		ErrLifecyclePending, ErrBusy, ErrUnavailable, ErrNotRetained, ErrDemoteExceedsTier} {
		if errors.Is(err, s) {
			return s.Error()
		}
	}
	return "internal error"
}
