package manifest

import "encoding/base64"

// MaxPayloadBytes is the limit on the decoded (raw JSON) manifest.
const MaxPayloadBytes = 1 << 20

// payloadEncodings are tried in order. providerd sends standard padded base64;
// the other three are accepted because a 400 is permanent (the lease is closed
// on-chain) and the variants are unambiguous: they differ only in padding and in
// two alphabet characters, so no string decodes to different bytes under two of
// them. Newlines (MIME-style wrapping) are ignored by every variant.
var payloadEncodings = []*base64.Encoding{
	base64.StdEncoding,
	base64.RawStdEncoding,
	base64.URLEncoding,
	base64.RawURLEncoding,
}

// DecodePayload base64-decodes a request's payload and enforces the 1 MiB limit on
// the raw manifest. Refusals are ErrInvalidManifest.
func DecodePayload(b64 string) ([]byte, error) {
	if b64 == "" {
		return nil, invalid("payload is empty; it must be the base64-encoded manifest JSON")
	}
	// Reject early what cannot decode under the limit, before allocating for it;
	// the slack covers line wrapping.
	if len(b64) > base64.StdEncoding.EncodedLen(MaxPayloadBytes)*2 {
		return nil, invalid("payload: manifest exceeds %d bytes", MaxPayloadBytes)
	}
	for _, enc := range payloadEncodings {
		raw, err := enc.DecodeString(b64)
		if err != nil {
			continue
		}
		if len(raw) > MaxPayloadBytes {
			return nil, invalid("payload: manifest exceeds %d bytes", MaxPayloadBytes)
		}
		return raw, nil
	}
	return nil, invalid("payload is not valid base64")
}
