// Package hmac verifies the X-Fred-Signature header on providerd's requests to
// berthd (CONTRACT.md, "Transport and authentication"); the signature's format,
// and signing, are messages/callback's.
package hmac

import (
	"crypto/hmac"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/berth-dev/berth/messages/callback"
)

// Defaults from CONTRACT.md.
const (
	DefaultMaxBody   int64 = 2 << 20 // max_request_body_size
	DefaultMaxAge          = 5 * time.Minute
	DefaultMaxFuture       = 1 * time.Minute
)

// Defaults of the body pace: a body may take BodyGrace to get going, must then
// arrive at BodyMinRate on average, and is cut off at BodyTimeout in any case (a
// 2 MiB body within 30 s is ~70 KiB/s). A client slower than that only holds a
// connection; providerd's bodies are small and sent at once.
const (
	DefaultBodyGrace         = 5 * time.Second
	DefaultBodyMinRate int64 = 1 << 10 // bytes per second
	DefaultBodyTimeout       = 30 * time.Second
)

// Reasons a request is refused. Verify returns one of the first five (possibly
// wrapped with detail); the middleware adds the last two.
var (
	ErrMissing    = errors.New("missing signature")
	ErrMalformed  = errors.New("malformed signature header")
	ErrStale      = errors.New("signature timestamp too old")
	ErrFuture     = errors.New("signature timestamp in the future")
	ErrMismatch   = errors.New("signature mismatch")
	ErrTooLarge   = errors.New("request body too large")
	ErrUnreadable = errors.New("request body unreadable")
	ErrTooSlow    = errors.New("request body too slow")
)

// Outcomes passed to Verifier.Observe, one per request.
const (
	OutcomeOK         = "ok"
	OutcomeMissing    = "missing"
	OutcomeTooLarge   = "too_large"
	OutcomeMalformed  = "malformed"
	OutcomeStale      = "stale"
	OutcomeFuture     = "future"
	OutcomeMismatch   = "mismatch"
	OutcomeUnreadable = "unreadable"
	OutcomeSlow       = "slow"
)

// refusal is how a refused request is counted (Outcome) and answered.
type refusal struct {
	err     error
	outcome string
	status  int
	body    string
}

var refusals = []refusal{
	{ErrMissing, OutcomeMissing, http.StatusUnauthorized, BodyMissing},
	{ErrTooLarge, OutcomeTooLarge, http.StatusRequestEntityTooLarge, BodyTooLarge},
	{ErrStale, OutcomeStale, http.StatusUnauthorized, BodyInvalid},
	{ErrFuture, OutcomeFuture, http.StatusUnauthorized, BodyInvalid},
	{ErrMismatch, OutcomeMismatch, http.StatusUnauthorized, BodyInvalid},
	{ErrTooSlow, OutcomeSlow, http.StatusServiceUnavailable, BodyTooSlow},
	{ErrUnreadable, OutcomeUnreadable, http.StatusServiceUnavailable, BodyUnreadable},
}

// refusalOf is err's refusal, the first that matches; anything else (ErrMalformed,
// or not one of ours) counts as malformed and answers 401 invalid signature.
func refusalOf(err error) refusal {
	for _, r := range refusals {
		if errors.Is(err, r.err) {
			return r
		}
	}
	return refusal{err, OutcomeMalformed, http.StatusUnauthorized, BodyInvalid}
}

// Outcome maps a Verify/middleware error to its metrics label.
func Outcome(err error) string {
	if err == nil {
		return OutcomeOK
	}
	return refusalOf(err).outcome
}

// Verifier checks incoming requests against the current secret and, during a key
// rotation, the next one (accepted for verification only; never used to sign).
// The zero values of the tunables mean the CONTRACT.md defaults. An empty key never
// verifies anything: anyone can compute a MAC under it.
type Verifier struct {
	Secret     []byte
	NextSecret []byte           // may be nil
	MaxBody    int64            // max_request_body_size; default 2 MiB when <= 0
	Now        func() time.Time // default time.Now
	MaxAge     time.Duration    // default 5 min when <= 0
	MaxFuture  time.Duration    // default 1 min when <= 0

	// The body pace (zero values: the Default* above). The middleware reads the body
	// under a connection read deadline of start + BodyGrace + bytes/BodyMinRate,
	// never later than start + BodyTimeout, so a client trickling its body is cut
	// off instead of pinning a connection and a goroutine.
	BodyGrace   time.Duration
	BodyMinRate int64 // bytes per second
	BodyTimeout time.Duration

	// Observe, when set, is called once per request the middleware handles with one
	// of the Outcome* labels (the lead wires it to a Prometheus CounterVec).
	Observe func(outcome string)
}

// orDefault is v, or def when v is not positive (a tunable left zero).
func orDefault[T int64 | time.Duration](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}

func (v *Verifier) now() time.Time {
	if v.Now == nil {
		return time.Now()
	}
	return v.Now()
}

// Verify is the pure check: nil when header is a well-formed signature of
// method, requestURI and body under Secret or NextSecret, with a timestamp in
// [now-MaxAge, now+MaxFuture] (whole seconds, inclusive). Otherwise it returns an
// error wrapping ErrMissing, ErrMalformed, ErrMismatch, ErrStale or ErrFuture.
//
// The MAC is checked before the clock so that "stale"/"future" only ever count
// genuinely signed requests (clock skew or replay) and "mismatch" counts wrong
// keys or tampering.
func (v *Verifier) Verify(header, method, requestURI string, body []byte) error {
	if header == "" {
		return ErrMissing
	}
	sig, err := parseHeader(header)
	if err != nil {
		return err
	}
	msg := callback.Canonical(sig.ts, method, requestURI, body)
	// Both keys are always tried so the time taken does not say which one matched.
	okCurrent := len(v.Secret) > 0 && hmac.Equal(callback.MAC(v.Secret, msg), sig.mac)
	okNext := len(v.NextSecret) > 0 && hmac.Equal(callback.MAC(v.NextSecret, msg), sig.mac)
	if !okCurrent && !okNext {
		return ErrMismatch
	}
	// Compare in whole seconds: the header carries no fraction, so "exactly
	// now-MaxAge" must not be refused for the sub-second part of now.
	now := time.Unix(v.now().Unix(), 0)
	at := time.Unix(sig.unix, 0)
	if at.Before(now.Add(-orDefault(v.MaxAge, DefaultMaxAge))) {
		return fmt.Errorf("%w: t=%d, now=%d", ErrStale, sig.unix, now.Unix())
	}
	if at.After(now.Add(orDefault(v.MaxFuture, DefaultMaxFuture))) {
		return fmt.Errorf("%w: t=%d, now=%d", ErrFuture, sig.unix, now.Unix())
	}
	return nil
}

type signature struct {
	ts   string // timestamp text exactly as sent; it is what was signed
	unix int64
	mac  []byte
}

// parseHeader parses "t=<decimal>,sha256=<64 hex>" strictly: exactly two parts in
// that order, optional spaces after the comma, nothing else.
func parseHeader(h string) (signature, error) {
	first, second, ok := strings.Cut(h, ",")
	if !ok {
		return signature{}, fmt.Errorf("%w: want two comma-separated parts", ErrMalformed)
	}
	if strings.Contains(second, ",") {
		return signature{}, fmt.Errorf("%w: more than two parts", ErrMalformed)
	}
	ts, ok := strings.CutPrefix(first, "t=")
	if !ok {
		return signature{}, fmt.Errorf("%w: first part is not t=", ErrMalformed)
	}
	if ts == "" || strings.Trim(ts, "0123456789") != "" { // ParseInt alone would also take a sign
		return signature{}, fmt.Errorf("%w: timestamp is not decimal seconds", ErrMalformed)
	}
	unix, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return signature{}, fmt.Errorf("%w: timestamp out of range", ErrMalformed)
	}
	digest, ok := strings.CutPrefix(strings.TrimLeft(second, " "), "sha256=")
	if !ok {
		return signature{}, fmt.Errorf("%w: second part is not sha256=", ErrMalformed)
	}
	if len(digest) != 2*32 {
		return signature{}, fmt.Errorf("%w: sha256 must be 64 hex digits", ErrMalformed)
	}
	sum, err := hex.DecodeString(digest)
	if err != nil {
		return signature{}, fmt.Errorf("%w: sha256 is not hex", ErrMalformed)
	}
	return signature{ts: ts, unix: unix, mac: sum}, nil
}
