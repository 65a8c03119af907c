package main

// The read model of the debug JSON API (GET /debug/leases, /debug/leases/{lease},
// /debug/outbox, /debug/transitions) as berthctl reads it. The types hold only
// what the tables show: -o json prints the daemon's own bytes, so fields the
// read model adds later still appear there.

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/berth-dev/berth/messages"
)

// flexString is a JSON string that also accepts a number: host_port is a
// string on the wire (CONTRACT.md), and a read model that sends it as a number
// must not break the table.
type flexString string

func (s *flexString) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var v string
		if err := json.Unmarshal(b, &v); err != nil {
			return err
		}
		*s = flexString(v)
		return nil
	}
	var n json.Number
	if err := json.Unmarshal(b, &n); err != nil {
		return fmt.Errorf("want a string or a number, got %s", b)
	}
	*s = flexString(n.String())
	return nil
}

type portBinding struct {
	HostIP   string     `json:"host_ip"`
	HostPort flexString `json:"host_port"`
}

// leaseRow is one lease of GET /debug/leases (and the "lease" of
// GET /debug/leases/{lease}).
type leaseRow struct {
	LeaseUUID      string                   `json:"lease_uuid"`
	Tenant         string                   `json:"tenant"`
	ProviderUUID   string                   `json:"provider_uuid"`
	Status         string                   `json:"status"`
	CreatedAt      time.Time                `json:"created_at"`
	AgeSeconds     float64                  `json:"age_seconds"`
	FailCount      int                      `json:"fail_count"`
	Reason         string                   `json:"reason"`
	Message        string                   `json:"message"`
	TerminalBudget *messages.TerminalBudget `json:"terminal_budget"`
	Items          []messages.LeaseItem     `json:"items"`
	Services       []serviceRow             `json:"services"`
	RetainedUntil  *time.Time               `json:"retained_until"`
}

type serviceRow struct {
	Name      string        `json:"name"`
	Instances []instanceRow `json:"instances"`
}

type instanceRow struct {
	Index       int                    `json:"index"`
	ContainerID string                 `json:"container_id"`
	State       string                 `json:"state"`
	Image       string                 `json:"image"`
	Ports       map[string]portBinding `json:"ports"`
}

type leasesPage struct {
	Leases []leaseRow `json:"leases"`
}

// leaseDetail is GET /debug/leases/{lease}.
type leaseDetail struct {
	Lease              leaseRow        `json:"lease"`
	Events             []journalEvent  `json:"events"`
	CompactedBeforeSeq uint64          `json:"compacted_before_seq"`
	Callbacks          []callbackRow   `json:"callbacks"`
	Releases           []releaseRow    `json:"releases"`
	Diagnostics        []diagnosticRow `json:"diagnostics"`
}

type journalEvent struct {
	Seq     uint64    `json:"seq"`
	Type    string    `json:"type"`
	At      time.Time `json:"at"`
	Summary string    `json:"summary"`
}

type callbackRow struct {
	DeliveryID    string     `json:"delivery_id"`
	Kind          string     `json:"kind"`
	Status        string     `json:"status"`
	URLPath       string     `json:"url_path"`
	CreatedAt     time.Time  `json:"created_at"`
	State         string     `json:"state"` // queued | delivered
	Attempts      int        `json:"attempts"`
	LastAttemptAt *time.Time `json:"last_attempt_at"`
	LastError     string     `json:"last_error"`
	DeliveredAt   *time.Time `json:"delivered_at"`
}

// releaseRow is an entry of GET /releases/{lease}, plus the identity of the
// operation or maintenance that made it when the read model has it.
type releaseRow struct {
	Version       int       `json:"version"`
	Status        string    `json:"status"`
	CreatedAt     time.Time `json:"created_at"`
	Reason        string    `json:"reason"`
	MaintenanceID string    `json:"maintenance_id"`
	OperationID   string    `json:"operation_id"`
}

type diagnosticRow struct {
	Kind    string    `json:"kind"`
	Service string    `json:"service"`
	Index   int       `json:"index"`
	At      time.Time `json:"at"`
	Bytes   int64     `json:"bytes"`
}

// outboxPage is GET /debug/outbox.
type outboxPage struct {
	TotalQueued int           `json:"total_queued"`
	Leases      []outboxLease `json:"leases"`
}

type outboxLease struct {
	LeaseUUID        string         `json:"lease_uuid"`
	Queued           int            `json:"queued"`
	OldestAt         time.Time      `json:"oldest_at"`
	OldestAgeSeconds float64        `json:"oldest_age_seconds"`
	Attempts         int            `json:"attempts"`
	LastError        string         `json:"last_error"`
	Kinds            map[string]int `json:"kinds"`
}

// transition is one lease status change: an entry of GET /debug/transitions
// and the data of an SSE "transition" event.
type transition struct {
	Seq       uint64    `json:"seq"`
	At        time.Time `json:"at"`
	LeaseUUID string    `json:"lease_uuid"`
	From      string    `json:"from"`
	To        string    `json:"to"`
	Reason    string    `json:"reason"`
}

// transitionsPage is GET /debug/transitions. Next is the seq to ask after
// next time; Missed counts transitions after since the ring no longer holds.
type transitionsPage struct {
	Transitions []json.RawMessage `json:"transitions"`
	Next        uint64            `json:"next"`
	Missed      uint64            `json:"missed"`
}
