package main

import (
	"github.com/berth-dev/berth/actors/lease"
	"github.com/berth-dev/berth/http/debug"
	"github.com/berth-dev/berth/messages"
	"github.com/berth-dev/berth/persistence"
)

// debugReads are the debug API's reads (debug.Reads) of the state and
// diagnostics stores, through the lease's readers of its journal and captures.
type debugReads struct {
	store *persistence.Store
	diag  *persistence.Diagnostics
}

func (r debugReads) History(id string) (messages.LeaseHistory, bool, error) {
	h, err := lease.LoadHistory(r.store, id)
	if err != nil {
		return messages.LeaseHistory{}, false, err
	}
	diags, err := lease.DiagnosticSummaries(r.diag, id)
	out := messages.LeaseHistory{Lease: h.Row(id), Events: h.Events, CompactedBeforeSeq: h.CompactedBefore, Diagnostics: diags}
	return out, h.State != nil || len(diags) > 0, err
}

func (r debugReads) Outbox(id string) ([]debug.QueuedCallback, error) {
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
