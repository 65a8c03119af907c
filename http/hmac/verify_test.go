package hmac_test

import (
	"bytes"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	auth "github.com/berth-dev/berth/http/hmac"
	"github.com/berth-dev/berth/messages/callback"
)

func TestVerify_TypedReasons(t *testing.T) {
	now := time.Unix(1750000000, 700_000_000)
	v := &auth.Verifier{Secret: katKey, Now: func() time.Time { return now }}
	sign := func(key []byte, at time.Time) string {
		return callback.Sign(key, http.MethodGet, "/x", nil, at)
	}
	cases := []struct {
		name, header string
		want         error
		outcome      string
	}{
		{"ok", sign(katKey, now), nil, "ok"},
		{"missing", "", auth.ErrMissing, "missing"},
		{"malformed", "t=1", auth.ErrMalformed, "malformed"},
		{"mismatch", sign([]byte("some-other-key-0123456789abcdef0123"), now), auth.ErrMismatch, "mismatch"},
		{"stale", sign(katKey, now.Add(-5*time.Minute-time.Second)), auth.ErrStale, "stale"},
		{"future", sign(katKey, now.Add(time.Minute+time.Second)), auth.ErrFuture, "future"},
		{"wrong key and stale: mismatch, the MAC is checked first", sign([]byte("some-other-key-0123456789abcdef0123"), now.Add(-time.Hour)), auth.ErrMismatch, "mismatch"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := v.Verify(c.header, http.MethodGet, "/x", nil)
			if c.want == nil && err != nil || c.want != nil && !errors.Is(err, c.want) {
				t.Fatalf("Verify = %v, want %v", err, c.want)
			}
			if got := auth.Outcome(err); got != c.outcome {
				t.Fatalf("Outcome = %q, want %q", got, c.outcome)
			}
		})
	}
}

// The window is whole seconds and inclusive at both ends, however far into its
// second the verifier's clock is.
func TestVerify_WindowBoundsInclusive_AtAnySubSecond(t *testing.T) {
	for _, frac := range []time.Duration{0, time.Millisecond, 500 * time.Millisecond, time.Second - time.Nanosecond} {
		now := time.Unix(1750000000, 0).Add(frac)
		v := &auth.Verifier{Secret: katKey, Now: func() time.Time { return now }}
		check := func(offset time.Duration, want error) {
			t.Helper()
			h := callback.Sign(katKey, http.MethodGet, "/", nil, time.Unix(now.Unix(), 0).Add(offset))
			err := v.Verify(h, http.MethodGet, "/", nil)
			if want == nil && err != nil || want != nil && !errors.Is(err, want) {
				t.Errorf("frac %v offset %v: Verify = %v, want %v", frac, offset, err, want)
			}
		}
		check(-5*time.Minute, nil)
		check(-5*time.Minute-time.Second, auth.ErrStale)
		check(time.Minute, nil)
		check(time.Minute+time.Second, auth.ErrFuture)
	}
}

func TestVerify_CustomWindow(t *testing.T) {
	now := time.Unix(1750000000, 0)
	v := &auth.Verifier{Secret: katKey, Now: func() time.Time { return now }, MaxAge: 10 * time.Second, MaxFuture: 2 * time.Second}
	if err := v.Verify(callback.Sign(katKey, "GET", "/", nil, now.Add(-11*time.Second)), "GET", "/", nil); !errors.Is(err, auth.ErrStale) {
		t.Errorf("11 s old under a 10 s window: %v, want ErrStale", err)
	}
	if err := v.Verify(callback.Sign(katKey, "GET", "/", nil, now.Add(3*time.Second)), "GET", "/", nil); !errors.Is(err, auth.ErrFuture) {
		t.Errorf("3 s ahead under a 2 s window: %v, want ErrFuture", err)
	}
	if err := v.Verify(callback.Sign(katKey, "GET", "/", nil, now.Add(-10*time.Second)), "GET", "/", nil); err != nil {
		t.Errorf("exactly 10 s old: %v, want nil", err)
	}
}

// An empty key is public knowledge: a verifier configured without secrets must
// refuse even a signature made with the empty key.
func TestVerify_EmptySecret_RefusesEverything(t *testing.T) {
	now := time.Unix(1750000000, 0)
	for _, v := range []*auth.Verifier{
		{Now: func() time.Time { return now }},
		{Secret: []byte{}, NextSecret: []byte{}, Now: func() time.Time { return now }},
	} {
		h := callback.Sign(nil, http.MethodGet, "/", nil, now)
		if err := v.Verify(h, http.MethodGet, "/", nil); !errors.Is(err, auth.ErrMismatch) {
			t.Errorf("empty-key signature: %v, want ErrMismatch", err)
		}
	}
}

func TestVerify_HeaderShapes(t *testing.T) {
	now := time.Unix(1750000000, 0)
	v := &auth.Verifier{Secret: katKey, Now: func() time.Time { return now }}
	good := callback.Sign(katKey, http.MethodGet, "/", nil, now)
	ts, mac, _ := strings.Cut(good, ",")
	hexMAC := strings.TrimPrefix(mac, "sha256=")
	accepted := map[string]string{
		"canonical":          good,
		"space after comma":  ts + ", " + mac,
		"spaces after comma": ts + ",   " + mac,
		"uppercase hex":      ts + ",sha256=" + strings.ToUpper(hexMAC),
	}
	for name, h := range accepted {
		if err := v.Verify(h, http.MethodGet, "/", nil); err != nil {
			t.Errorf("%s (%q): %v, want nil", name, h, err)
		}
	}
	// Well-formed, but the MAC covers the timestamp text: the signer signed
	// "1750000000", not "01750000000".
	if err := v.Verify("t=0"+strings.TrimPrefix(good, "t="), http.MethodGet, "/", nil); !errors.Is(err, auth.ErrMismatch) {
		t.Errorf("leading zero in t: %v, want ErrMismatch", err)
	}
	for name, h := range malformedHeaders(good) {
		if err := v.Verify(h, http.MethodGet, "/", nil); !errors.Is(err, auth.ErrMalformed) {
			t.Errorf("%s (%q): %v, want ErrMalformed", name, h, err)
		}
	}
}

// malformedHeaders derives broken headers from a genuine one, so each case is
// wrong only in its shape (a lax parser would accept them). "empty" is a present
// header with an empty value; Verify itself reads "" as missing, so it is only
// used through HTTP.
func malformedHeaders(good string) map[string]string {
	ts, mac, _ := strings.Cut(good, ",")
	hexMAC := strings.TrimPrefix(mac, "sha256=")
	unix := strings.TrimPrefix(ts, "t=")
	return map[string]string{
		"no comma":           ts + mac,
		"only t":             ts,
		"only sha256":        mac,
		"swapped order":      mac + "," + ts,
		"non-hex":            ts + ",sha256=" + "g" + hexMAC[1:],
		"short hex":          ts + ",sha256=" + hexMAC[:63],
		"long hex":           ts + ",sha256=" + hexMAC + "0",
		"short even hex":     ts + ",sha256=" + hexMAC[:62],
		"long even hex":      ts + ",sha256=" + hexMAC + "00",
		"empty hex":          ts + ",sha256=",
		"non-numeric t":      "t=abc,sha256=" + hexMAC,
		"fractional t":       "t=" + unix + ".0," + mac,
		"signed t":           "t=+" + unix + "," + mac,
		"negative t":         "t=-" + unix + "," + mac,
		"empty t":            "t=," + mac,
		"t overflows int64":  "t=99999999999999999999," + mac,
		"extra part":         good + ",v=1",
		"trailing comma":     good + ",",
		"space before comma": ts + " ," + mac,
		"tab after comma":    ts + ",\t" + mac,
		"space in t":         "t= " + unix + "," + mac,
		"wrong algorithm":    ts + ",sha512=" + hexMAC,
		"uppercase keys":     "T=" + unix + ",SHA256=" + hexMAC,
		"semicolon":          ts + ";" + mac,
	}
}

var katKey = []byte("berth-known-answer-key-0123456789abcdef")

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
		h := callback.Sign(katKey, c.method, c.uri, c.body, now)
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
