package hmac_test

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	auth "github.com/berth-dev/berth/http/hmac"
	"github.com/berth-dev/berth/messages/callback"
)

// Exact wire bytes, spelled out here rather than taken from the package.
const (
	wantMissing  = `{"error":"missing signature"}` + "\n"
	wantInvalid  = `{"error":"invalid signature"}` + "\n"
	wantTooLarge = `{"error":"request body too large"}` + "\n"
)

var (
	secret     = []byte("current-callback-secret-0123456789abcdef")
	nextSecret = []byte("next-callback-secret-fedcba9876543210xyz")
	otherKey   = []byte("unrelated-secret-000000000000000000000000")
	// A clock part-way into its second: the window must still be exact.
	fixedNow = time.Unix(1750000000, 700_000_000)
)

// harness is the real middleware in front of a handler that echoes the body it
// received, behind a real HTTP server.
type harness struct {
	srv *httptest.Server

	mu       sync.Mutex
	calls    int      // handler invocations
	outcomes []string // Observe calls
}

func newHarness(t *testing.T, v *auth.Verifier) *harness {
	t.Helper()
	h := &harness{}
	v.Observe = func(o string) {
		h.mu.Lock()
		h.outcomes = append(h.outcomes, o)
		h.mu.Unlock()
	}
	echo := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.mu.Lock()
		h.calls++
		h.mu.Unlock()
		body, err := io.ReadAll(r.Body)
		if err != nil {
			w.WriteHeader(http.StatusTeapot) // makes any test expecting 200 fail
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Write(body)
	})
	h.srv = httptest.NewServer(v.Middleware(echo))
	t.Cleanup(h.srv.Close)
	return h
}

func fixedVerifier(maxBody int64) *auth.Verifier {
	return &auth.Verifier{Secret: secret, NextSecret: nextSecret, MaxBody: maxBody, Now: func() time.Time { return fixedNow }}
}

type response struct {
	status      int
	body        []byte
	contentType string
}

// send issues method uri with body; headers are added verbatim (nil: no signature).
func (h *harness) send(t *testing.T, method, uri string, body []byte, sigs ...string) response {
	t.Helper()
	req, err := http.NewRequest(method, h.srv.URL+uri, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if len(sigs) > 0 {
		req.Header[callback.Header] = sigs // raw, so empty and repeated values go out as is
	}
	client := &http.Client{Timeout: 60 * time.Second}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, uri, err)
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read response: %v", method, uri, err)
	}
	return response{resp.StatusCode, got, resp.Header.Get("Content-Type")}
}

func (h *harness) handlerCalls() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.calls
}

func (h *harness) observed() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.outcomes...)
}

func TestMiddleware_SignedGETWithQuery_AcceptedWithRealClock(t *testing.T) {
	h := newHarness(t, &auth.Verifier{Secret: secret}) // defaults: time.Now, 2 MiB
	uri := "/logs/0b7e6f1e-3c1a-4c8e-9d2f-5a6b7c8d9e0f?tail=5&x=a%20b"
	r := h.send(t, http.MethodGet, uri, nil, callback.Sign(secret, http.MethodGet, uri, nil, time.Now()))
	if r.status != http.StatusOK || len(r.body) != 0 {
		t.Fatalf("status %d body %q, want 200 and empty", r.status, r.body)
	}
	if h.handlerCalls() != 1 {
		t.Fatalf("handler ran %d times, want 1", h.handlerCalls())
	}
}

func TestMiddleware_SignedPOST_HandlerSeesExactBody(t *testing.T) {
	h := newHarness(t, fixedVerifier(0))
	body := append([]byte(`{"lease_uuid":"0b7e6f1e-3c1a-4c8e-9d2f-5a6b7c8d9e0f"}`), 0, '\n', 0xff, '\r')
	r := h.send(t, http.MethodPost, "/provision", body, callback.Sign(secret, http.MethodPost, "/provision", body, fixedNow))
	if r.status != http.StatusOK || !bytes.Equal(r.body, body) {
		t.Fatalf("status %d, handler saw %q; want 200 and %q", r.status, r.body, body)
	}
	if got := h.observed(); len(got) != 1 || got[0] != "ok" {
		t.Fatalf("observed %q, want [ok]", got)
	}
}

// One row per CONTRACT.md authentication case: exact status, exact body, whether
// the handler ran, and the outcome reported for metrics.
func TestMiddleware_ContractRows(t *testing.T) {
	const maxBody = 4096
	atCap := bytes.Repeat([]byte("a"), maxBody)
	overCap := bytes.Repeat([]byte("a"), maxBody+1)
	payload := []byte(`{"lease_uuid":"x"}`)
	sign := func(key []byte, method, uri string, body []byte, at time.Time) []string {
		return []string{callback.Sign(key, method, uri, body, at)}
	}
	cases := []struct {
		name        string
		method, uri string
		body        []byte
		sigs        []string
		status      int
		wantBody    string // for 200: the echoed request body
		outcome     string
	}{
		{"missing header", "POST", "/provision", payload, nil,
			401, wantMissing, "missing"},
		{"stale: now-5m-1s", "POST", "/provision", payload, sign(secret, "POST", "/provision", payload, fixedNow.Add(-5*time.Minute-time.Second)),
			401, wantInvalid, "stale"},
		{"exactly now-5m", "POST", "/provision", payload, sign(secret, "POST", "/provision", payload, fixedNow.Add(-5*time.Minute)),
			200, string(payload), "ok"},
		{"future: now+1m+1s", "POST", "/provision", payload, sign(secret, "POST", "/provision", payload, fixedNow.Add(time.Minute+time.Second)),
			401, wantInvalid, "future"},
		{"exactly now+1m", "POST", "/provision", payload, sign(secret, "POST", "/provision", payload, fixedNow.Add(time.Minute)),
			200, string(payload), "ok"},
		{"wrong body", "POST", "/provision", []byte(`{"lease_uuid":"y"}`), sign(secret, "POST", "/provision", payload, fixedNow),
			401, wantInvalid, "mismatch"},
		{"wrong query", "GET", "/provisions?a=2", nil, sign(secret, "GET", "/provisions?a=1", nil, fixedNow),
			401, wantInvalid, "mismatch"},
		{"query dropped", "GET", "/provisions", nil, sign(secret, "GET", "/provisions?a=1", nil, fixedNow),
			401, wantInvalid, "mismatch"},
		{"signed query", "GET", "/provisions?a=1", nil, sign(secret, "GET", "/provisions?a=1", nil, fixedNow),
			200, "", "ok"},
		{"wrong method", "PUT", "/provision", payload, sign(secret, "POST", "/provision", payload, fixedNow),
			401, wantInvalid, "mismatch"},
		{"wrong path", "POST", "/deprovision", payload, sign(secret, "POST", "/provision", payload, fixedNow),
			401, wantInvalid, "mismatch"},
		{"oversized (cap+1) with valid signature", "POST", "/provision", overCap, sign(secret, "POST", "/provision", overCap, fixedNow),
			413, wantTooLarge, "too_large"},
		{"oversized with invalid signature: size first", "POST", "/provision", overCap, sign(otherKey, "POST", "/provision", overCap, fixedNow),
			413, wantTooLarge, "too_large"},
		{"oversized with malformed header: size first", "POST", "/provision", overCap, []string{"garbage"},
			413, wantTooLarge, "too_large"},
		{"oversized without header: missing first", "POST", "/provision", overCap, nil,
			401, wantMissing, "missing"},
		{"body exactly at the cap", "POST", "/provision", atCap, sign(secret, "POST", "/provision", atCap, fixedNow),
			200, string(atCap), "ok"},
		{"present but empty header", "POST", "/provision", payload, []string{""},
			401, wantInvalid, "malformed"},
		{"repeated header", "POST", "/provision", payload, append(sign(secret, "POST", "/provision", payload, fixedNow), sign(secret, "POST", "/provision", payload, fixedNow)...),
			401, wantInvalid, "malformed"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t, fixedVerifier(maxBody))
			r := h.send(t, c.method, c.uri, c.body, c.sigs...)
			if r.status != c.status || string(r.body) != c.wantBody {
				t.Fatalf("got %d %q, want %d %q", r.status, r.body, c.status, c.wantBody)
			}
			wantCalls, wantType := 0, "application/json"
			if c.status == http.StatusOK {
				wantCalls, wantType = 1, "application/octet-stream"
			}
			if got := h.handlerCalls(); got != wantCalls {
				t.Fatalf("handler ran %d times, want %d", got, wantCalls)
			}
			if r.contentType != wantType {
				t.Fatalf("Content-Type %q, want %q", r.contentType, wantType)
			}
			if got := h.observed(); len(got) != 1 || got[0] != c.outcome {
				t.Fatalf("observed %q, want [%s]", got, c.outcome)
			}
		})
	}
}

func TestMiddleware_MalformedHeaders_401Invalid(t *testing.T) {
	h := newHarness(t, fixedVerifier(0))
	body := []byte("{}")
	good := callback.Sign(secret, http.MethodPost, "/update", body, fixedNow)
	rows := malformedHeaders(good)
	rows["empty"] = ""
	for name, sig := range rows {
		r := h.send(t, http.MethodPost, "/update", body, sig)
		if r.status != http.StatusUnauthorized || string(r.body) != wantInvalid || r.contentType != "application/json" {
			t.Errorf("%s (%q): got %d %q %q, want 401 %q", name, sig, r.status, r.body, r.contentType, wantInvalid)
		}
	}
	if n := h.handlerCalls(); n != 0 {
		t.Fatalf("handler ran %d times on malformed headers", n)
	}
	for _, o := range h.observed() {
		if o != "malformed" {
			t.Fatalf("observed %q among malformed headers", o)
		}
	}
	// Control: the genuine header these were derived from is accepted.
	if r := h.send(t, http.MethodPost, "/update", body, good); r.status != http.StatusOK {
		t.Fatalf("genuine header: %d %q", r.status, r.body)
	}
}

func TestMiddleware_Rotation(t *testing.T) {
	body := []byte(`{"lease_uuid":"x"}`)
	cases := []struct {
		name   string
		next   []byte
		signer []byte
		status int
	}{
		{"signed with Secret", nextSecret, secret, 200},
		{"signed with NextSecret", nextSecret, nextSecret, 200},
		{"signed with an unrelated key", nextSecret, otherKey, 401},
		{"NextSecret nil: Secret still works", nil, secret, 200},
		{"NextSecret nil: the would-be next key is refused", nil, nextSecret, 401},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t, &auth.Verifier{Secret: secret, NextSecret: c.next, Now: func() time.Time { return fixedNow }})
			r := h.send(t, http.MethodPost, "/restart", body, callback.Sign(c.signer, http.MethodPost, "/restart", body, fixedNow))
			if r.status != c.status {
				t.Fatalf("status %d %q, want %d", r.status, r.body, c.status)
			}
			if c.status == 401 && string(r.body) != wantInvalid {
				t.Fatalf("body %q, want %q", r.body, wantInvalid)
			}
			if wantCalls := map[int]int{200: 1, 401: 0}[c.status]; h.handlerCalls() != wantCalls {
				t.Fatalf("handler ran %d times, want %d", h.handlerCalls(), wantCalls)
			}
		})
	}
}

// MaxBody <= 0 means CONTRACT.md's 2 MiB.
func TestMiddleware_DefaultCapIs2MiB(t *testing.T) {
	h := newHarness(t, &auth.Verifier{Secret: secret, Now: func() time.Time { return fixedNow }})
	atCap := bytes.Repeat([]byte{'z'}, 2<<20)
	if r := h.send(t, http.MethodPost, "/update", atCap, callback.Sign(secret, http.MethodPost, "/update", atCap, fixedNow)); r.status != 200 || !bytes.Equal(r.body, atCap) {
		t.Fatalf("2 MiB body: %d (%d bytes echoed), want 200 and the body", r.status, len(r.body))
	}
	over := append(atCap, 'z')
	if r := h.send(t, http.MethodPost, "/update", over, callback.Sign(secret, http.MethodPost, "/update", over, fixedNow)); r.status != 413 || string(r.body) != wantTooLarge {
		t.Fatalf("2 MiB + 1 body: %d %q, want 413 %q", r.status, r.body, wantTooLarge)
	}
	if h.handlerCalls() != 1 {
		t.Fatalf("handler ran %d times, want 1", h.handlerCalls())
	}
}

// Requests signed by SignRequest — what the callback sender uses — pass the
// middleware, including escaped paths and queries, since net/http sends exactly
// URL.RequestURI() and the server verifies the request-target as received.
func TestMiddleware_AcceptsSignRequest(t *testing.T) {
	h := newHarness(t, &auth.Verifier{Secret: secret})
	for _, path := range []string{"/callback", "/cb/a%2Fb?operation_id=7&x=a+b&y=%C3%A9", "/cb?"} {
		body := []byte(`{"lease_uuid":"x","status":"success"}`)
		req, err := http.NewRequest(http.MethodPost, h.srv.URL+path, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if err := callback.SignRequest(secret, req, nil, time.Now()); err != nil {
			t.Fatal(err)
		}
		resp, err := h.srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !bytes.Equal(got, body) {
			t.Errorf("%s: %d %q, want 200 and the body", path, resp.StatusCode, got)
		}
	}
}

// A request built by hand (no RequestURI) is verified against its URL.
func TestMiddleware_HandBuiltRequest_UsesURL(t *testing.T) {
	var ran bool
	mw := (&auth.Verifier{Secret: secret, Now: func() time.Time { return fixedNow }}).Middleware(
		http.HandlerFunc(func(http.ResponseWriter, *http.Request) { ran = true }))
	req := httptest.NewRequest(http.MethodGet, "/provisions?limit=5", nil)
	req.RequestURI = ""
	req.Header.Set(callback.Header, callback.Sign(secret, http.MethodGet, "/provisions?limit=5", nil, fixedNow))
	rec := httptest.NewRecorder()
	mw.ServeHTTP(rec, req)
	if rec.Code != 200 || !ran {
		t.Fatalf("status %d ran %v, want 200 true (body %q)", rec.Code, ran, rec.Body.String())
	}
}

type brokenBody struct{}

func (brokenBody) Read([]byte) (int, error) { return 0, io.ErrUnexpectedEOF }
func (brokenBody) Close() error             { return nil }

// A body that cannot be read is transient trouble, not a permanent 400; without
// a header it is still "missing signature" first.
func TestMiddleware_UnreadableBody(t *testing.T) {
	var ran bool
	mw := fixedVerifier(0).Middleware(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { ran = true }))
	for _, c := range []struct {
		sig    string
		status int
		body   string
	}{
		{"", 401, wantMissing},
		{callback.Sign(secret, http.MethodPost, "/provision", nil, fixedNow), 503, `{"error":"request body could not be read"}` + "\n"},
	} {
		req := httptest.NewRequest(http.MethodPost, "/provision", nil)
		req.Body = brokenBody{}
		if c.sig != "" {
			req.Header.Set(callback.Header, c.sig)
		}
		rec := httptest.NewRecorder()
		mw.ServeHTTP(rec, req)
		if rec.Code != c.status || rec.Body.String() != c.body {
			t.Errorf("got %d %q, want %d %q", rec.Code, rec.Body.String(), c.status, c.body)
		}
	}
	if ran {
		t.Fatal("handler ran on an unreadable body")
	}
}
