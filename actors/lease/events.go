package lease

// Event payloads: one type per event of the lease stream, shared by Apply (which
// folds them), Decide (which chooses them) and the debug API (which summarises them).
// Their JSON is the journal's: field names never change.

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/berth-dev/berth/messages"
	"github.com/berth-dev/berth/persistence"
)

// Event types of the lease stream. Each carries version 1.
const (
	EvProvisionStarted    = "provision.started"
	EvReleasePinned       = "release.pinned"
	EvProvisionSucceeded  = "provision.succeeded"
	EvProvisionFailed     = "provision.failed"
	EvRuntimeFailing      = "runtime.failing"
	EvRuntimeFailed       = "runtime.failed"
	EvCohortDiverged      = "cohort.diverged"
	EvMaintenanceStarted  = "maintenance.requested"
	EvMaintenanceDone     = "maintenance.completed"
	EvMaintenanceRestored = "maintenance.recovered"
	EvMaintenanceFailed   = "maintenance.failed"
	EvReleasesPruned      = "releases.pruned"
	EvCloseRequested      = "close.requested"
	EvClosed              = "closed"
)

const eventVersion = 1

// Stamp is what an event about a cohort says first: its generation, and when.
type Stamp struct {
	Generation uint64    `json:"generation"`
	At         time.Time `json:"at"`
}

// Cause is why a provision, a runtime or a maintenance failed: a curated reason
// and a message.
type Cause struct {
	Reason  string `json:"reason"`
	Message string `json:"message"`
}

// Event payloads.
type (
	ProvisionStarted struct {
		Admission   uint64    `json:"admission"`
		Generation  uint64    `json:"generation"`
		OperationID string    `json:"operation_id"`
		At          time.Time `json:"at"`
		Deadline    time.Time `json:"deadline"`
		// Release is the new release of a new admission; nil on a retry of the same
		// admission under a new generation (its release is already deploying).
		Release *Release `json:"release,omitempty"`
	}
	ReleasePinned struct {
		Version int            `json:"version"`
		Images  []ServiceImage `json:"images"`
	}
	ProvisionSucceeded struct {
		Stamp
		Containers []Instance `json:"containers"`
	}
	ProvisionFailed struct {
		Stamp
		Cause
	}
	RuntimeFailing struct {
		Stamp
		ContainerID string `json:"container_id"`
		Service     string `json:"service"`
		Index       int    `json:"index"`
		ExitCode    int    `json:"exit_code"`
		OOMKilled   bool   `json:"oom_killed"`
		Counted     bool   `json:"counted"` // the live stream saw the whole run, no kill
	}
	RuntimeFailed struct {
		Stamp
		Cause
	}
	CohortDiverged struct {
		Stamp
		Message string `json:"message"`
	}
	MaintenanceStarted struct {
		Maintenance
		Release Release `json:"release"` // the target, status deploying
	}
	MaintenanceDone struct {
		ID string `json:"id"`
		Stamp
		Containers []Instance `json:"containers"`
	}
	// MaintenanceRestored: the target did not become ready, and the source runs —
	// untouched (Compensated false) or recreated from its release (true).
	MaintenanceRestored struct {
		ID string `json:"id"`
		Stamp
		Containers  []Instance `json:"containers"`
		Compensated bool       `json:"compensated"`
		Cause
	}
	MaintenanceFailed struct {
		ID string `json:"id"`
		Stamp
		Cause
	}
	ReleasesPruned struct {
		Versions []int `json:"versions"`
	}
	CloseRequested struct {
		Admission uint64    `json:"admission"`
		At        time.Time `json:"at"`
		// Retain: keep the durable volumes as a retention record (the registry's
		// decision: retain_on_close and the retained-disk cap).
		Retain bool `json:"retain,omitempty"`
		// Requarantine: the close pre-empted a restore that never committed; the
		// adopted volumes go back to the retention record they came from.
		Requarantine bool `json:"requarantine,omitempty"`
	}
	ClosedEv struct {
		Admission uint64    `json:"admission"`
		At        time.Time `json:"at"`
		// Retention is the record of the retained volumes (nil: destroyed).
		Retention *messages.RetentionRecord `json:"retention,omitempty"`
		// Requarantined is the retention source a pre-commit restore handed back.
		Requarantined string `json:"requarantined,omitempty"`
	}
)

// event encodes a payload as a journal event.
func event(typ string, at time.Time, payload any) persistence.Event {
	data, err := json.Marshal(payload)
	if err != nil {
		// Payloads are plain structs of this package; marshalling cannot fail.
		data = []byte("null")
	}
	return persistence.Event{Type: typ, V: eventVersion, At: at, Data: data}
}

func decode(ev persistence.Event, into any) error {
	if err := persistence.DecodeValid(ev.Data, into); err != nil {
		return fmt.Errorf("event %s: %w", ev.Type, err)
	}
	return nil
}
