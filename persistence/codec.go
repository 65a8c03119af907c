package persistence

import (
	"encoding/json"
	"errors"

	gojson "github.com/goccy/go-json"
)

// Decoding journal records is most of a restart: at 10k leases encoding/json
// spent ~0.6 s of CPU on it (each payload scanned four times: the record's
// validation and RawMessage copy, then the payload's own). The record envelope
// (Event, Snapshot) decodes with go-json, which copies the payload about twice
// as fast: restart → healthy at 10k went from 1.02–1.16 s to 0.78–0.90 s.
// Payloads stay on encoding/json: decoded with go-json, each idle lease actor's
// state held ~210 B more live heap (5.1 KB, over the 5 KB budget of
// TestIdleLeaseActors_MemoryBudget); all-go-json restarts took 0.60–0.68 s.
// go-json has open bugs that crash on *malformed* input, so nothing reaches it
// unvalidated: Decode first checks the bytes with encoding/json (one scan), and a
// corrupt record is an error, never a crash.

// errInvalidJSON is what Decode reports for bytes that are not JSON.
var errInvalidJSON = errors.New("not valid JSON")

// Decode decodes a stored record (a journal event, a snapshot) into v.
func Decode(raw []byte, v any) error {
	if !json.Valid(raw) {
		// encoding/json's error says where the bytes go wrong.
		if err := json.Unmarshal(raw, v); err != nil {
			return err
		}
		return errInvalidJSON
	}
	return gojson.Unmarshal(raw, v)
}

// DecodeValid decodes a payload of a record Decode accepted (Event.Data,
// Snapshot.Data), or bytes berthd encoded itself, into the state it becomes.
func DecodeValid(raw []byte, v any) error { return json.Unmarshal(raw, v) }
