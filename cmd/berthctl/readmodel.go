package main

// The debug JSON API's read models are messages/debug.go's (LeaseRow,
// LeaseHistory, OutboxSummary, Transition); berthctl decodes them only for its
// tables. -o json prints the daemon's own bytes, so fields the read model
// adds later appear there even before berthctl knows them.

import (
	"encoding/json"

	"github.com/berth-dev/berth/messages"
)

// leasesPage is GET /debug/leases.
type leasesPage struct {
	Leases []messages.LeaseRow `json:"leases"`
}

// leaseHistory is GET /debug/leases/{lease}, with the releases read as
// releaseRow, and the lease's ingress (messages/domaingate_read.go).
type leaseHistory struct {
	messages.LeaseHistory
	Releases     []releaseRow           `json:"releases"`
	Ingress      *messages.LeaseIngress `json:"ingress"`
	IngressError string                 `json:"ingress_error"`
}

// releaseRow is a release (as GET /releases/{lease}) plus the identity of the
// maintenance or operation that made it. The read model does not carry those
// yet (asked for, additively: maintenance_id, operation_id); until it does,
// the OPERATION column reads "-".
type releaseRow struct {
	messages.Release
	MaintenanceID string `json:"maintenance_id"`
	OperationID   string `json:"operation_id"`
}

// transitionsPage is GET /debug/transitions, each transition kept as sent so
// -o json prints it exactly. Next is the seq to ask after next time; Missed
// counts transitions after since the ring no longer holds.
type transitionsPage struct {
	Transitions []json.RawMessage `json:"transitions"`
	Next        uint64            `json:"next"`
	Missed      uint64            `json:"missed"`
}
