package debug

import (
	"encoding/json"
	"time"

	"github.com/berth-dev/berth/messages"
)

// Reads are the debug API's reads of the state and diagnostics stores, in
// read-only transactions. berthd's main fills them, so the debug API imports
// neither the store nor the actors that own its records.
type Reads interface {
	// Journal is a lease's journal, summarised.
	Journal(lease string) (Journal, error)
	// Diagnostics summarises a lease's newest stored failure captures.
	Diagnostics(lease string) ([]messages.DebugDiagnostic, error)
	// Outbox is the queued callback rows of lease, or of every lease when lease
	// is "", in creation order.
	Outbox(lease string) ([]QueuedCallback, error)
}

// Journal is a lease's journal: every event still journaled, summarised (never
// nil), and what they leave.
type Journal struct {
	Events []messages.DebugEvent
	// CompactedBefore is the first seq still journaled when a snapshot compacted
	// the ones before it (0: nothing compacted).
	CompactedBefore uint64
	Stored          bool              // the lease's stream exists
	Row             messages.LeaseRow // from the replayed state, for a lease no actor runs
}

// QueuedCallback is one outbox row waiting for delivery.
type QueuedCallback struct {
	Lease      string
	DeliveryID string
	Kind       string // operation | lifecycle | maintenance
	URL        string
	Body       json.RawMessage
	CreatedAt  time.Time
}
