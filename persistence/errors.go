package persistence

import (
	"errors"
	"fmt"
	"strings"
)

// Sentinels. Every refusal wraps exactly one of them; its message is one line that
// names the file (or directory) and the reason, fit to print before exiting 1.
var (
	ErrLocked = errors.New("locked by another process") // daemon.lock (or bbolt's lock on a db file) is held
	// ErrCorrupt: a db or marker that does not decode, is truncated or fails bbolt's consistency check.
	ErrCorrupt     = errors.New("corrupt store")
	ErrNewerSchema = errors.New("newer store schema") // meta.schema_version is newer than SchemaVersion
	// ErrForeign: the marker and state.db do not belong together (IDs differ, or one exists without the other).
	ErrForeign        = errors.New("foreign store")
	ErrUnsafeFile     = errors.New("unsafe store file")               // a symlink, non-regular, hard-linked or not mode 0600
	ErrTooLarge       = errors.New("store file too large")            // a db file over the configured size ceiling
	ErrNoIdentity     = errors.New("no storage identity")             // production mode and no storage identity marker
	ErrIdentityExists = errors.New("storage identity already exists") // initialisation asked for over an existing store
	// ErrLatched: an earlier write failed with an unknown outcome; no write is accepted any more.
	ErrLatched = errors.New("store latched")
)

// refusal is an error with a one-line operator message that wraps a sentinel and,
// optionally, the underlying cause.
type refusal struct {
	kind  error
	msg   string
	cause error
}

func (r *refusal) Error() string { return r.msg }

func (r *refusal) Unwrap() []error {
	if r.cause != nil {
		return []error{r.kind, r.cause}
	}
	return []error{r.kind}
}

// refuse builds a refusal of the given kind; the message is forced onto one line.
func refuse(kind error, format string, args ...any) error {
	return &refusal{kind: kind, msg: oneLine(fmt.Sprintf(format, args...))}
}

// refuseCause is refuse with a wrapped cause (its text is expected in the message).
func refuseCause(kind, cause error, format string, args ...any) error {
	return &refusal{kind: kind, msg: oneLine(fmt.Sprintf(format, args...)), cause: cause}
}

// oneLine folds line breaks so a refusal prints as exactly one line.
func oneLine(s string) string {
	if !strings.ContainsAny(s, "\r\n") {
		return s
	}
	return strings.Join(strings.Fields(strings.NewReplacer("\r", " ", "\n", " ").Replace(s)), " ")
}

// inputError is a write refused before anything was written (bad stream name, an
// append to nothing, a snapshot behind its journal…). It never latches the store.
type inputError struct{ msg string }

func (e *inputError) Error() string { return e.msg }

func badInput(format string, args ...any) error {
	return &inputError{msg: oneLine(fmt.Sprintf(format, args...))}
}

// IsInputError reports whether err is a write refused for bad input: nothing was
// written and the store is not latched, so the caller's own state is at fault.
func IsInputError(err error) bool {
	var e *inputError
	return errors.As(err, &e)
}

// latchedError is returned by every write once the store is latched; it names the
// first cause and wraps both ErrLatched and that cause.
type latchedError struct {
	path  string
	first error
}

func (e *latchedError) Error() string {
	return fmt.Sprintf("%s: store latched, writes refused; first cause: %v", e.path, e.first)
}

func (e *latchedError) Unwrap() []error { return []error{ErrLatched, e.first} }

// errClosed is returned by writes after Close; it does not latch.
var errClosed = errors.New("store closed")
