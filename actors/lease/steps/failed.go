package steps

import (
	"context"
	"errors"
	"strings"

	"github.com/berth-dev/berth/dockerio"
)

// Failed is a step's definite failure: the lease's failure reason and the
// tenant-safe message of its callback, said once where the step met Docker.
// Err is the cause, for the logs (nil: the finding itself).
type Failed struct {
	Reason, Message string
	Err             error
}

func (f *Failed) Error() string {
	if f.Err == nil {
		return f.Message
	}
	return f.Message + ": " + f.Err.Error()
}

func (f *Failed) Unwrap() error { return f.Err }

func fail(reason, message string, err error) error {
	return &Failed{Reason: reason, Message: message, Err: err}
}

// maxReason bounds one reason (or refusal) kept in the journal and diagnostics.
const maxReason = 256

// Bounded cuts a reason kept in the journal and diagnostics to 256 bytes.
func Bounded(reason string) string {
	if len(reason) > maxReason {
		return strings.ToValidUTF8(reason[:maxReason], "") + "…"
	}
	return reason
}

// unanswered reports a Docker exchange that ended without Docker's answer: a
// timeout, a cancellation, an unreachable engine.
func unanswered(err error) bool {
	var timeout interface{ Timeout() bool }
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) ||
		errors.Is(err, dockerio.ErrUnavailable) || errors.As(err, &timeout) && timeout.Timeout()
}
