package callback

import (
	"net/url"
	"strings"

	"github.com/google/uuid"
)

// LifecycleURL is the lifecycle callback URL derived from a callback URL: its
// operation_id query parameter becomes lifecycle_id; a URL without operation_id
// is used as is (CONTRACT.md, Callbacks). It edits the raw query pair by pair, so
// every other pair survives byte for byte (url.Values would drop pairs it cannot
// parse and reorder the rest).
func LifecycleURL(callback string) string {
	u, err := url.Parse(callback)
	if err != nil {
		return callback
	}
	pairs := strings.Split(u.RawQuery, "&")
	found := false
	for i, p := range pairs {
		key, val, _ := strings.Cut(p, "=")
		if k, err := url.QueryUnescape(key); err == nil && k == "operation_id" {
			pairs[i] = "lifecycle_id=" + val
			found = true
		}
	}
	if !found {
		return callback
	}
	u.RawQuery = strings.Join(pairs, "&")
	return u.String()
}

// OperationID is the operation's identity: the callback URL's operation_id when
// present, else a fresh UUID.
func OperationID(callback string) string {
	if u, err := url.Parse(callback); err == nil {
		if op := u.Query().Get("operation_id"); op != "" {
			return op
		}
	}
	return uuid.NewString()
}
