package debug_test

import (
	"testing"

	"github.com/berth-dev/berth/actors/lease"
	"github.com/berth-dev/berth/http/debug"
	"github.com/berth-dev/berth/messages"
	"github.com/berth-dev/berth/persistence"
)

// storeReads fills debug.Reads as berthd's main does (cmd/berthd/debugreads.go,
// which a test here cannot import).
type storeReads struct {
	store *persistence.Store
	diag  *persistence.Diagnostics
}

func (r storeReads) History(id string) (messages.LeaseHistory, bool, error) {
	h, err := lease.LoadHistory(r.store, id)
	if err != nil {
		return messages.LeaseHistory{}, false, err
	}
	diags, err := lease.DiagnosticSummaries(r.diag, id)
	out := messages.LeaseHistory{Lease: h.Row(id), Events: h.Events, CompactedBeforeSeq: h.CompactedBefore, Diagnostics: diags}
	return out, h.State != nil || len(diags) > 0, err
}

func (r storeReads) Outbox(id string) ([]debug.QueuedCallback, error) {
	read := r.store.OutboxAll
	if id != "" {
		read = func() ([]persistence.OutboxEntry, error) { return r.store.OutboxOf(id) }
	}
	rows, err := read()
	out := make([]debug.QueuedCallback, len(rows))
	for i, e := range rows {
		out[i] = debug.QueuedCallback{Lease: e.Key.Lease, DeliveryID: e.Row.DeliveryID, Kind: e.Row.Kind,
			URL: e.Row.URL, Body: e.Row.Body, CreatedAt: e.Row.CreatedAt}
	}
	return out, err
}

// The ?status= filter names the lease's own statuses through messages, which
// must spell them as the lease does.
func TestLeaseStatuses_SpelledAsTheLeaseSpellsThem(t *testing.T) {
	if messages.LeaseStatusReserved != string(lease.Reserved) || messages.LeaseStatusClosed != string(lease.Closed) {
		t.Fatalf("messages spells reserved/closed %q/%q, the lease %q/%q",
			messages.LeaseStatusReserved, messages.LeaseStatusClosed, lease.Reserved, lease.Closed)
	}
}
