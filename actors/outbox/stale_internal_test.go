package outbox

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/actors/lease"
	"github.com/berth-dev/berth/persistence"
)

// TestStale_ExpiresAndCoalescesOnlyLifecycleObservations is the rule of
// docker-backend.md's callback_max_age, one lease's queue per case. A row is
// written kind:status:age (o operation, m maintenance, l lifecycle; s success,
// f failed, d deprovisioned; age in hours), oldest first; want is what leaves,
// as "index reason".
func TestStale_ExpiresAndCoalescesOnlyLifecycleObservations(t *testing.T) {
	const maxAge = 24 * time.Hour
	for _, tc := range []struct {
		name  string
		queue string
		want  string
	}{
		{"nothing stale", "l:f:1 m:s:1", ""},
		{"an old death expires", "l:f:25 m:s:1", "0 expired"},
		{"exactly max age expires", "l:f:24", "0 expired"},
		{"exact completions never expire", "o:f:100 m:s:100 m:f:100", ""},
		{"an old deprovision expires too (an observation)", "l:d:30", "0 expired"},
		{"a newer death supersedes an older one", "l:f:2 m:s:2 l:f:1", "0 coalesced"},
		{"a deprovision supersedes an older death", "l:f:2 l:d:1", "0 coalesced"},
		{"a deprovision is never superseded", "l:d:2 l:f:1", ""},
		{"the newest of many deaths stays", "l:f:5 l:f:4 o:s:3 l:f:2", "0 coalesced, 1 coalesced"},
		{"completions between are kept in order", "m:s:5 l:f:4 m:f:3 l:f:2", "1 coalesced"},
		{"an expiring newer row supersedes nothing", "l:f:1 l:f:30", "1 expired"},
		{"both rules at once", "l:f:30 l:f:5 l:f:1", "0 expired, 1 coalesced"},
		{"a row from a clock stepped back is young", "l:f:-5", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
			var rows []persistence.OutboxEntry
			for i, spec := range strings.Fields(tc.queue) {
				rows = append(rows, entry(t, now, i, spec))
			}
			var got []string
			for _, d := range stale(rows, now, maxAge) {
				got = append(got, fmt.Sprintf("%d %s", d.entry.Key.Seq, d.reason))
			}
			if s := strings.Join(got, ", "); s != tc.want {
				t.Fatalf("stale(%s) = %q, want %q", tc.queue, s, tc.want)
			}
		})
	}
}

// entry is one row of a case; a negative age is a row created in the future.
func entry(t *testing.T, now time.Time, seq int, spec string) persistence.OutboxEntry {
	t.Helper()
	var hours int
	parts := strings.Split(spec, ":")
	if len(parts) != 3 {
		t.Fatalf("bad row spec %q", spec)
	}
	if _, err := fmt.Sscan(parts[2], &hours); err != nil {
		t.Fatalf("bad row spec %q: %v", spec, err)
	}
	kind := map[string]string{"o": persistence.KindOperation, "m": persistence.KindMaintenance, "l": persistence.KindLifecycle}[parts[0]]
	status := map[string]string{"s": "success", "f": "failed", "d": "deprovisioned"}[parts[1]]
	body, _ := json.Marshal(map[string]string{"lease_uuid": "l", "status": status})
	created := now.Add(-time.Duration(hours) * time.Hour)
	return persistence.OutboxEntry{Key: persistence.OutboxKey{Lease: "l", Seq: uint64(seq)},
		Row: persistence.OutboxRow{Lease: "l", DeliveryID: spec, Kind: kind, Body: body, CreatedAt: created}}
}

// The rule reads the kinds the lease writes.
func TestStale_KindsAreTheLeaseActorsRowKinds(t *testing.T) {
	if lease.RowOperation != persistence.KindOperation || lease.RowLifecycle != persistence.KindLifecycle ||
		lease.RowMaintenance != persistence.KindMaintenance {
		t.Fatalf("lease row kinds %q %q %q differ from the store's", lease.RowOperation, lease.RowLifecycle, lease.RowMaintenance)
	}
}
