package callback

// The X-Fred-Signature header authenticates providerd's requests to berthd and
// berthd's callbacks to Fred (CONTRACT.md, "Transport and authentication"). It is
// "t=<unix seconds>,sha256=<hex MAC>", where the MAC is HMAC-SHA256, keyed with
// the raw bytes of the shared secret, over the canonical string
//
//	"<t>\n<METHOD>\n<RequestURI>\n<hex(sha256(body))>"
//
// RequestURI is the path plus "?<raw query>" exactly as sent, so the query is
// signed. Signing lives here; http/hmac verifies with Canonical and MAC.

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"
)

// Header is the request/callback header carrying the signature.
const Header = "X-Fred-Signature"

// Sign returns the header value "t=<unix>,sha256=<hex>" for method, requestURI
// (path + "?" + raw query exactly as sent; no query → just the path) and body at
// time t, keyed with the raw bytes of secret. A GET signs the empty body.
func Sign(secret []byte, method, requestURI string, body []byte, t time.Time) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	return "t=" + ts + ",sha256=" + hex.EncodeToString(MAC(secret, Canonical(ts, method, requestURI, body)))
}

// SignRequest sets the signature header on an outgoing request, signing
// req.URL.RequestURI() — what net/http's client sends as the request target.
//
// When body is non-nil it is what gets signed and it also becomes req.Body, so
// the bytes signed and the bytes sent cannot diverge. When body is nil, req.Body
// (if any) is read in full, signed, and restored.
func SignRequest(secret []byte, req *http.Request, body []byte, now time.Time) error {
	if req == nil || req.URL == nil {
		return fmt.Errorf("sign request: no request URL")
	}
	if body == nil && req.Body != nil && req.Body != http.NoBody {
		read, err := io.ReadAll(req.Body)
		closeErr := req.Body.Close()
		if err != nil {
			return fmt.Errorf("sign request %s %s: read body: %w", req.Method, req.URL.Redacted(), err)
		}
		if closeErr != nil {
			return fmt.Errorf("sign request %s %s: close body: %w", req.Method, req.URL.Redacted(), closeErr)
		}
		body = read
	}
	setBody(req, body)
	method := req.Method
	if method == "" {
		method = http.MethodGet // net/http sends "" as GET
	}
	req.Header.Set(Header, Sign(secret, method, req.URL.RequestURI(), body, now))
	return nil
}

// setBody makes req carry exactly body, replayable on redirects/retries.
func setBody(req *http.Request, body []byte) {
	if req.Header == nil {
		req.Header = make(http.Header)
	}
	if len(body) == 0 {
		req.Body = http.NoBody
		req.GetBody = func() (io.ReadCloser, error) { return http.NoBody, nil }
		req.ContentLength = 0
		return
	}
	req.Body = io.NopCloser(bytes.NewReader(body))
	req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	req.ContentLength = int64(len(body))
}

// Canonical is the string the MAC covers. ts is the timestamp text exactly as it
// appears in the header, so a verifier checks what the signer signed. The body
// enters as hex(sha256(body)), which keeps the string binary-safe.
func Canonical(ts, method, requestURI string, body []byte) []byte {
	sum := sha256.Sum256(body)
	return []byte(ts + "\n" + method + "\n" + requestURI + "\n" + hex.EncodeToString(sum[:]))
}

// MAC is HMAC-SHA256 of msg keyed with secret.
func MAC(secret, msg []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write(msg)
	return m.Sum(nil)
}
