package main

import (
	"github.com/berth-dev/berth/actors/lease"
	"github.com/berth-dev/berth/http/debug"
	"github.com/berth-dev/berth/messages"
	"github.com/berth-dev/berth/persistence"
)

// debugReads are the debug API's reads (debug.Reads) of the state and
// diagnostics stores: the lease actor's readers of its journal and captures, and
// the outbox rows.
type debugReads struct {
	store *persistence.Store
	diag  *persistence.Diagnostics
}

func (r debugReads) Journal(id string) (debug.Journal, error) {
	h, err := lease.LoadHistory(r.store, id)
	return debug.Journal{Events: h.Events, CompactedBefore: h.CompactedBefore, Stored: h.State != nil, Row: h.Row(id)}, err
}

func (r debugReads) Diagnostics(id string) ([]messages.DebugDiagnostic, error) {
	return lease.DiagnosticSummaries(r.diag, id)
}

func (r debugReads) Outbox(id string) ([]debug.QueuedCallback, error) {
	read := r.store.OutboxAll
	if id != "" {
		read = func() ([]persistence.OutboxEntry, error) { return r.store.OutboxOf(id) }
	}
	rows, err := read()
	if err != nil {
		return nil, err
	}
	out := make([]debug.QueuedCallback, len(rows))
	for i, e := range rows {
		out[i] = debug.QueuedCallback{Lease: e.Key.Lease, DeliveryID: e.Row.DeliveryID, Kind: e.Row.Kind,
			URL: e.Row.URL, Body: e.Row.Body, CreatedAt: e.Row.CreatedAt}
	}
	return out, nil
}
