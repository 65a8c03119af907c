package callback_test

import (
	"strings"
	"testing"

	"github.com/berth-dev/berth/messages/callback"
)

// CONTRACT.md: the lifecycle URL is the callback URL with operation_id replaced by
// lifecycle_id; every other query parameter must survive, including pairs that Go's
// url.ParseQuery cannot parse (a ';' or a bad escape), which the sender of the
// callback URL may well use.
func TestLifecycleURL_KeepsUnparseableQueryPairs(t *testing.T) {
	cb := "https://providerd.example/cb?operation_id=op-7&sig=a;b&raw=%zz"
	got := callback.LifecycleURL(cb)
	for _, keep := range []string{"sig=a;b", "raw=%zz", "lifecycle_id=op-7"} {
		if !strings.Contains(got, keep) {
			t.Errorf("LifecycleURL(%q) = %q: lost %q", cb, got, keep)
		}
	}
	if strings.Contains(got, "operation_id") {
		t.Errorf("LifecycleURL(%q) = %q still has operation_id", cb, got)
	}
}
