package persistence

import (
	"strings"
	"testing"
	"time"
)

// A corrupt record is an error, never a crash: go-json (which Decode uses for
// speed) has open bugs that panic — or, under -race, fatally fault — on
// malformed input, so Decode validates first. The inputs include the shapes of
// those reports (an escape cut short, a sequence of different malformed
// structs); each must come back as an error, in sequence, in one process.
func TestDecode_MalformedRecords_AreErrorsNotCrashes(t *testing.T) {
	malformed := []string{
		"", "{", `{"type":`, `{"\29\`, `{"type":"x","data":{"a":"\`, `{"type":"x" "v":1}`,
		`{"type":"x","v":1,"at":"2026-01-01T00:00:00Z","data":{}}trailing`, "\x00\x01", `{"type":"\ud800`,
		`[{"type":1},{"v":"x"`, `{"seq":1,"v":1,"data":{"a":[1,2,}}`,
	}
	for round := range 3 { // a decoder's pooled state must not carry a bad input into the next
		for _, in := range malformed {
			var ev Event
			if err := Decode([]byte(in), &ev); err == nil {
				t.Fatalf("round %d: Decode(%q) accepted malformed bytes: %+v", round, in, ev)
			}
			var snap Snapshot
			if err := Decode([]byte(in), &snap); err == nil {
				t.Fatalf("round %d: Decode(%q) into a snapshot accepted malformed bytes", round, in)
			}
		}
	}
}

// Valid JSON of the wrong shape is an error too, and a good record decodes as
// encoding/json would decode it (the payload kept byte for byte).
func TestDecode_WrongTypesRefused_GoodRecordDecodedExactly(t *testing.T) {
	for _, in := range []string{`{"type":1}`, `{"v":"one"}`, `{"at":"yesterday"}`, `[1,2]`, `"x"`} {
		var ev Event
		if err := Decode([]byte(in), &ev); err == nil {
			t.Fatalf("Decode(%s) accepted a wrong type: %+v", in, ev)
		}
	}
	in := `{"type":"provision.started","v":1,"at":"2026-12-01T21:00:00.123456789Z","data":{"a":[1,"é\u00e9",{"b":null}]}}`
	var ev Event
	if err := Decode([]byte(in), &ev); err != nil {
		t.Fatal(err)
	}
	at, _ := time.Parse(time.RFC3339Nano, "2026-12-01T21:00:00.123456789Z")
	if ev.Type != "provision.started" || ev.V != 1 || !ev.At.Equal(at) || string(ev.Data) != `{"a":[1,"é\u00e9",{"b":null}]}` {
		t.Fatalf("decoded %+v (data %s)", ev, ev.Data)
	}
	if err := Decode([]byte(strings.Replace(in, `"v":1`, `"v":1,"unknown":true`, 1)), &ev); err != nil {
		t.Fatalf("an unknown field is ignored, as encoding/json ignores it: %v", err)
	}
}
