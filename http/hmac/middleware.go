package hmac

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/berth-dev/berth/messages/callback"
)

// Exact refusal bodies. Each ends in "\n", like json.Encoder output, so they read
// the same as every other JSON error berthd writes.
const (
	BodyMissing    = `{"error":"missing signature"}` + "\n"
	BodyInvalid    = `{"error":"invalid signature"}` + "\n"
	BodyTooLarge   = `{"error":"request body too large"}` + "\n"
	BodyUnreadable = `{"error":"request body could not be read"}` + "\n"
	BodyTooSlow    = `{"error":"request body too slow"}` + "\n"
)

// Middleware authenticates every request before next sees it. It reads the body
// with the cap (at most MaxBody+1 bytes), then, in CONTRACT.md's order:
//
//  1. no X-Fred-Signature header → 401 {"error":"missing signature"}
//  2. body over the cap          → 413 {"error":"request body too large"}
//  3. malformed, mismatched under both keys, stale or future
//     → 401 {"error":"invalid signature"}
//
// A body that fails to read for another reason (client gone, broken chunking) is a
// 503 {"error":"request body could not be read"}: it is transient, and a 400 would
// make providerd treat the lease as permanently rejected. A body slower than the
// pace (Verifier.BodyGrace, BodyMinRate, BodyTimeout) is cut off by a read
// deadline: 503 {"error":"request body too slow"} and the connection is closed.
//
// On success next runs with r.Body replaced by the fully read bytes; it never runs
// for a refused request.
func (v *Verifier) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, readErr := v.readBody(w, r)
		if errors.Is(readErr, ErrTooSlow) {
			w.Header().Set("Connection", "close") // the body is cut off mid-stream
		}
		values := r.Header.Values(callback.Header)
		var err error
		switch {
		case len(values) == 0:
			err = ErrMissing
		case readErr != nil:
			err = readErr
		case len(values) > 1 || values[0] == "":
			// A present-but-empty or repeated header is not "missing": the caller
			// tried to authenticate and got it wrong.
			err = ErrMalformed
		default:
			err = v.Verify(values[0], r.Method, requestURI(r), body)
		}
		if v.Observe != nil {
			v.Observe(Outcome(err))
		}
		if err != nil {
			refuse(w, err)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		next.ServeHTTP(w, r)
	})
}

// Unread guards a route that neither authenticates nor reads a body (health,
// stats, metrics, not found). net/http drains up to 256 KiB of an unread body
// after the handler, with no deadline of its own; a body sent anyway must arrive
// within BodyGrace, and the connection is closed after the answer.
func (v *Verifier) Unread(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength != 0 {
			_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(orDefault(v.BodyGrace, DefaultBodyGrace)))
			w.Header().Set("Connection", "close")
		}
		next.ServeHTTP(w, r)
	})
}

// readBody reads the whole body, but no more than MaxBody+1 bytes, at the pace.
// http.MaxBytesReader also tells the server to close the connection after an
// oversized body, instead of draining the rest of it.
func (v *Verifier) readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	if r.Body == nil || r.Body == http.NoBody {
		return nil, nil
	}
	p := &pacedBody{body: r.Body, rc: http.NewResponseController(w), start: time.Now(),
		grace: orDefault(v.BodyGrace, DefaultBodyGrace), rate: orDefault(v.BodyMinRate, DefaultBodyMinRate),
		timeout: orDefault(v.BodyTimeout, DefaultBodyTimeout)}
	body, err := io.ReadAll(http.MaxBytesReader(w, p, orDefault(v.MaxBody, DefaultMaxBody)))
	if err == nil {
		_ = p.rc.SetReadDeadline(time.Time{}) // the rest of the connection is the server's
		return body, nil
	}
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		return nil, ErrTooLarge
	case p.slow:
		return nil, fmt.Errorf("%w: %d bytes in %s", ErrTooSlow, p.n, time.Since(p.start).Round(time.Millisecond))
	}
	return nil, errors.Join(ErrUnreadable, err)
}

// pacedBody reads a request body under a moving connection read deadline: by
// start + grace + n/rate once n bytes have arrived, and by start + timeout at the
// latest. Where the writer cannot set deadlines (a test recorder) the pace is
// still checked after every read, only without interrupting a read that hangs.
type pacedBody struct {
	body    io.ReadCloser
	rc      *http.ResponseController
	start   time.Time
	grace   time.Duration
	rate    int64
	timeout time.Duration
	n       int64
	slow    bool
}

func (p *pacedBody) deadline() time.Time {
	allowed := p.grace + time.Duration(float64(p.n)/float64(p.rate)*float64(time.Second))
	return p.start.Add(min(allowed, p.timeout))
}

func (p *pacedBody) Read(b []byte) (int, error) {
	deadline := p.deadline()
	if !time.Now().Before(deadline) {
		p.slow = true
		return 0, ErrTooSlow
	}
	_ = p.rc.SetReadDeadline(deadline) // http.ErrNotSupported: checked after the read instead
	n, err := p.body.Read(b)
	p.n += int64(n)
	if err != nil && !errors.Is(err, io.EOF) && (errors.Is(err, os.ErrDeadlineExceeded) || !time.Now().Before(deadline)) {
		p.slow = true
		return n, fmt.Errorf("%w: %w", ErrTooSlow, err)
	}
	return n, err
}

func (p *pacedBody) Close() error { return p.body.Close() }

// requestURI is the request target exactly as received (path + raw query). A
// request built by hand has no RequestURI, and an absolute-form target
// ("http://host/path") is not what the signer signed; both fall back to the URL.
func requestURI(r *http.Request) string {
	if strings.HasPrefix(r.RequestURI, "/") {
		return r.RequestURI
	}
	return r.URL.RequestURI()
}

func refuse(w http.ResponseWriter, err error) {
	r := refusalOf(err)
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(r.body)))
	w.WriteHeader(r.status)
	_, _ = io.WriteString(w, r.body) // the client may be gone; nothing to do about it
}
