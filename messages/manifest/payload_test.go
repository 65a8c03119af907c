package manifest

import (
	"bytes"
	"encoding/base64"
	"strings"
	"testing"

	"github.com/berth-dev/berth/messages"
)

func TestDecodePayload_Variants(t *testing.T) {
	// ">>>?" has bytes whose std and URL encodings differ ('+', '/' vs '-', '_')
	// and a length that needs padding.
	raw := []byte(`{"image":"nginx","env":{"A":">>>?"}}` + "\xfb\xff")
	for name, enc := range map[string]string{
		"std":        base64.StdEncoding.EncodeToString(raw),
		"raw std":    base64.RawStdEncoding.EncodeToString(raw),
		"url":        base64.URLEncoding.EncodeToString(raw),
		"raw url":    base64.RawURLEncoding.EncodeToString(raw),
		"line-wrapp": wrap(base64.StdEncoding.EncodeToString(raw), 8),
	} {
		got, err := DecodePayload(enc)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if !bytes.Equal(got, raw) {
			t.Errorf("%s: decoded %q, want %q", name, got, raw)
		}
	}
}

func wrap(s string, n int) string {
	var b strings.Builder
	for len(s) > n {
		b.WriteString(s[:n] + "\r\n")
		s = s[n:]
	}
	b.WriteString(s)
	return b.String()
}

func TestDecodePayload_Refusals(t *testing.T) {
	atLimit := bytes.Repeat([]byte("x"), MaxPayloadBytes)
	if got, err := DecodePayload(base64.StdEncoding.EncodeToString(atLimit)); err != nil || len(got) != MaxPayloadBytes {
		t.Fatalf("exactly 1 MiB refused: %v", err)
	}
	for name, c := range map[string]struct{ in, msg string }{
		"empty":       {"", "payload is empty"},
		"not base64":  {"{\"image\":\"nginx\"}", "not valid base64"},
		"mixed alpha": {"ab+_", "not valid base64"},
		"over limit":  {base64.StdEncoding.EncodeToString(append(atLimit, 'x')), "exceeds"},
		"huge input":  {strings.Repeat("A", 4<<20), "exceeds"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := DecodePayload(c.in)
			assertRefusal(t, err, messages.ErrInvalidManifest, c.msg)
		})
	}
}
