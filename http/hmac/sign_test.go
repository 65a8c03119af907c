package hmac_test

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	auth "github.com/berth-dev/berth/http/hmac"
)

var katKey = []byte("berth-known-answer-key-0123456789abcdef")

// The expected MACs were computed outside Go (Python's hmac/hashlib) over the
// canonical string spelled out below, so they pin the format independently of
// this package's code.
func TestSign_KnownAnswerVectors_MatchIndependentImplementation(t *testing.T) {
	at := time.Unix(1700000000, 0)
	cases := []struct {
		name, method, uri string
		body              []byte
		want              string
	}{
		{"POST with query", http.MethodPost, "/provision?operation_id=abc&x=1",
			[]byte(`{"lease_uuid":"0b7e6f1e-3c1a-4c8e-9d2f-5a6b7c8d9e0f"}`),
			"t=1700000000,sha256=d38ab97975600944e12e48fd0fa0143fabf1151abe785e1967a077d8965bc22c"},
		{"GET empty body", http.MethodGet, "/logs/0b7e6f1e-3c1a-4c8e-9d2f-5a6b7c8d9e0f?tail=5", nil,
			"t=1700000000,sha256=f02babf0d84a57b3d1e05af5314b12a5c5028fcead06ee7c7f46bcc22e2303fe"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := auth.Sign(katKey, c.method, c.uri, c.body, at); got != c.want {
				t.Fatalf("Sign = %q\nwant   %q", got, c.want)
			}
		})
	}
}

// Rebuilds the MAC with crypto/hmac straight from CONTRACT.md's wording, for
// arbitrary inputs including binary bodies and sub-second times.
func TestSign_MatchesContractCanonicalString(t *testing.T) {
	at := time.Unix(1712345678, 999_999_999)
	for _, c := range []struct {
		method, uri string
		body        []byte
	}{
		{http.MethodGet, "/info/x", nil},
		{http.MethodPost, "/update", []byte("\x00\n\xff binary\r\n")},
		{http.MethodDelete, "/a%2Fb?q=%20&q=2", []byte("{}")},
	} {
		bodySum := sha256.Sum256(c.body)
		canon := "1712345678\n" + c.method + "\n" + c.uri + "\n" + hex.EncodeToString(bodySum[:])
		m := hmac.New(sha256.New, katKey)
		m.Write([]byte(canon))
		want := "t=1712345678,sha256=" + hex.EncodeToString(m.Sum(nil))
		if got := auth.Sign(katKey, c.method, c.uri, c.body, at); got != want {
			t.Errorf("Sign(%s %s) = %q, want %q", c.method, c.uri, got, want)
		}
	}
}

func TestSignVerify_RoundTrip(t *testing.T) {
	now := time.Unix(1750000000, 500_000_000)
	v := &auth.Verifier{Secret: katKey, Now: func() time.Time { return now }}
	for _, c := range []struct {
		method, uri string
		body        []byte
	}{
		{http.MethodGet, "/provisions", nil},
		{http.MethodGet, "/provisions?lease_uuid=a&lease_uuid=b", nil},
		{http.MethodPost, "/provision", []byte(`{"a":1}`)},
		{http.MethodPost, "/restore?x=%2F", bytes.Repeat([]byte{0, 1, 2, 255}, 1000)},
	} {
		h := auth.Sign(katKey, c.method, c.uri, c.body, now)
		if err := v.Verify(h, c.method, c.uri, c.body); err != nil {
			t.Errorf("Verify(Sign(%s %s)) = %v, want nil", c.method, c.uri, err)
		}
		// Each signed component matters.
		if err := v.Verify(h, c.method+"X", c.uri, c.body); !errors.Is(err, auth.ErrMismatch) {
			t.Errorf("other method: %v, want ErrMismatch", err)
		}
		if err := v.Verify(h, c.method, c.uri+"&z", c.body); !errors.Is(err, auth.ErrMismatch) {
			t.Errorf("other uri: %v, want ErrMismatch", err)
		}
		if err := v.Verify(h, c.method, c.uri, append(bytes.Clone(c.body), '!')); !errors.Is(err, auth.ErrMismatch) {
			t.Errorf("other body: %v, want ErrMismatch", err)
		}
	}
}

func TestSignRequest_ReadsAndRestoresBody(t *testing.T) {
	body := []byte(`{"lease_uuid":"x"}`)
	req, err := http.NewRequest(http.MethodPost, "http://fred.example/cb/a%2Fb?operation_id=1&x=a+b", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	at := time.Unix(1700000000, 0)
	if err := auth.SignRequest(katKey, req, nil, at); err != nil {
		t.Fatalf("SignRequest: %v", err)
	}
	want := auth.Sign(katKey, http.MethodPost, "/cb/a%2Fb?operation_id=1&x=a+b", body, at)
	if got := req.Header.Get(auth.Header); got != want {
		t.Fatalf("header = %q, want %q", got, want)
	}
	for i := 0; i < 2; i++ { // Body, then GetBody (what a redirect or retry uses)
		var rc io.ReadCloser = req.Body
		if i == 1 {
			if rc, err = req.GetBody(); err != nil {
				t.Fatal(err)
			}
		}
		got, err := io.ReadAll(rc)
		if err != nil || !bytes.Equal(got, body) {
			t.Fatalf("body after signing (read %d) = %q, %v; want %q", i, got, err, body)
		}
	}
	if req.ContentLength != int64(len(body)) {
		t.Fatalf("ContentLength = %d, want %d", req.ContentLength, len(body))
	}
}

func TestSignRequest_ExplicitBodyBecomesRequestBody(t *testing.T) {
	req, err := http.NewRequest(http.MethodPost, "http://fred.example/cb", strings.NewReader("stale"))
	if err != nil {
		t.Fatal(err)
	}
	body := []byte("fresh")
	at := time.Unix(1700000000, 0)
	if err := auth.SignRequest(katKey, req, body, at); err != nil {
		t.Fatal(err)
	}
	if got := req.Header.Get(auth.Header); got != auth.Sign(katKey, http.MethodPost, "/cb", body, at) {
		t.Fatalf("header %q does not sign the explicit body", got)
	}
	got, _ := io.ReadAll(req.Body)
	if string(got) != "fresh" {
		t.Fatalf("request body = %q, want the signed bytes %q", got, "fresh")
	}
}

type failingReader struct{}

func (failingReader) Read([]byte) (int, error) { return 0, errors.New("disk on fire") }

func TestSignRequest_BodyReadError_Returned(t *testing.T) {
	req, err := http.NewRequest(http.MethodPost, "http://fred.example/cb", failingReader{})
	if err != nil {
		t.Fatal(err)
	}
	err = auth.SignRequest(katKey, req, nil, time.Unix(1, 0))
	if err == nil || !strings.Contains(err.Error(), "disk on fire") {
		t.Fatalf("SignRequest = %v, want the read error", err)
	}
	if req.Header.Get(auth.Header) != "" {
		t.Fatal("a request whose body could not be read was signed anyway")
	}
}
