package callback_test

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

	"github.com/berth-dev/berth/messages/callback"
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
			if got := callback.Sign(katKey, c.method, c.uri, c.body, at); got != c.want {
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
		if got := callback.Sign(katKey, c.method, c.uri, c.body, at); got != want {
			t.Errorf("Sign(%s %s) = %q, want %q", c.method, c.uri, got, want)
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
	if err := callback.SignRequest(katKey, req, nil, at); err != nil {
		t.Fatalf("SignRequest: %v", err)
	}
	want := callback.Sign(katKey, http.MethodPost, "/cb/a%2Fb?operation_id=1&x=a+b", body, at)
	if got := req.Header.Get(callback.Header); got != want {
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
	if err := callback.SignRequest(katKey, req, body, at); err != nil {
		t.Fatal(err)
	}
	if got := req.Header.Get(callback.Header); got != callback.Sign(katKey, http.MethodPost, "/cb", body, at) {
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
	err = callback.SignRequest(katKey, req, nil, time.Unix(1, 0))
	if err == nil || !strings.Contains(err.Error(), "disk on fire") {
		t.Fatalf("SignRequest = %v, want the read error", err)
	}
	if req.Header.Get(callback.Header) != "" {
		t.Fatal("a request whose body could not be read was signed anyway")
	}
}
