// Package messages is berth's vocabulary: the commands, events, replies and value
// types actors exchange, and the sentinel errors the wire maps to status codes.
package messages

import (
	"errors"
	"fmt"

	"github.com/containerd/errdefs"
)

// Sentinel errors. Every refusal that reaches the wire wraps exactly one of these;
// http/api maps them to CONTRACT.md's statuses and codes in one table. Each is a
// containerd errdefs class with its wire text (errdefs.IsNotFound(ErrNotFound)),
// the classes dockerio's errors carry too.
var (
	// ErrBadRequest: malformed JSON, missing fields, non-canonical UUIDs, bad query values.
	ErrBadRequest            = errdefs.ErrInvalidArgument.WithMessage("bad request")
	ErrInvalidManifest       = errdefs.ErrInvalidArgument.WithMessage("invalid manifest")         // the tenant manifest breaks a rule
	ErrUnknownSKU            = errdefs.ErrInvalidArgument.WithMessage("unknown sku")              // an item's SKU resolves to no profile
	ErrImageNotAllowed       = errdefs.ErrPermissionDenied.WithMessage("image not allowed")       // an image's registry is outside allowed_registries
	ErrAlreadyProvisioned    = errdefs.ErrAlreadyExists.WithMessage("already provisioned")        // the lease exists and is not failed
	ErrInvalidState          = errdefs.ErrFailedPrecondition.WithMessage("invalid state")         // the command does not apply to the lease's status
	ErrNotFound              = errdefs.ErrNotFound.WithMessage("not found")                       // no such lease, or it does not expose the resource
	ErrInsufficientResources = errdefs.ErrResourceExhausted.WithMessage("insufficient resources") // the pool or a tenant quota cannot hold the lease
	ErrLifecyclePending      = errdefs.ErrUnavailable.WithMessage("lifecycle pending")            // a close cannot finish yet; retry later
	ErrBusy                  = errdefs.ErrUnavailable.WithMessage("busy")                         // an actor is over its backlog or did not answer in time
	ErrUnavailable           = errdefs.ErrUnavailable.WithMessage("unavailable")                  // a dependency (store, Docker) is unhealthy
	ErrNotRetained           = errdefs.ErrNotFound.WithMessage("nothing retained")                // a restore names no retained data this tenant may claim
	ErrDisabled              = errdefs.ErrPermissionDenied.WithMessage("disabled")                // the configuration turned the endpoint off
	// ErrDemoteExceedsTier: the retained data does not fit the requested smaller disk tier.
	ErrDemoteExceedsTier = errdefs.ErrOutOfRange.WithMessage("retained data exceeds the requested tier")
	// ErrStorageMismatch: the request is bound (path or backend_storage_id) to a
	// storage identity that is not this backend's.
	ErrStorageMismatch = errdefs.ErrConflict.WithMessage("storage identity mismatch")
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
		ErrLifecyclePending, ErrBusy, ErrUnavailable, ErrNotRetained, ErrDemoteExceedsTier, ErrDisabled} {
		if errors.Is(err, s) {
			return s.Error()
		}
	}
	return "internal error"
}
