package hmac

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// Exact refusal bodies. Each ends in "\n", like json.Encoder output, so they read
// the same as every other JSON error berthd writes.
const (
	BodyMissing    = `{"error":"missing signature"}` + "\n"
	BodyInvalid    = `{"error":"invalid signature"}` + "\n"
	BodyTooLarge   = `{"error":"request body too large"}` + "\n"
	BodyUnreadable = `{"error":"request body could not be read"}` + "\n"
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
// make providerd treat the lease as permanently rejected.
//
// On success next runs with r.Body replaced by the fully read bytes; it never runs
// for a refused request.
func (v *Verifier) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, readErr := readCapped(w, r, v.maxBody())
		values := r.Header.Values(Header)
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

// readCapped reads the whole body, but no more than max+1 bytes. http.MaxBytesReader
// also tells the server to close the connection after an oversized body, instead of
// draining the rest of it.
func readCapped(w http.ResponseWriter, r *http.Request, max int64) ([]byte, error) {
	if r.Body == nil {
		return nil, nil
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, max))
	if err == nil {
		return body, nil
	}
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		return nil, ErrTooLarge
	}
	return nil, errors.Join(ErrUnreadable, err)
}

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
	status, body := http.StatusUnauthorized, BodyInvalid
	switch {
	case errors.Is(err, ErrMissing):
		body = BodyMissing
	case errors.Is(err, ErrTooLarge):
		status, body = http.StatusRequestEntityTooLarge, BodyTooLarge
	case errors.Is(err, ErrUnreadable):
		status, body = http.StatusServiceUnavailable, BodyUnreadable
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = io.WriteString(w, body) // the client may be gone; nothing to do about it
}
