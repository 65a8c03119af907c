package messages

import (
	"encoding/json"
	"time"
)

// The operator's debug API (http/debug, on the debug listener): the messages its
// handlers ask actors with, and the read models they serve. The JSON field names
// are a contract with berthctl and the console: add fields, never rename one.

// --- leases ---------------------------------------------------------------------

// DebugItem is one SKU line of a lease row.
type DebugItem struct {
	SKU         string `json:"sku"`
	Quantity    int    `json:"quantity"`
	ServiceName string `json:"service_name"`
}

// DebugInstance is one container of a lease row, as the lease last journaled it
// (no Docker call is made for a debug read).
type DebugInstance struct {
	Index       int                    `json:"index"`
	ContainerID string                 `json:"container_id"`
	State       string                 `json:"state"` // running | exited (its death is being confirmed) | source (a maintenance's source cohort) | stopping
	Image       string                 `json:"image"`
	Ports       map[string]PortBinding `json:"ports"`              // "8080/tcp" → {host_ip, host_port}
	Degraded    string                 `json:"degraded,omitempty"` // why its launch's preparation was degraded (its death is never counted)
}

// DebugService is one service of a lease row with its instances.
type DebugService struct {
	Name      string          `json:"name"`
	Instances []DebugInstance `json:"instances"`
}

// LeaseRow is one lease in GET /debug/leases and the "lease" of GET
// /debug/leases/{lease}.
type LeaseRow struct {
	LeaseUUID      string         `json:"lease_uuid"`
	Tenant         string         `json:"tenant"`
	ProviderUUID   string         `json:"provider_uuid"`
	Status         string         `json:"status"` // the wire status, as GET /provisions says it
	CreatedAt      time.Time      `json:"created_at"`
	AgeSeconds     float64        `json:"age_seconds"`
	FailCount      int            `json:"fail_count"`
	Reason         string         `json:"reason,omitempty"`
	Message        string         `json:"message,omitempty"`
	TerminalBudget TerminalBudget `json:"terminal_budget"`
	Items          []DebugItem    `json:"items"`
	Services       []DebugService `json:"services"`
	RetainedUntil  *time.Time     `json:"retained_until,omitempty"`
	LeaseStatus    string         `json:"lease_status"`              // the lease's own status: reserved, provisioning, …, closed, retained
	Actor          string         `json:"actor,omitempty"`           // path of its lease actor, when one runs
	InstancesError string         `json:"instances_error,omitempty"` // why services carry no instances (the lease actor did not answer)
}

// The lease statuses (LeaseRow.LeaseStatus, lease.Status) that are no wire status.
const (
	LeaseStatusReserved = "reserved"
	LeaseStatusClosed   = "closed"
)

// DebugLeases asks the registry for lease rows: one lease (Lease set), else every
// live and retained lease, filtered by wire or lease status and tenant when set.
// The registry fills what its read model knows; services carry names only, their
// instances are the lease actors' to tell (DebugLease).
type DebugLeases struct {
	Lease  string
	Status string
	Tenant string
	Reply  chan<- DebugLeasesReply
}

// DebugLeasesReply answers DebugLeases, in no particular order.
type DebugLeasesReply struct {
	Rows []LeaseRow
}

// DebugLease asks a lease actor for its services and instances.
type DebugLease struct {
	Reply chan<- DebugLeaseReply
}

// DebugLeaseReply answers DebugLease.
type DebugLeaseReply struct {
	LeaseStatus string
	Services    []DebugService
}

// --- a lease's history --------------------------------------------------------------

// DebugEvent is one journaled event of a lease's stream.
type DebugEvent struct {
	Seq     uint64          `json:"seq"`
	Type    string          `json:"type"`
	At      time.Time       `json:"at"`
	Summary string          `json:"summary"` // one human line
	Data    json.RawMessage `json:"data"`
}

// Callback delivery states of a lease's callbacks.
const (
	CallbackQueued    = "queued"
	CallbackDelivered = "delivered"
)

// DebugCallback is one callback of a lease: a row still in the outbox (queued), or
// a recent one the outbox actor remembers (delivered, or removed undelivered).
type DebugCallback struct {
	DeliveryID    string     `json:"delivery_id"`
	Kind          string     `json:"kind"`     // operation | lifecycle | maintenance
	Status        string     `json:"status"`   // the callback's status: success | failed | deprovisioned
	URLPath       string     `json:"url_path"` // the path of the URL it goes to (no host, no query)
	CreatedAt     time.Time  `json:"created_at"`
	State         string     `json:"state"` // queued | delivered | expired | coalesced (removed undelivered)
	Attempts      int        `json:"attempts"`
	LastAttemptAt *time.Time `json:"last_attempt_at,omitempty"`
	LastError     string     `json:"last_error,omitempty"`
	DeliveredAt   *time.Time `json:"delivered_at,omitempty"` // when it left the outbox
}

// DebugDiagnostic summarises one container of a stored failure capture; the
// captured log bytes are never served here (GET /logs has them).
type DebugDiagnostic struct {
	Kind    string    `json:"kind"` // provision | runtime | maintenance
	Service string    `json:"service"`
	Index   int       `json:"index"`
	At      time.Time `json:"at"`
	Bytes   int       `json:"bytes"` // size of the captured log
	Reason  string    `json:"reason,omitempty"`
	State   string    `json:"state,omitempty"`
}

// LeaseHistory is GET /debug/leases/{lease}.
type LeaseHistory struct {
	Lease  LeaseRow     `json:"lease"`
	Events []DebugEvent `json:"events"`
	// CompactedBeforeSeq is set when a snapshot compacted the stream: events with a
	// lower seq are no longer journaled, only their effect on the state is.
	CompactedBeforeSeq uint64            `json:"compacted_before_seq,omitempty"`
	Callbacks          []DebugCallback   `json:"callbacks"`
	Releases           []Release         `json:"releases"`
	Diagnostics        []DebugDiagnostic `json:"diagnostics"`
	// ReleasesError says why releases could not be read (the lease actor is busy
	// or being recovered); releases is then empty.
	ReleasesError string `json:"releases_error,omitempty"`
}

// --- the outbox ------------------------------------------------------------------

// DeliveryAttempts is what the outbox actor knows of one row's delivery so far.
type DeliveryAttempts struct {
	Lease         string
	Attempts      int
	LastAttemptAt time.Time
	LastError     string
}

// DeliveredCallback is one row the outbox delivered (and deleted), remembered in
// a bounded ring.
type DeliveredCallback struct {
	Lease         string
	DeliveryID    string
	Kind          string
	Status        string
	URLPath       string
	CreatedAt     time.Time
	Attempts      int
	LastAttemptAt time.Time
	LastError     string // the error of the attempt before the one that succeeded
	DeliveredAt   time.Time
	// Dropped, when set, says the row was removed undelivered (DeliveredAt is
	// when) and why: "expired" (callback_max_age) or "coalesced" (superseded).
	Dropped string
}

// DebugOutbox asks the outbox actor for its delivery bookkeeping, of one lease
// when Lease is set.
type DebugOutbox struct {
	Lease string
	Reply chan<- DebugOutboxReply
}

// DebugOutboxReply answers DebugOutbox: attempts by delivery ID of rows still
// queued, and the remembered deliveries, oldest first.
type DebugOutboxReply struct {
	Attempts  map[string]DeliveryAttempts
	Delivered []DeliveredCallback
	// Lifecycle rows removed undelivered since the outbox actor started.
	Expired, Coalesced int
}

// OutboxLease is one lease's queue in GET /debug/outbox.
type OutboxLease struct {
	LeaseUUID        string         `json:"lease_uuid"`
	Queued           int            `json:"queued"`
	OldestAt         time.Time      `json:"oldest_at"`
	OldestAgeSeconds float64        `json:"oldest_age_seconds"`
	Attempts         int            `json:"attempts"` // of the head row (only a lease's head is ever attempted)
	LastError        string         `json:"last_error,omitempty"`
	LastAttemptAt    *time.Time     `json:"last_attempt_at,omitempty"`
	Kinds            map[string]int `json:"kinds"`
}

// OutboxDropped is a lifecycle callback removed undelivered, in GET /debug/outbox.
type OutboxDropped struct {
	LeaseUUID  string    `json:"lease_uuid"`
	DeliveryID string    `json:"delivery_id"`
	Kind       string    `json:"kind"`
	Status     string    `json:"status"`
	Reason     string    `json:"reason"` // expired (callback_max_age) | coalesced (a newer lifecycle row)
	CreatedAt  time.Time `json:"created_at"`
	DroppedAt  time.Time `json:"dropped_at"`
	Attempts   int       `json:"attempts"`
	LastError  string    `json:"last_error,omitempty"`
}

// OutboxSummary is GET /debug/outbox.
type OutboxSummary struct {
	TotalQueued int           `json:"total_queued"`
	Leases      []OutboxLease `json:"leases"`
	// Expired and Coalesced count the lifecycle rows removed undelivered since the
	// outbox actor started; Dropped lists the recent ones (its ring), oldest first.
	Expired   int             `json:"expired"`
	Coalesced int             `json:"coalesced"`
	Dropped   []OutboxDropped `json:"dropped"`
}

// --- background passes ---------------------------------------------------------------

// GetPass asks a background actor (reconciler, reclaimer, reaper) for its last pass.
type GetPass struct {
	Reply chan<- PassReport
}

// PassReport is a background actor's record of its last finished pass.
type PassReport struct {
	Name     string        // reconciler | reclaimer | reaper
	Interval time.Duration // how often it passes
	Passes   int           // finished since the actor (re)started
	LastAt   time.Time     // when the last pass finished (zero: none yet)
	Duration time.Duration
	Err      string // "" = ok
	Detail   string // the pass's own summary ("3 leases, 4 containers, …")
	Running  bool   // a pass is running now
}

// Freshness statuses.
const (
	FreshnessFresh   = "fresh"
	FreshnessStale   = "stale"
	FreshnessUnknown = "unknown"
)

// Freshness is one background pass in GET /debug/freshness.
type Freshness struct {
	Name            string     `json:"name"`
	LastPassAt      *time.Time `json:"last_pass_at,omitempty"`
	DurationSeconds float64    `json:"duration_seconds"`
	Outcome         string     `json:"outcome"` // ok | error: … | none (no pass yet)
	AgeSeconds      float64    `json:"age_seconds"`
	Status          string     `json:"status"` // fresh | stale | unknown
	IntervalSeconds float64    `json:"interval_seconds"`
	Passes          int        `json:"passes"`
	Running         bool       `json:"running"`
	Detail          string     `json:"detail,omitempty"`
}

// --- transitions -----------------------------------------------------------------

// Transition is one lease status change the registry saw in a LeaseReport.
type Transition struct {
	Seq       uint64    `json:"seq"` // monotonic within the process
	At        time.Time `json:"at"`
	LeaseUUID string    `json:"lease_uuid"`
	From      string    `json:"from"` // "" for an admission
	To        string    `json:"to"`
	Reason    string    `json:"reason,omitempty"`
}

// TransitionsKept is how many recent lease transitions the registry keeps, so
// also the most one DebugTransitions can return.
const TransitionsKept = 1024

// DebugTransitions asks the registry for the transitions after seq Since, at most
// Limit of them, oldest first.
type DebugTransitions struct {
	Since uint64
	Limit int
	Reply chan<- TransitionsReply
}

// TransitionsReply answers DebugTransitions. Next is the seq to ask after next
// time; Missed counts transitions after Since that the ring no longer holds.
type TransitionsReply struct {
	Transitions []Transition `json:"transitions"`
	Next        uint64       `json:"next"`
	Missed      uint64       `json:"missed,omitempty"`
}
