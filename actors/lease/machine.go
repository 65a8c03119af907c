package lease

// The lease state machine, top to bottom: the statuses, the events that move a lease
// between them, and apply — the only code that changes a lease's State. A lease's
// state is apply(snapshot, events…) over its journal stream "lease/<uuid>"; the actor
// (actor.go) validates a command, journals the event (with its callback row in the
// same transaction), applies it, and only then acts.
//
//	reserved ──provision.started──▶ provisioning ──provision.succeeded──▶ ready
//	    │                               │  └──────provision.failed──────▶ failed
//	    │                               │                                  ▲  │
//	    │                ready ──runtime.failing──▶ failing ──runtime.failed┘  │
//	    │                                                                     │
//	    └─ any live status ──close.requested──▶ deprovisioning ──closed──▶ closed
//	                                  failed ──provision.started (re-provision)──▶ provisioning
//	                                  closed ──provision.started (new admission)──▶ provisioning
//
// Every terminal decision (ready, failed, closed) is journaled together with exactly
// one callback row; nothing else sends callbacks.

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/berth-dev/berth/messages"
	"github.com/berth-dev/berth/persistence"
)

// Status is where a lease is in its lifecycle.
type Status string

const (
	Reserved       Status = "reserved" // admitted, provision not started yet
	Provisioning   Status = "provisioning"
	Ready          Status = "ready"
	Failing        Status = "failing" // a death confirmed; diagnostics being captured
	Failed         Status = "failed"
	Deprovisioning Status = "deprovisioning" // close intent journaled; teardown running
	Closed         Status = "closed"         // the closed receipt: containers of this lease may be removed
)

// Wire is the status providerd sees.
func (s Status) Wire() string {
	switch s {
	case Reserved, Provisioning:
		return messages.StatusProvisioning
	case Ready:
		return messages.StatusReady
	case Failing:
		return messages.StatusFailing
	case Failed:
		return messages.StatusFailed
	case Deprovisioning, Closed:
		return messages.StatusDeprovisioning
	}
	return messages.StatusUnknown
}

// Event types of the lease stream. Each carries version 1.
const (
	EvProvisionStarted   = "provision.started"
	EvProvisionSucceeded = "provision.succeeded"
	EvProvisionFailed    = "provision.failed"
	EvRuntimeFailing     = "runtime.failing"
	EvRuntimeFailed      = "runtime.failed"
	EvCloseRequested     = "close.requested"
	EvClosed             = "closed"
)

const eventVersion = 1

// Instance is one container of a ready cohort, as recorded at the Ready transition.
type Instance struct {
	Service     string                          `json:"service"`
	Index       int                             `json:"index"`
	ContainerID string                          `json:"container_id"`
	Image       string                          `json:"image"`
	Ports       map[string]messages.PortBinding `json:"ports,omitempty"`
}

// Budget is the seed's terminal failure budget: a counted failure exhausts it when
// it is the third or later in a row and at least 30 minutes after the streak's first;
// ten minutes of Ready reset the streak.
type Budget struct {
	Streak      int       `json:"streak"`
	StreakStart time.Time `json:"streak_start"`
	Exhausted   bool      `json:"exhausted"` // the verdict recorded with the last counted failure
}

// Budget rule constants (seed: Re-provisioning).
const (
	budgetStreak     = 3
	budgetSpan       = 30 * time.Minute
	budgetReadyReset = 10 * time.Minute
)

// Event payloads.
type (
	ProvisionStarted struct {
		Admission   uint64    `json:"admission"`
		Generation  uint64    `json:"generation"`
		OperationID string    `json:"operation_id"`
		At          time.Time `json:"at"`
		Deadline    time.Time `json:"deadline"`
	}
	ProvisionSucceeded struct {
		Generation uint64     `json:"generation"`
		At         time.Time  `json:"at"`
		Containers []Instance `json:"containers"`
	}
	ProvisionFailed struct {
		Generation uint64    `json:"generation"`
		At         time.Time `json:"at"`
		Reason     string    `json:"reason"`
		Message    string    `json:"message"`
	}
	RuntimeFailing struct {
		Generation  uint64    `json:"generation"`
		At          time.Time `json:"at"`
		ContainerID string    `json:"container_id"`
		Service     string    `json:"service"`
		Index       int       `json:"index"`
		ExitCode    int       `json:"exit_code"`
		OOMKilled   bool      `json:"oom_killed"`
		Counted     bool      `json:"counted"` // the live stream saw the whole run, no kill
	}
	RuntimeFailed struct {
		Generation uint64    `json:"generation"`
		At         time.Time `json:"at"`
		Reason     string    `json:"reason"`
		Message    string    `json:"message"`
	}
	CloseRequested struct {
		Admission uint64    `json:"admission"`
		At        time.Time `json:"at"`
	}
	ClosedEv struct {
		Admission uint64    `json:"admission"`
		At        time.Time `json:"at"`
	}
)

// State is everything a lease actor knows, rebuilt from its journal.
type State struct {
	Status          Status          `json:"status"`
	Admission       uint64          `json:"admission"`
	Generation      uint64          `json:"generation"` // provision attempts ever started
	OperationID     string          `json:"operation_id"`
	StartedAt       time.Time       `json:"started_at"`
	Deadline        time.Time       `json:"deadline"`
	FailCount       int             `json:"fail_count"`
	Reason          string          `json:"reason,omitempty"`
	Message         string          `json:"message,omitempty"`
	Containers      []Instance      `json:"containers,omitempty"`
	ReadyAt         time.Time       `json:"ready_at"`
	Budget          Budget          `json:"budget"`
	PendingFailure  *RuntimeFailing `json:"pending_failure,omitempty"`
	ClosedAdmission uint64          `json:"closed_admission"`
	ClosedAt        time.Time       `json:"closed_at"`
}

// NewState is a lease with nothing journaled yet.
func NewState() *State { return &State{Status: Reserved} }

// Apply folds one journaled event into the state. An event the state machine does
// not permit from the current status means the journal is not ours to trust: it is
// an error, and startup refuses rather than guess.
func (s *State) Apply(ev persistence.Event) error {
	if ev.V != eventVersion {
		return fmt.Errorf("event %s: version %d not supported (this berthd reads %d)", ev.Type, ev.V, eventVersion)
	}
	switch ev.Type {
	case EvProvisionStarted:
		var e ProvisionStarted
		if err := decode(ev, &e); err != nil {
			return err
		}
		switch s.Status {
		case Reserved, Failed:
		case Closed:
			if e.Admission <= s.ClosedAdmission {
				return s.refuse(ev)
			}
			*s = State{Status: Reserved, Generation: s.Generation, ClosedAdmission: s.ClosedAdmission} // a new lease under an old UUID
		default:
			return s.refuse(ev)
		}
		s.Status, s.Admission, s.Generation = Provisioning, e.Admission, e.Generation
		s.OperationID, s.StartedAt, s.Deadline = e.OperationID, e.At, e.Deadline
		s.Reason, s.Message, s.Containers, s.PendingFailure = "", "", nil, nil
		s.Budget.Exhausted = false
	case EvProvisionSucceeded:
		var e ProvisionSucceeded
		if err := decode(ev, &e); err != nil {
			return err
		}
		if s.Status != Provisioning || e.Generation != s.Generation {
			return s.refuse(ev)
		}
		s.Status, s.Containers, s.ReadyAt = Ready, e.Containers, e.At
	case EvProvisionFailed:
		var e ProvisionFailed
		if err := decode(ev, &e); err != nil {
			return err
		}
		if s.Status != Provisioning || e.Generation != s.Generation {
			return s.refuse(ev)
		}
		s.Status, s.Reason, s.Message, s.Containers = Failed, e.Reason, e.Message, nil
		s.FailCount++
	case EvRuntimeFailing:
		var e RuntimeFailing
		if err := decode(ev, &e); err != nil {
			return err
		}
		if s.Status != Ready || e.Generation != s.Generation {
			return s.refuse(ev)
		}
		if !s.ReadyAt.IsZero() && e.At.Sub(s.ReadyAt) >= budgetReadyReset {
			s.Budget = Budget{} // ten minutes of Ready reset the streak
		}
		if e.Counted {
			if s.Budget.Streak == 0 {
				s.Budget.StreakStart = e.At
			}
			s.Budget.Streak++
			s.Budget.Exhausted = s.Budget.Streak >= budgetStreak && e.At.Sub(s.Budget.StreakStart) >= budgetSpan
		} else {
			s.Budget.Exhausted = false
		}
		s.Status, s.PendingFailure = Failing, &e
	case EvRuntimeFailed:
		var e RuntimeFailed
		if err := decode(ev, &e); err != nil {
			return err
		}
		if s.Status != Failing || e.Generation != s.Generation {
			return s.refuse(ev)
		}
		s.Status, s.Reason, s.Message, s.Containers = Failed, e.Reason, e.Message, nil
		s.FailCount++
	case EvCloseRequested:
		var e CloseRequested
		if err := decode(ev, &e); err != nil {
			return err
		}
		switch s.Status {
		case Deprovisioning:
			return nil // a repeated intent changes nothing
		case Closed:
			if e.Admission <= s.ClosedAdmission {
				return s.refuse(ev)
			}
		}
		s.Status = Deprovisioning
		if e.Admission > s.Admission {
			s.Admission = e.Admission
		}
	case EvClosed:
		var e ClosedEv
		if err := decode(ev, &e); err != nil {
			return err
		}
		if s.Status != Deprovisioning {
			return s.refuse(ev)
		}
		s.Status, s.ClosedAdmission, s.ClosedAt = Closed, e.Admission, e.At
		s.Containers, s.PendingFailure = nil, nil
	default:
		return fmt.Errorf("event type %q unknown to this berthd", ev.Type)
	}
	return nil
}

// Verdict is the terminal budget as GET /provisions shows it.
func (s *State) Verdict() *messages.TerminalBudget {
	v := "retry"
	if s.Status == Failed && s.Budget.Exhausted {
		v = "exhausted"
	}
	return &messages.TerminalBudget{Verdict: v, ConsecutiveFailures: s.Budget.Streak}
}

func (s *State) refuse(ev persistence.Event) error {
	return fmt.Errorf("event %s not permitted from status %s", ev.Type, s.Status)
}

func decode(ev persistence.Event, into any) error {
	if err := json.Unmarshal(ev.Data, into); err != nil {
		return fmt.Errorf("event %s: %w", ev.Type, err)
	}
	return nil
}

// event encodes a payload as a journal event.
func event(typ string, at time.Time, payload any) persistence.Event {
	data, err := json.Marshal(payload)
	if err != nil {
		// Payloads are plain structs of this package; marshalling cannot fail.
		data = []byte("null")
	}
	return persistence.Event{Type: typ, V: eventVersion, At: at, Data: data}
}

// Load rebuilds a lease's state from its stream.
func Load(store *persistence.Store, lease string) (*State, uint64, error) {
	l, err := store.Load(Stream(lease))
	if err != nil {
		return nil, 0, fmt.Errorf("load lease %s: %w", lease, err)
	}
	st := NewState()
	if l.Snapshot != nil {
		if l.Snapshot.V != eventVersion {
			return nil, 0, fmt.Errorf("load lease %s: snapshot version %d not supported (this berthd reads %d)", lease, l.Snapshot.V, eventVersion)
		}
		if err := json.Unmarshal(l.Snapshot.Data, st); err != nil {
			return nil, 0, fmt.Errorf("load lease %s: snapshot: %w", lease, err)
		}
	}
	for _, r := range l.Events {
		if err := st.Apply(r.Event); err != nil {
			return nil, 0, fmt.Errorf("load lease %s: seq %d: %w", lease, r.Seq, err)
		}
	}
	return st, l.LastSeq, nil
}

// Stream is the journal stream of a lease.
func Stream(lease string) string { return "lease/" + lease }
