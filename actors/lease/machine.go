package lease

// The lease state machine: the statuses and the State (here), the events that move
// a lease between them (events.go), Apply (apply.go: the only code that changes a
// State, used both live and to replay the journal), and Decide (decide.go: the only
// code that chooses events: given a State, an Input — a command, a worker's
// completion, an observation — and the environment, it returns the events to
// journal, the callbacks to queue with them in the same transaction, and the effects
// the actor then runs). Neither touches Docker, bbolt or an actor: the whole
// lifecycle is table-tested without them.
//
//	reserved ──provision.started──▶ provisioning ──provision.succeeded──▶ ready
//	    │                            │   ▲ └────────provision.failed──────▶ failed
//	    │        (retry: new generation) │                                 ▲   │
//	    │                            └───┘                                 │   │
//	    │           ready ──runtime.failing──▶ failing ──runtime.failed────┤   │
//	    │           ready ──cohort.diverged────────────────────────────────┘   │
//	    │                                                                      │
//	    │   ready/failing/failed ──maintenance.requested──▶ restarting | updating
//	    │        restarting|updating ──maintenance.completed──▶ ready   (target active)
//	    │        restarting|updating ──maintenance.recovered──▶ ready   (source kept/recreated)
//	    │        restarting|updating ──maintenance.failed─────▶ failed
//	    │
//	    └─ any live status ──close.requested──▶ deprovisioning ──closed──▶ closed
//	            failed ──provision.started (re-provision: a new admission)──▶ provisioning
//	            closed ──provision.started (a new lease under the old UUID)──▶ provisioning
//
// Every terminal decision (ready, failed, closed, a maintenance outcome) is
// journaled together with exactly one callback row; nothing else sends callbacks.
// A close that pre-empts a provision or a maintenance queues that operation's
// failed completion in the close's own transaction, ahead of the deprovisioned one.

import (
	"encoding/json"
	"slices"
	"strings"
	"time"

	"github.com/berth-dev/berth/messages"
)

// Status is where a lease is in its lifecycle.
type Status string

const (
	Reserved       Status = "reserved" // admitted, provision not started yet
	Provisioning   Status = "provisioning"
	Ready          Status = "ready"
	Failing        Status = "failing" // a death confirmed; diagnostics being captured
	Failed         Status = "failed"
	Restarting     Status = "restarting"     // a restart's target cohort is being deployed
	Updating       Status = "updating"       // an update's target cohort is being deployed
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
	case Restarting:
		return messages.StatusRestarting
	case Updating:
		return messages.StatusUpdating
	case Deprovisioning, Closed:
		return messages.StatusDeprovisioning
	}
	return messages.StatusUnknown
}

// maintaining reports a restart or update in flight.
func (s Status) maintaining() bool { return s == Restarting || s == Updating }

// Instance is one container of a running cohort, as recorded when it became Ready.
type Instance struct {
	Service     string `json:"service"`
	Index       int    `json:"index"`
	ContainerID string `json:"container_id"`
	Image       string `json:"image"`
	Ports       Ports  `json:"ports,omitempty"`
}

// Ports are an instance's published ports, sorted by key ("8080/tcp"). A slice, not
// a map: a one-entry map costs an idle lease ~400 bytes. Journaled as a JSON object.
type Ports []Port

// Port is one published port.
type Port struct {
	Key string
	messages.PortBinding
}

// Get is the binding of key, if published.
func (p Ports) Get(key string) (messages.PortBinding, bool) {
	for _, x := range p {
		if x.Key == key {
			return x.PortBinding, true
		}
	}
	return messages.PortBinding{}, false
}

// MarshalJSON writes the ports as an object keyed by port.
func (p Ports) MarshalJSON() ([]byte, error) {
	m := make(map[string]messages.PortBinding, len(p))
	for _, x := range p {
		m[x.Key] = x.PortBinding
	}
	return json.Marshal(m)
}

// UnmarshalJSON reads the object form, sorted by key.
func (p *Ports) UnmarshalJSON(b []byte) error {
	var m map[string]messages.PortBinding
	if err := json.Unmarshal(b, &m); err != nil {
		return err
	}
	*p = portsOf(m)
	return nil
}

func portsOf(m map[string]messages.PortBinding) Ports {
	if len(m) == 0 {
		return nil
	}
	out := make(Ports, 0, len(m))
	for k, b := range m {
		out = append(out, Port{Key: k, PortBinding: b})
	}
	slices.SortFunc(out, func(a, b Port) int { return strings.Compare(a.Key, b.Key) })
	return out
}

// Budget is the seed's terminal failure budget: a counted failure exhausts it when
// it is the third or later in a row and at least 30 minutes after the streak's first;
// ten minutes of Ready reset the streak, and so does an accepted restart or update.
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

// Maintenance is a restart or update in flight: its identity, its target release,
// and the source it may fall back to.
type Maintenance struct {
	ID            string     `json:"id"`
	Kind          string     `json:"kind"`
	AdmittedAt    time.Time  `json:"admitted_at"`
	At            time.Time  `json:"at"`
	Deadline      time.Time  `json:"deadline"`
	Version       int        `json:"version"`        // the target release
	SourceVersion int        `json:"source_version"` // the release the source cohort runs (0: none)
	SourceStatus  Status     `json:"source_status"`  // ready or failed before the maintenance
	SourceGen     uint64     `json:"source_generation"`
	Source        []Instance `json:"source,omitempty"` // the source cohort as captured at admission
	Generation    uint64     `json:"generation"`       // the target cohort's
	CompensateGen uint64     `json:"compensate_generation"`
}

// State is everything a lease actor knows, rebuilt from its journal.
type State struct {
	Status          Status          `json:"status"`
	Admission       uint64          `json:"admission"`
	Generation      uint64          `json:"generation"`      // of the cohort in flight or running
	LastGeneration  uint64          `json:"last_generation"` // highest ever handed out
	OperationID     string          `json:"operation_id"`
	Deadline        time.Time       `json:"deadline"`
	FailCount       int             `json:"fail_count"`
	Reason          string          `json:"reason,omitempty"`
	Message         string          `json:"message,omitempty"`
	Containers      []Instance      `json:"containers,omitempty"`
	ReadyAt         time.Time       `json:"ready_at"`
	Budget          Budget          `json:"budget"`
	PendingFailure  *RuntimeFailing `json:"pending_failure,omitempty"`
	Releases        []Release       `json:"releases,omitempty"` // oldest first
	Maintenance     *Maintenance    `json:"maintenance,omitempty"`
	ClosedAdmission uint64          `json:"closed_admission"`
	// Close is the close in progress (deprovisioning): what becomes of the volumes.
	Close *CloseRequested `json:"close,omitempty"`
	// Closed is the closed receipt (status closed): the retention record, if any.
	Closed *ClosedEv `json:"closed,omitempty"`
}

// NewState is a lease with nothing journaled yet.
func NewState() *State { return &State{Status: Reserved} }

// nextGeneration is the generation a new launch gets.
func (s *State) nextGeneration() uint64 { return max(s.LastGeneration, s.Generation) + 1 }

// Verdict is the terminal budget as GET /provisions shows it.
func (s *State) Verdict() *messages.TerminalBudget {
	v := "retry"
	if s.Status == Failed && s.Budget.Exhausted {
		v = "exhausted"
	}
	return &messages.TerminalBudget{Verdict: v, ConsecutiveFailures: s.Budget.Streak}
}

func (s *State) owns(containerID string) bool {
	_, ok := s.instance(containerID)
	return ok
}

func (s *State) instance(containerID string) (Instance, bool) {
	for _, inst := range s.Containers {
		if inst.ContainerID == containerID {
			return inst, true
		}
	}
	return Instance{}, false
}
