package debug

import (
	"encoding/json"
	"time"

	"github.com/berth-dev/berth/messages"
)

// Reads are the debug API's reads of the state and diagnostics stores (read-only
// transactions). berthd's main fills them, so the debug API imports neither the
// store nor the actors that own its records.
type Reads interface {
	// History is a lease's journal summarised (Events, never nil;
	// CompactedBeforeSeq), its stored diagnostics, and the row its replayed state
	// gives (Lease); stored says whether its stream or any capture exists.
	History(lease string) (h messages.LeaseHistory, stored bool, err error)
	// Outbox is the queued callback rows of lease ("": of every lease), oldest first.
	Outbox(lease string) ([]QueuedCallback, error)
}

// QueuedCallback is one outbox row waiting for delivery.
type QueuedCallback struct {
	Lease, DeliveryID, Kind, URL string
	Body                         json.RawMessage
	CreatedAt                    time.Time
}
