package manifest

import (
	"fmt"
	"strconv"
	"unicode/utf8"

	"github.com/berth-dev/berth/messages"
)

// maxMsgBytes bounds every refusal message; the wire promises < 512 bytes and the
// facade adds nothing to it.
const maxMsgBytes = 480

// maxExcerptBytes bounds how much of one piece of tenant input a message echoes.
const maxExcerptBytes = 32

// refuse builds a tenant-safe refusal of the given kind, hard-capped in length so
// that no combination of excerpts can push a message over the wire bound.
func refuse(kind error, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	if len(msg) > maxMsgBytes {
		msg = truncateUTF8(msg, maxMsgBytes) + "..."
	}
	return &messages.Refusal{Kind: kind, Msg: msg}
}

// invalid refuses with validation_code invalid_manifest.
func invalid(format string, args ...any) error {
	return refuse(messages.ErrInvalidManifest, format, args...)
}

// badRequest refuses with a bare 400 (items are malformed).
func badRequest(format string, args ...any) error {
	return refuse(messages.ErrBadRequest, format, args...)
}

// excerpt quotes a short, ASCII-escaped prefix of tenant input for a message, so a
// message never carries more than a few dozen bytes of what the tenant sent, and
// never raw control characters.
func excerpt(s string) string {
	if len(s) <= maxExcerptBytes {
		return strconv.QuoteToASCII(s)
	}
	return strconv.QuoteToASCII(truncateUTF8(s, maxExcerptBytes)) + "..."
}

// truncateUTF8 cuts s to at most n bytes without splitting a rune.
func truncateUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
