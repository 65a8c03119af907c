package manifest

import (
	"encoding/json"
	"strconv"
	"time"
)

// Duration is a manifest duration. On the wire it is a Go duration string ("10s",
// "1m30s") or an integer number of nanoseconds; "d"/"w" units, fractions of a
// nanosecond and negative values are invalid. It marshals as a Go duration string.
type Duration time.Duration

// maxDurationText bounds the duration string accepted (and thus echoed).
const maxDurationText = 64

// D returns d as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// MarshalJSON writes d as a Go duration string, which parseDuration accepts back.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

// UnmarshalJSON accepts exactly what a manifest accepts; errors are refusals.
func (d *Duration) UnmarshalJSON(b []byte) error {
	n, err := parseTree(b)
	if err != nil {
		return err
	}
	v, reason := parseDuration(n)
	if reason != "" {
		return invalid("duration %s", reason)
	}
	*d = Duration(v)
	return nil
}

// parseDuration reads a string or integer node as a non-negative duration, or
// returns a tenant-safe reason it is not one.
func parseDuration(n *node) (time.Duration, string) {
	switch n.kind {
	case kindString:
		if len(n.str) > maxDurationText {
			return 0, "is too long"
		}
		v, err := time.ParseDuration(n.str)
		if err != nil {
			return 0, "must be a Go duration string such as \"10s\" or \"1m30s\" (units ns, us, ms, s, m, h) or integer nanoseconds"
		}
		if v < 0 {
			return 0, "must not be negative"
		}
		return v, ""
	case kindNumber:
		v, err := strconv.ParseInt(n.str, 10, 64)
		if err != nil {
			return 0, "must be a whole number of nanoseconds or a duration string"
		}
		if v < 0 {
			return 0, "must not be negative"
		}
		return time.Duration(v), ""
	default:
		return 0, "must be a duration string or integer nanoseconds, not " + n.kind.String()
	}
}
