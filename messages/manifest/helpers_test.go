package manifest

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"unicode"

	"github.com/berth-dev/berth/messages"
)

var testOpts = Options{AllowedRegistries: []string{"docker.io", "ghcr.io", "127.0.0.1:5000"}}

var allKinds = []error{messages.ErrInvalidManifest, messages.ErrImageNotAllowed, messages.ErrBadRequest}

// loneItem is a lease of one unnamed item, which normalises to "app".
func loneItem() []messages.LeaseItem {
	return []messages.LeaseItem{{SKU: "docker-small", Quantity: 1}}
}

// named returns one item of quantity 1 per service name.
func named(names ...string) []messages.LeaseItem {
	out := make([]messages.LeaseItem, len(names))
	for i, n := range names {
		out[i] = messages.LeaseItem{SKU: "docker-small", Quantity: 1, ServiceName: n}
	}
	return out
}

// flat is a flat manifest with image nginx plus the given extra fields.
func flat(fields string) string {
	if fields == "" {
		return `{"image":"nginx"}`
	}
	return `{"image":"nginx",` + fields + `}`
}

// stack joins `"name":{…}` entries into a stack manifest.
func stack(services ...string) string {
	return `{"services":{` + strings.Join(services, ",") + `}}`
}

// jsonObject builds {"<prefix>0": <value>, …} with n entries.
func jsonObject(n int, prefix, value string) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = fmt.Sprintf("%q:%s", fmt.Sprintf("%s%d", prefix, i), value)
	}
	return "{" + strings.Join(parts, ",") + "}"
}

// jsonArray builds [<f(0)>, …] with n entries.
func jsonArray(n int, f func(i int) string) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = f(i)
	}
	return "[" + strings.Join(parts, ",") + "]"
}

// assertRefusal checks err is a *messages.Refusal of exactly kind, with a message
// that is non-empty, under 512 bytes, printable, and mentions want.
func assertRefusal(t *testing.T, err error, kind error, want string) {
	t.Helper()
	if err == nil {
		t.Fatalf("accepted; want refusal %v mentioning %q", kind, want)
	}
	var r *messages.Refusal
	if !errors.As(err, &r) {
		t.Fatalf("error %T %q is not a *messages.Refusal", err, err)
	}
	if !errors.Is(err, kind) {
		t.Fatalf("refusal kind %v, want %v (msg %q)", r.Kind, kind, r.Msg)
	}
	for _, other := range allKinds {
		if other != kind && errors.Is(err, other) {
			t.Fatalf("refusal is also %v", other)
		}
	}
	assertSafeMessage(t, r.Msg)
	if !strings.Contains(r.Msg, want) {
		t.Fatalf("message %q does not mention %q", r.Msg, want)
	}
}

// assertSafeMessage: non-empty, < 512 bytes, no control or non-printable runes.
func assertSafeMessage(t testing.TB, msg string) {
	t.Helper()
	if msg == "" || len(msg) >= 512 {
		t.Fatalf("message length %d, want 1..511: %q", len(msg), msg)
	}
	for _, r := range msg {
		if !unicode.IsPrint(r) {
			t.Fatalf("message has non-printable rune %U: %q", r, msg)
		}
	}
}
