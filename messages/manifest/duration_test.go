package manifest

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/messages"
)

func TestDuration_JSON(t *testing.T) {
	for in, want := range map[string]time.Duration{
		`"10s"`:      10 * time.Second,
		`"1m30s"`:    90 * time.Second,
		`"1.5h"`:     90 * time.Minute,
		`"250ms"`:    250 * time.Millisecond,
		`"0"`:        0,
		`1000000000`: time.Second,
		`0`:          0,
	} {
		var d Duration
		if err := json.Unmarshal([]byte(in), &d); err != nil {
			t.Errorf("%s: %v", in, err)
			continue
		}
		if d.D() != want {
			t.Errorf("%s = %v, want %v", in, d.D(), want)
		}
		out, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		var back Duration
		if err := json.Unmarshal(out, &back); err != nil || back != d {
			t.Errorf("%s marshalled as %s, read back %v (%v)", in, out, back.D(), err)
		}
	}
	for _, in := range []string{`"1d"`, `"2w"`, `"-1s"`, `-1`, `1.5`, `1e9`, `"10"`, `true`, `null`, `"` + strings.Repeat("0", 63) + `1s"`} {
		var d Duration
		err := json.Unmarshal([]byte(in), &d)
		if err == nil {
			t.Errorf("%s accepted as %v", in, d.D())
		}
	}
	var d Duration
	assertRefusal(t, d.UnmarshalJSON([]byte(`"3d"`)), messages.ErrInvalidManifest, "duration")
}
