package lease

// The lease state machine, top to bottom: the statuses, the events that move a
// lease between them, Apply (the only code that changes a State, used both live and
// to replay the journal), and Decide (the only code that chooses events: given a
// State, an Input — a command, a worker's completion, an observation — and the
// environment, it returns the events to journal, the callbacks to queue with them in
// the same transaction, and the effects the actor then runs). Neither touches
// Docker, bbolt or an actor: the whole lifecycle is table-tested without them.
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
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
	"unique"

	"github.com/berth-dev/berth/dockerio"
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

// --- events ---------------------------------------------------------------------

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

// Release kinds.
const (
	KindProvision = "provision"
	KindRestart   = messages.MaintenanceRestart
	KindUpdate    = messages.MaintenanceUpdate
)

// Release is one deployment of the lease: what was asked for (manifest, items, the
// frozen resource profiles) and what ran (the image of every service).
type Release struct {
	Version       int                  `json:"version"`
	Status        string               `json:"status"` // messages.Release* statuses
	Kind          string               `json:"kind"`   // provision | restart | update
	OperationID   string               `json:"operation_id,omitempty"`
	MaintenanceID string               `json:"maintenance_id,omitempty"`
	CreatedAt     time.Time            `json:"created_at"`
	Reason        string               `json:"reason,omitempty"`
	Message       string               `json:"message,omitempty"`
	Manifest      []byte               `json:"manifest,omitempty"` // the tenant manifest JSON as sent
	Items         []messages.LeaseItem `json:"items,omitempty"`
	Services      []ServiceSpec        `json:"services,omitempty"` // sorted by name
	Images        []ServiceImage       `json:"images,omitempty"`   // content as deployed, by service
}

// ServiceImage is the recorded content of one service of a release.
type ServiceImage struct {
	Service string `json:"service"`
	messages.ImagePin
}

// Pin is the recorded image of service, if any.
func (r *Release) Pin(service string) (messages.ImagePin, bool) {
	for _, si := range r.Images {
		if si.Service == service {
			return si.ImagePin, true
		}
	}
	return messages.ImagePin{}, false
}

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
	CohortDiverged struct {
		Generation uint64    `json:"generation"`
		At         time.Time `json:"at"`
		Message    string    `json:"message"`
	}
	MaintenanceStarted struct {
		Maintenance
		Release Release `json:"release"` // the target, status deploying
	}
	MaintenanceDone struct {
		ID         string     `json:"id"`
		Generation uint64     `json:"generation"`
		At         time.Time  `json:"at"`
		Containers []Instance `json:"containers"`
	}
	// MaintenanceRestored: the target did not become ready, and the source runs —
	// untouched (Compensated false) or recreated from its release (true).
	MaintenanceRestored struct {
		ID          string     `json:"id"`
		Generation  uint64     `json:"generation"`
		At          time.Time  `json:"at"`
		Containers  []Instance `json:"containers"`
		Compensated bool       `json:"compensated"`
		Reason      string     `json:"reason"`
		Message     string     `json:"message"`
	}
	MaintenanceFailed struct {
		ID         string    `json:"id"`
		Generation uint64    `json:"generation"`
		At         time.Time `json:"at"`
		Reason     string    `json:"reason"`
		Message    string    `json:"message"`
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

// --- state ----------------------------------------------------------------------

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

// Release returns the release with version v, or nil.
func (s *State) Release(v int) *Release {
	for i := range s.Releases {
		if s.Releases[i].Version == v {
			return &s.Releases[i]
		}
	}
	return nil
}

// Latest is the newest release, or nil.
func (s *State) Latest() *Release {
	if len(s.Releases) == 0 {
		return nil
	}
	return &s.Releases[len(s.Releases)-1]
}

// Active is the release whose cohort is (or last was) running, or nil.
func (s *State) Active() *Release {
	for i := len(s.Releases) - 1; i >= 0; i-- {
		if s.Releases[i].Status == messages.ReleaseActive {
			return &s.Releases[i]
		}
	}
	return nil
}

// Running is the release a lease's containers are built from now: the deploying
// one while provisioning, the target during maintenance, else the newest release
// that is active or belongs to a provision — a failed re-provision is the current
// admission's release, newer than the active one it replaced; a failed maintenance
// target never is.
func (s *State) Running() *Release {
	if s.Status == Provisioning || s.Status.maintaining() {
		return s.Latest()
	}
	for i := len(s.Releases) - 1; i >= 0; i-- {
		if r := &s.Releases[i]; r.Status == messages.ReleaseActive || r.Kind == KindProvision {
			return r
		}
	}
	return s.Latest()
}

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
		retry := s.Status == Provisioning && e.Admission == s.Admission && e.Generation > s.Generation && e.Release == nil
		switch {
		case retry:
		case s.Status == Reserved:
		case s.Status == Failed:
			if e.Admission <= s.Admission || e.Release == nil && e.Admission == s.Admission {
				return s.refuse(ev) // a re-provision is a new admission
			}
		case s.Status == Closed:
			if e.Admission <= s.ClosedAdmission {
				return s.refuse(ev)
			}
			// A new lease under an old UUID: nothing of the closed one carries over.
			*s = State{Status: Reserved, Generation: s.Generation, LastGeneration: s.LastGeneration, ClosedAdmission: s.ClosedAdmission}
		default:
			return s.refuse(ev)
		}
		if e.Generation <= max(s.LastGeneration, s.Generation) {
			return s.refuse(ev) // generations are never reused
		}
		s.Status, s.Admission, s.Generation = Provisioning, e.Admission, e.Generation
		s.LastGeneration = max(s.LastGeneration, e.Generation)
		s.OperationID, s.Deadline = e.OperationID, e.Deadline
		s.Reason, s.Message, s.Containers, s.PendingFailure = "", "", nil, nil
		s.Budget.Exhausted = false
		if !retry {
			r := Release{Kind: KindProvision, OperationID: e.OperationID, CreatedAt: e.At}
			if e.Release != nil {
				r = *e.Release
			}
			r.Version = s.nextVersion()
			r.Status = messages.ReleaseDeploying
			s.Releases = append(s.Releases, r)
		}
	case EvReleasePinned:
		var e ReleasePinned
		if err := decode(ev, &e); err != nil {
			return err
		}
		r := s.Release(e.Version)
		if r == nil || r.Status != messages.ReleaseDeploying {
			return s.refuse(ev)
		}
		r.Images = e.Images
	case EvProvisionSucceeded:
		var e ProvisionSucceeded
		if err := decode(ev, &e); err != nil {
			return err
		}
		if s.Status != Provisioning || e.Generation != s.Generation {
			return s.refuse(ev)
		}
		s.Status, s.Containers, s.ReadyAt = Ready, e.Containers, e.At
		s.activate(s.Latest())
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
		s.failRelease(s.Latest(), e.Reason, e.Message)
	case EvRuntimeFailing:
		var e RuntimeFailing
		if err := decode(ev, &e); err != nil {
			return err
		}
		if s.Status != Ready || e.Generation != s.Generation {
			return s.refuse(ev)
		}
		s.exitReady(e.At)
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
	case EvCohortDiverged:
		var e CohortDiverged
		if err := decode(ev, &e); err != nil {
			return err
		}
		if s.Status != Ready || e.Generation != s.Generation {
			return s.refuse(ev)
		}
		s.exitReady(e.At)
		s.Budget.Exhausted = false // a platform finding never counts
		s.Status, s.Reason, s.Message, s.Containers = Failed, messages.ReasonInternal, e.Message, nil
		s.FailCount++
	case EvMaintenanceStarted:
		var e MaintenanceStarted
		if err := decode(ev, &e); err != nil {
			return err
		}
		if s.Status != Ready && s.Status != Failing && s.Status != Failed {
			return s.refuse(ev)
		}
		if e.Generation <= max(s.LastGeneration, s.Generation) || e.CompensateGen <= e.Generation || s.hasMaintenance(e.ID) {
			return s.refuse(ev)
		}
		m := e.Maintenance
		s.Status = Restarting
		if m.Kind == KindUpdate {
			s.Status = Updating
		}
		s.Maintenance = &m
		s.LastGeneration = m.CompensateGen
		s.PendingFailure = nil
		s.Budget = Budget{} // an accepted restart or update resets the streak
		r := e.Release
		r.Version, r.Status = s.nextVersion(), messages.ReleaseDeploying
		s.Maintenance.Version = r.Version
		s.Releases = append(s.Releases, r)
	case EvMaintenanceDone:
		var e MaintenanceDone
		if err := decode(ev, &e); err != nil {
			return err
		}
		m := s.Maintenance
		if !s.Status.maintaining() || m == nil || e.ID != m.ID || e.Generation != m.Generation {
			return s.refuse(ev)
		}
		s.activate(s.Release(m.Version))
		s.Status, s.Generation, s.Containers, s.ReadyAt = Ready, e.Generation, e.Containers, e.At
		s.Reason, s.Message, s.Maintenance = "", "", nil
	case EvMaintenanceRestored:
		var e MaintenanceRestored
		if err := decode(ev, &e); err != nil {
			return err
		}
		m := s.Maintenance
		if !s.Status.maintaining() || m == nil || e.ID != m.ID || (e.Generation != m.SourceGen && e.Generation != m.CompensateGen) {
			return s.refuse(ev)
		}
		s.failRelease(s.Release(m.Version), e.Reason, e.Message)
		s.Status, s.Generation, s.Containers = Ready, e.Generation, e.Containers
		if e.Compensated || s.ReadyAt.IsZero() {
			s.ReadyAt = e.At
		}
		// A ready lease keeps the cause of its last failed maintenance (seed: GET /provisions).
		s.Reason, s.Message, s.Maintenance = e.Reason, e.Message, nil
	case EvMaintenanceFailed:
		var e MaintenanceFailed
		if err := decode(ev, &e); err != nil {
			return err
		}
		m := s.Maintenance
		if !s.Status.maintaining() || m == nil || e.ID != m.ID || (e.Generation != m.SourceGen && e.Generation != m.CompensateGen && e.Generation != m.Generation) {
			return s.refuse(ev)
		}
		s.failRelease(s.Release(m.Version), e.Reason, e.Message)
		s.Status, s.Generation, s.Containers = Failed, e.Generation, nil
		s.Reason, s.Message, s.Maintenance = e.Reason, e.Message, nil
		s.FailCount++
	case EvReleasesPruned:
		var e ReleasesPruned
		if err := decode(ev, &e); err != nil {
			return err
		}
		if len(e.Versions) == 0 || s.Status == Closed {
			return s.refuse(ev)
		}
		for _, v := range e.Versions {
			r := s.Release(v)
			if r == nil || !disposable(s, r) {
				return s.refuse(ev)
			}
		}
		s.Releases = slices.DeleteFunc(s.Releases, func(r Release) bool { return slices.Contains(e.Versions, r.Version) })
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
			s.Closed = nil
		case Provisioning:
			s.failRelease(s.Latest(), reasonCanceled, "closed before the provision completed")
		case Restarting, Updating:
			s.failRelease(s.Release(s.Maintenance.Version), reasonCanceled, "closed before the "+s.Maintenance.Kind+" completed")
			s.Maintenance = nil
		}
		s.Status, s.Close = Deprovisioning, &e
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
		s.Status, s.ClosedAdmission = Closed, e.Admission
		s.Containers, s.PendingFailure, s.Maintenance, s.Close = nil, nil, nil, nil
		s.Releases = nil // a closed lease has no history to serve
		if e.Retention != nil || e.Requarantined != "" {
			s.Closed = &e
		}
	default:
		return fmt.Errorf("event type %q unknown to this berthd", ev.Type)
	}
	return nil
}

// reasonCanceled is the release reason of an operation a close pre-empted.
const reasonCanceled = "Canceled"

func (s *State) nextVersion() int {
	if l := s.Latest(); l != nil {
		return l.Version + 1
	}
	return 1
}

func (s *State) hasMaintenance(id string) bool {
	for _, r := range s.Releases {
		if r.MaintenanceID == id {
			return true
		}
	}
	return false
}

// activate makes r the active release; the previously active one is superseded.
func (s *State) activate(r *Release) {
	if r == nil {
		return
	}
	for i := range s.Releases {
		if s.Releases[i].Status == messages.ReleaseActive && s.Releases[i].Version != r.Version {
			s.Releases[i].Status = messages.ReleaseSuperseded
		}
	}
	r.Status, r.Reason, r.Message = messages.ReleaseActive, "", ""
}

func (s *State) failRelease(r *Release, reason, message string) {
	if r != nil && r.Status == messages.ReleaseDeploying {
		r.Status, r.Reason, r.Message = messages.ReleaseFailed, reason, message
	}
}

// exitReady applies the Ready-exit rule of the budget: ten minutes of Ready reset
// the streak before the exit is counted.
func (s *State) exitReady(at time.Time) {
	if !s.ReadyAt.IsZero() && at.Sub(s.ReadyAt) >= budgetReadyReset {
		s.Budget = Budget{}
	}
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
	if err := persistence.DecodeValid(ev.Data, into); err != nil {
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

// --- inputs, effects and decisions -------------------------------------------------

// Input is anything that can move a lease: a command, a worker's completion, an
// observation of Docker, a timer.
type Input interface{ isInput() }

type (
	// Recover: the actor (re)started with its journal loaded; settle what the
	// journal left unfinished before taking commands.
	Recover struct{}
	// Reprovision: the registry admitted a newer spec (Env.Spec) for this lease.
	Reprovision struct{}
	// Close: a deprovision request; Retain is the registry's decision to keep the
	// lease's durable volumes as a retention record.
	Close struct{ Retain bool }
	// Maintain: a restart (Target nil) or an update (Target: the validated new
	// manifest, items and services, with the lease's frozen profiles).
	Maintain struct {
		Kind       string
		ID         string
		AdmittedAt time.Time
		Target     *Release
	}
	// Pinned: a worker resolved the images of a deploying release.
	Pinned struct {
		Version int
		Images  []ServiceImage
	}
	// Attempted: a provision or resume worker finished.
	Attempted struct {
		Generation uint64
		Outcome    Outcome
	}
	// TornDown: the teardown worker finished. Retained are the volumes it moved into
	// the retention namespace; Held those whose destruction is busy and handed to the
	// volumehold actor (the close waits for them).
	TornDown struct {
		Err      error
		Retained []messages.RetainedVolume
		Held     []string
	}
	// HoldDone: a held volume of this lease is gone.
	HoldDone struct{ Name string }
	// Captured: a runtime failure's diagnostics are written.
	Captured struct{ Generation uint64 }
	// Replaced: a maintenance worker finished.
	Replaced struct {
		ID     string
		Result ReplaceResult
	}
	// Listed: the containers Docker lists for this lease (reconciliation).
	Listed struct{ Containers []messages.Container }
	// Died: the live event stream saw a container of this lease die.
	Died struct {
		ContainerID string
		Generation  uint64
		Counted     bool // the stream saw this run start and no kill before the death
	}
	// Confirmed: an inspect's answer about a reported death (Exited nil: it runs).
	Confirmed struct {
		Generation uint64
		Death      Died
		Exited     *messages.Container
	}
	// Timer: a wait scheduled by a Wait effect ran out.
	Timer struct{ What string }
)

func (Recover) isInput()     {}
func (Reprovision) isInput() {}
func (Close) isInput()       {}
func (Maintain) isInput()    {}
func (Pinned) isInput()      {}
func (Attempted) isInput()   {}
func (TornDown) isInput()    {}
func (HoldDone) isInput()    {}
func (Captured) isInput()    {}
func (Replaced) isInput()    {}
func (Listed) isInput()      {}
func (Died) isInput()        {}
func (Confirmed) isInput()   {}
func (Timer) isInput()       {}

// OutcomeKind is how a provision attempt (or its resumption) ended.
type OutcomeKind string

const (
	OutcomeReady    OutcomeKind = "ready"
	OutcomeFailed   OutcomeKind = "failed"   // definite; diagnostics captured, containers removed
	OutcomeRetry    OutcomeKind = "retry"    // interrupted with an incomplete cohort, now removed: start again
	OutcomePending  OutcomeKind = "pending"  // undecidable right now (Docker unreachable): look again soon
	OutcomeCanceled OutcomeKind = "canceled" // a close or a drain canceled it
)

// Outcome is a provision worker's report.
type Outcome struct {
	Kind       OutcomeKind
	Containers []Instance
	Reason     string
	Message    string
}

// ReplaceKind is how a maintenance worker ended — the seed's three Replace*
// outcomes, plus the source never having been touched, and undecided.
type ReplaceKind string

const (
	ReplaceCompleted ReplaceKind = "completed" // the target is ready: activate it
	ReplaceRecovered ReplaceKind = "recovered" // the target failed; the source was recreated and is ready
	ReplaceIntact    ReplaceKind = "intact"    // failed before the source was retired; the source runs unchanged
	ReplaceFailed    ReplaceKind = "failed"    // the target failed and so did compensation
	ReplacePending   ReplaceKind = "pending"   // undecidable right now: look again soon
	ReplaceCanceled  ReplaceKind = "canceled"
)

// ReplaceResult is a maintenance worker's report.
type ReplaceResult struct {
	Kind       ReplaceKind
	Generation uint64     // the cohort that runs now
	Containers []Instance // its containers (completed, recovered, intact)
	Reason     string     // the failure's curated reason (RestartFailed/UpdateFailed or a cause)
	Message    string
}

// WorkKind names the one worker a lease may run.
type WorkKind string

const (
	WorkProvision     WorkKind = "provision" // one attempt: images, network, compose up, verify
	WorkResume        WorkKind = "resume"    // classify an interrupted provision against Docker
	WorkTeardown      WorkKind = "teardown"  // remove everything of the lease
	WorkCapture       WorkKind = "failure-capture"
	WorkReplace       WorkKind = "replace"        // a restart or update, from capture to verdict
	WorkReplaceResume WorkKind = "replace-resume" // classify an interrupted maintenance against Docker
)

// Effect is something the actor does after journaling a decision.
type Effect interface{ isEffect() }

type (
	// Work starts the lease's worker.
	Work struct{ Kind WorkKind }
	// Cancel cancels the running worker; its completion comes back as an input.
	Cancel struct{}
	// Wait schedules Timer{What} after D.
	Wait struct {
		D    time.Duration
		What string
	}
	// Confirm inspects a reported death's container off the actor.
	Confirm struct{ Death Died }
	// Sweep hands containers of settled generations to automatic (gentle, bounded)
	// cleanup.
	Sweep struct{ IDs []string }
	// Answer replies to every close request waiting for the closed receipt.
	Answer struct{ Err error }
	// TellClosed tells the registry the closed receipt is journaled.
	TellClosed struct{}
)

func (Work) isEffect()       {}
func (Cancel) isEffect()     {}
func (Wait) isEffect()       {}
func (Confirm) isEffect()    {}
func (Sweep) isEffect()      {}
func (Answer) isEffect()     {}
func (TellClosed) isEffect() {}

// Callback is a callback row a decision queues, in the transaction of its events.
type Callback struct {
	Status        string // success | failed | deprovisioned
	Error         string // curated, on-chain safe
	Retained      bool   // a deprovisioned callback whose volumes were retained
	Lifecycle     bool   // to the lifecycle URL (else the exact completion URL)
	MaintenanceID string
	AdmittedAt    time.Time
}

// Outbox row kinds: the maintenance fence looks for "maintenance" rows.
const (
	RowOperation   = "operation"
	RowLifecycle   = "lifecycle"
	RowMaintenance = "maintenance"
)

// Kind is the outbox row kind of the callback.
func (c Callback) Kind() string {
	switch {
	case c.MaintenanceID != "":
		return RowMaintenance
	case c.Lifecycle:
		return RowLifecycle
	}
	return RowOperation
}

// Decision is what Decide returns.
type Decision struct {
	Events    []persistence.Event // journaled with Callbacks in one transaction
	Callbacks []Callback
	Effects   []Effect
	Reply     error // a command's answer: nil accepts it
	Hold      bool  // a Close whose answer waits for the closed receipt
}

// Limits are the durations and bounds Decide applies (from the config).
type Limits struct {
	ProvisionTimeout time.Duration
	ResumePoll       time.Duration
	TeardownRetry    time.Duration
	ReleasesMaxAge   time.Duration // superseded/failed releases older than this are pruned
	HistoryBytes     int           // per-lease cap on the encoded release history
	RetentionMaxAge  time.Duration // a retention record's grace (0: kept until evicted)
}

// Env is what Decide may know beyond the state.
type Env struct {
	Now    time.Time
	Spec   *Spec    // the latest admission
	Worker WorkKind // the worker running now ("" none)
	Fenced bool     // a maintenance completion of this lease is still in the outbox
	Limits Limits
}

// Decide chooses what an input does to a lease. It never changes st: the actor
// journals the events, applies them (Apply), then runs the effects.
func Decide(st *State, in Input, env Env) Decision {
	switch in := in.(type) {
	case Recover:
		return decideRecover(st, env)
	case Reprovision:
		if env.Spec.Admission > st.Admission && (st.Status == Reserved || st.Status == Failed || st.Status == Closed) {
			return startProvision(st, env)
		}
	case Close:
		return decideClose(st, in, env)
	case Maintain:
		return decideMaintain(st, in, env)
	case Pinned:
		if r := st.Release(in.Version); r != nil && r.Status == messages.ReleaseDeploying && !samePins(r.Images, in.Images) {
			return Decision{Events: []persistence.Event{event(EvReleasePinned, env.Now, ReleasePinned(in))}}
		}
	case Attempted:
		return decideAttempted(st, in, env)
	case TornDown:
		return decideTornDown(st, in, env)
	case HoldDone:
		if st.Status == Deprovisioning && env.Worker == "" {
			return effects(Work{WorkTeardown}) // a held volume is gone: finish the close
		}
	case Captured:
		switch {
		case st.Status == Deprovisioning:
			return effects(Work{WorkTeardown})
		case st.Status.maintaining():
			return effects(Work{WorkReplace}) // a maintenance accepted while failing
		case st.Status == Failing && in.Generation == st.Generation:
			ev := event(EvRuntimeFailed, env.Now, RuntimeFailed{Generation: st.Generation, At: env.Now,
				Reason: messages.ReasonContainerExited, Message: "container exited unexpectedly"})
			return Decision{Events: []persistence.Event{ev}, Callbacks: []Callback{{Status: messages.CallbackFailed,
				Error: callbackError(messages.ReasonContainerExited), Lifecycle: true}}}
		}
	case Replaced:
		return decideReplaced(st, in, env)
	case Listed:
		return decideListed(st, in, env)
	case Died:
		if st.Status == Ready && in.Generation == st.Generation && st.owns(in.ContainerID) {
			return effects(Confirm{Death: in})
		}
	case Confirmed:
		inst, ok := st.instance(in.Death.ContainerID)
		if in.Exited == nil || st.Status != Ready || in.Generation != st.Generation || !ok {
			return Decision{}
		}
		f := RuntimeFailing{Generation: st.Generation, At: env.Now, ContainerID: inst.ContainerID,
			Service: inst.Service, Index: inst.Index, ExitCode: in.Exited.ExitCode,
			OOMKilled: in.Exited.OOMKilled, Counted: in.Death.Counted}
		return Decision{Events: []persistence.Event{event(EvRuntimeFailing, env.Now, f)}, Effects: []Effect{Work{WorkCapture}}}
	case Timer:
		switch {
		case st.Status == Deprovisioning:
			return effects(Work{WorkTeardown})
		case in.What == string(WorkResume) && st.Status == Provisioning:
			return effects(Work{WorkResume})
		case in.What == string(WorkReplaceResume) && st.Status.maintaining():
			return effects(Work{WorkReplaceResume})
		}
	}
	return Decision{}
}

func effects(e ...Effect) Decision { return Decision{Effects: e} }

// pendingAdmission reports a newer admission (a re-provision the registry already
// answered 202) that has no provision.started yet.
func pendingAdmission(st *State, env Env) bool {
	return env.Spec.Admission > st.Admission && (st.Status == Failed || st.Status == Reserved)
}

// decideRecover settles the journal's unfinished intent when the actor starts.
func decideRecover(st *State, env Env) Decision {
	switch {
	case st.Status == Closed && st.ClosedAdmission >= env.Spec.Admission:
		return effects(TellClosed{})
	case st.Status == Deprovisioning:
		return effects(Work{WorkTeardown})
	case env.Spec.Admission > st.Admission && (st.Status == Reserved || st.Status == Failed || st.Status == Closed):
		return startProvision(st, env)
	case st.Status == Provisioning:
		return effects(Work{WorkResume})
	case st.Status == Failing:
		return effects(Work{WorkCapture})
	case st.Status.maintaining():
		return effects(Work{WorkReplaceResume})
	}
	return Decision{}
}

// startProvision starts the latest admission's first attempt, with its release.
func startProvision(st *State, env Env) Decision {
	spec := env.Spec
	r := spec.release(env.Now)
	// A provision's protected releases (the active one and this) always fit: raw
	// manifests are capped at 1 MiB, the history at 32 MiB. A closed lease's history
	// went with it.
	var prune []persistence.Event
	if st.Status != Closed {
		prune, _ = pruneReleases(st, &r, env)
	}
	ev := event(EvProvisionStarted, env.Now, ProvisionStarted{Admission: spec.Admission,
		Generation: st.nextGeneration(), OperationID: spec.OperationID, At: env.Now,
		Deadline: env.Now.Add(env.Limits.ProvisionTimeout), Release: &r})
	return Decision{Events: append([]persistence.Event{ev}, prune...), Effects: []Effect{Work{WorkProvision}}}
}

func decideAttempted(st *State, in Attempted, env Env) Decision {
	if st.Status == Deprovisioning {
		return effects(Work{WorkTeardown}) // the canceled attempt drained: tear down
	}
	if st.Status != Provisioning || in.Generation != st.Generation {
		return Decision{}
	}
	out := in.Outcome
	switch out.Kind {
	case OutcomeReady:
		ev := event(EvProvisionSucceeded, env.Now, ProvisionSucceeded{Generation: st.Generation, At: env.Now, Containers: out.Containers})
		return Decision{Events: []persistence.Event{ev}, Callbacks: []Callback{{Status: messages.CallbackSuccess}}}
	case OutcomeFailed:
		return provisionFailed(st, env, out.Reason, out.Message)
	case OutcomeRetry:
		if !env.Now.Before(st.Deadline) {
			return provisionFailed(st, env, messages.ReasonInternal, "provisioning did not complete in time")
		}
		// An interrupted attempt, its incomplete cohort removed: the same admission
		// starts again at once under a new generation, within the same deadline.
		ev := event(EvProvisionStarted, env.Now, ProvisionStarted{Admission: st.Admission, Generation: st.nextGeneration(),
			OperationID: st.OperationID, At: env.Now, Deadline: st.Deadline})
		return Decision{Events: []persistence.Event{ev}, Effects: []Effect{Work{WorkProvision}}}
	}
	return effects(Wait{D: env.Limits.ResumePoll, What: string(WorkResume)})
}

func provisionFailed(st *State, env Env, reason, message string) Decision {
	ev := event(EvProvisionFailed, env.Now, ProvisionFailed{Generation: st.Generation, At: env.Now, Reason: reason, Message: message})
	return Decision{Events: []persistence.Event{ev}, Callbacks: []Callback{{Status: messages.CallbackFailed, Error: callbackError(reason)}}}
}

// decideClose journals the close intent first (write-ahead), with the failed
// completion of whatever operation it pre-empts, then tears down once no worker runs.
func decideClose(st *State, in Close, env Env) Decision {
	switch st.Status {
	case Closed:
		return Decision{}
	case Deprovisioning:
		return Decision{Hold: true}
	}
	d := Decision{Hold: true}
	// A restore that never committed hands its adopted volumes back; only a lease
	// whose data is its own can be retained.
	requarantine := env.Spec.Restore != nil && (st.Status == Reserved || st.Status == Provisioning || pendingAdmission(st, env))
	d.Events = []persistence.Event{event(EvCloseRequested, env.Now, CloseRequested{Admission: max(st.Admission, env.Spec.Admission),
		At: env.Now, Retain: in.Retain && !requarantine, Requarantine: requarantine})}
	switch {
	case st.Status == Reserved || st.Status == Provisioning || pendingAdmission(st, env):
		d.Callbacks = []Callback{{Status: messages.CallbackFailed, Error: errCanceled}}
	case st.Status.maintaining():
		m := st.Maintenance
		d.Callbacks = []Callback{{Status: messages.CallbackFailed, Error: maintenanceError(m.Kind, reasonCanceled),
			Lifecycle: true, MaintenanceID: m.ID, AdmittedAt: m.AdmittedAt}}
	}
	if env.Worker != "" {
		// The close wins: cancel the worker; teardown starts when it has drained, so
		// no late container of the canceled work can survive the teardown.
		d.Effects = []Effect{Cancel{}}
	} else {
		d.Effects = []Effect{Work{WorkTeardown}}
	}
	return d
}

func decideTornDown(st *State, in TornDown, env Env) Decision {
	if st.Status != Deprovisioning {
		return Decision{}
	}
	if in.Err != nil {
		return effects(Wait{D: env.Limits.TeardownRetry, What: string(WorkTeardown)})
	}
	if len(in.Held) > 0 {
		// A volume could not be destroyed yet: the volumehold actor retries it and
		// tells us when it is gone; the close stays pending (503 lifecycle_pending)
		// and looks again now and then.
		return effects(Wait{D: 6 * env.Limits.TeardownRetry, What: string(WorkTeardown)})
	}
	closed := ClosedEv{Admission: st.Admission, At: env.Now}
	if c := st.Close; c != nil && c.Requarantine && env.Spec.Restore != nil {
		closed.Requarantined = env.Spec.Restore.From
	}
	if len(in.Retained) > 0 {
		closed.Retention = retentionRecord(st, env, in.Retained)
	}
	return Decision{
		Events:    []persistence.Event{event(EvClosed, env.Now, closed)},
		Callbacks: []Callback{{Status: messages.CallbackDeprovisioned, Lifecycle: true, Retained: closed.Retention != nil}},
		// The registry hears first: its mailbox then holds the release before any
		// request the deprovision's 200 lets the caller make (GET /stats, a provision
		// into the freed capacity).
		Effects: []Effect{TellClosed{}, Answer{}},
	}
}

// retentionRecord is what a retaining close keeps: the lease's identity, its
// running release (manifest, items, images as they ran) and the retained volumes.
func retentionRecord(st *State, env Env, vols []messages.RetainedVolume) *messages.RetentionRecord {
	rec := &messages.RetentionRecord{Lease: env.Spec.Lease, Tenant: env.Spec.Tenant, ProviderUUID: env.Spec.ProviderUUID,
		Items: env.Spec.Items, Manifest: env.Spec.Manifest, Volumes: vols, RetainedAt: env.Now}
	if r := st.Running(); r != nil {
		if len(r.Items) > 0 {
			rec.Items = r.Items
		}
		if len(r.Manifest) > 0 {
			rec.Manifest = r.Manifest
		}
		for _, si := range r.Images {
			rec.Images = append(rec.Images, messages.ServicePin{Service: si.Service, ImagePin: si.ImagePin})
		}
	}
	if env.Limits.RetentionMaxAge > 0 {
		rec.RetainedUntil = env.Now.Add(env.Limits.RetentionMaxAge)
	}
	return rec
}

// decideMaintain admits a restart or an update: guards, then the intent with its
// target release, journaled before the 202.
func decideMaintain(st *State, in Maintain, env Env) Decision {
	refuse := func(format string, args ...any) Decision {
		return Decision{Reply: messages.Refuse(messages.ErrInvalidState, format, args...)}
	}
	switch {
	case st.Status != Ready && st.Status != Failing && st.Status != Failed:
		return refuse("lease is %s; %s needs a ready or failed lease", st.Status.Wire(), in.Kind)
	case pendingAdmission(st, env):
		return refuse("lease is being re-provisioned; %s needs a ready or failed lease", in.Kind)
	case st.hasMaintenance(in.ID):
		return refuse("maintenance_id %s already names a release of this lease; send a new key", in.ID)
	case env.Fenced:
		return refuse("an earlier maintenance completion of this lease is still being delivered; retry shortly")
	}
	source := st.Running()
	if source == nil {
		return refuse("lease has no release to %s", in.Kind)
	}
	target := source.clone()
	if in.Target != nil {
		target = in.Target.clone()
		target.Images = nil
		for _, svc := range target.Services { // unchanged references keep their recorded content
			if pin, ok := source.Pin(svc.Name); ok && pin.Ref == svc.Manifest.Image {
				target.Images = append(target.Images, ServiceImage{Service: svc.Name, ImagePin: pin})
			}
		}
	}
	target.Kind, target.MaintenanceID, target.OperationID, target.CreatedAt = in.Kind, in.ID, "", env.Now
	target.Reason, target.Message = "", ""
	prune, ok := pruneReleases(st, &target, env)
	if !ok {
		return refuse("release history of this lease is full")
	}
	gen := st.nextGeneration()
	m := Maintenance{ID: in.ID, Kind: in.Kind, AdmittedAt: in.AdmittedAt.UTC(), At: env.Now,
		Deadline: env.Now.Add(env.Limits.ProvisionTimeout), SourceVersion: source.Version,
		SourceStatus: Ready, SourceGen: st.Generation, Source: slices.Clone(st.Containers),
		Generation: gen, CompensateGen: gen + 1}
	if st.Status != Ready {
		m.SourceStatus, m.Source = Failed, nil
	}
	if source.Status != messages.ReleaseActive {
		m.SourceVersion = 0 // a lease that never became ready has no source to return to
	}
	d := Decision{Events: append([]persistence.Event{event(EvMaintenanceStarted, env.Now, MaintenanceStarted{Maintenance: m, Release: target})}, prune...)}
	if env.Worker != "" {
		d.Effects = []Effect{Cancel{}} // a failure capture: the replacement starts when it drained
	} else {
		d.Effects = []Effect{Work{WorkReplace}}
	}
	return d
}

func decideReplaced(st *State, in Replaced, env Env) Decision {
	if st.Status == Deprovisioning {
		return effects(Work{WorkTeardown})
	}
	m := st.Maintenance
	if !st.Status.maintaining() || m == nil || in.ID != m.ID {
		return Decision{}
	}
	res := in.Result
	done := func(ev persistence.Event, status, errText string) Decision {
		return Decision{Events: []persistence.Event{ev}, Callbacks: []Callback{{Status: status, Error: errText,
			Lifecycle: true, MaintenanceID: m.ID, AdmittedAt: m.AdmittedAt}}}
	}
	failReason := maintenanceReason(m.Kind)
	switch res.Kind {
	case ReplaceCompleted:
		return done(event(EvMaintenanceDone, env.Now, MaintenanceDone{ID: m.ID, Generation: m.Generation, At: env.Now,
			Containers: res.Containers}), messages.CallbackSuccess, "")
	case ReplaceRecovered:
		return done(event(EvMaintenanceRestored, env.Now, MaintenanceRestored{ID: m.ID, Generation: m.CompensateGen, At: env.Now,
			Containers: res.Containers, Compensated: true, Reason: failReason, Message: res.Message}),
			messages.CallbackFailed, maintenanceError(m.Kind, "rolled-back"))
	case ReplaceIntact:
		if m.SourceStatus == Ready {
			return done(event(EvMaintenanceRestored, env.Now, MaintenanceRestored{ID: m.ID, Generation: m.SourceGen, At: env.Now,
				Containers: m.Source, Reason: cmpOr(res.Reason, failReason), Message: res.Message}),
				messages.CallbackFailed, maintenanceError(m.Kind, cmpOr(res.Reason, "unchanged")))
		}
		return done(event(EvMaintenanceFailed, env.Now, MaintenanceFailed{ID: m.ID, Generation: m.SourceGen, At: env.Now,
			Reason: failReason, Message: res.Message}), messages.CallbackFailed, maintenanceError(m.Kind, cmpOr(res.Reason, "")))
	case ReplaceFailed:
		gen := res.Generation
		if gen != m.SourceGen && gen != m.Generation {
			gen = m.CompensateGen
		}
		return done(event(EvMaintenanceFailed, env.Now, MaintenanceFailed{ID: m.ID, Generation: gen, At: env.Now,
			Reason: failReason, Message: res.Message}), messages.CallbackFailed, maintenanceError(m.Kind, ""))
	}
	return effects(Wait{D: env.Limits.ResumePoll, What: string(WorkReplaceResume)})
}

// decideListed reads reconciliation's inventory of this lease: a Ready cohort
// with a container gone or not running is confirmed dead (attributed unknown: only
// the live stream can prove a tenant's own crash); a running cohort that is not
// the journaled one (an unexpected or duplicate instance, another image) diverged
// and fails the lease; containers of settled generations go to gentle cleanup.
// The dead cohort of a failed lease stays for the operator until a re-provision or
// close. Work in flight owns its containers, so nothing is swept then.
func decideListed(st *State, in Listed, env Env) Decision {
	var d Decision
	stale := func(keep func(c messages.Container) bool) {
		var ids []string
		for _, c := range in.Containers {
			if !keep(c) {
				ids = append(ids, c.ID)
			}
		}
		if len(ids) > 0 {
			d.Effects = append(d.Effects, Sweep{IDs: ids})
		}
	}
	switch st.Status {
	case Ready:
		if msg := diverged(st, in.Containers); msg != "" {
			d.Events = []persistence.Event{event(EvCohortDiverged, env.Now, CohortDiverged{Generation: st.Generation, At: env.Now, Message: msg})}
			d.Callbacks = []Callback{{Status: messages.CallbackFailed, Error: errDiverged, Lifecycle: true}}
			return d
		}
		for _, inst := range st.Containers {
			if c, ok := findContainer(in.Containers, inst.ContainerID); ok && c.State == "running" {
				continue
			}
			// The listing is only a hint — it may predate this cohort's start — so
			// the same inspect that confirms a streamed death confirms this one.
			d.Effects = append(d.Effects, Confirm{Death: Died{ContainerID: inst.ContainerID, Generation: st.Generation}})
		}
		stale(func(c messages.Container) bool { return c.Generation == st.Generation })
		d.Events, _ = pruneReleases(st, nil, env) // the history expires on idle leases too
	case Failed:
		stale(func(c messages.Container) bool { return c.Generation == st.Generation })
		d.Events, _ = pruneReleases(st, nil, env)
	case Provisioning:
		stale(func(c messages.Container) bool { return c.Generation >= st.Generation })
	}
	return d
}

// diverged compares the running cohort of the live generation with the journal:
// every container must be an expected (service, index), once, running the
// recorded image. "" when it agrees.
func diverged(st *State, listed []messages.Container) string {
	r := st.Running()
	if r == nil {
		return ""
	}
	want := r.expected()
	seen := map[dockerio.InstanceKey]bool{}
	for _, c := range listed {
		if c.Generation != st.Generation {
			continue
		}
		k := dockerio.InstanceKey{Service: c.Service, Index: c.Index}
		switch {
		case !want[k]:
			return fmt.Sprintf("unexpected instance %s/%d", c.Service, c.Index)
		case seen[k]:
			return fmt.Sprintf("instance %s/%d runs twice", c.Service, c.Index)
		}
		seen[k] = true
		if pin, ok := r.Pin(c.Service); ok && c.ImageID != "" && pin.ID != "" && c.ImageID != pin.ID {
			return fmt.Sprintf("instance %s/%d runs another image than its release", c.Service, c.Index)
		}
	}
	return ""
}

// --- releases ------------------------------------------------------------------

// disposable reports a release history may drop: superseded or failed, and neither
// the latest nor the active one.
func disposable(st *State, r *Release) bool {
	if r.Status != messages.ReleaseSuperseded && r.Status != messages.ReleaseFailed {
		return false
	}
	if l := st.Latest(); l != nil && l.Version == r.Version {
		return false
	}
	return true
}

// pruneReleases decides which releases the history drops, in the transaction that
// appends next (nil: nothing is appended; the periodic expiry). The event is
// journaled after the append, so it sees the history as the append leaves it:
// superseded and failed releases that are neither the latest nor the active one
// go when older than releases_max_age, then — oldest first — as many more as the
// per-lease history cap needs. ok is false when the protected releases (the
// active one and the new latest) alone would not fit: then nothing is admitted,
// before any Docker effect.
func pruneReleases(st *State, next *Release, env Env) (evs []persistence.Event, ok bool) {
	limit := env.Limits.HistoryBytes
	total := 0
	if next != nil {
		total = encodedSize(*next)
		protected := total
		if a := st.Active(); a != nil {
			protected += encodedSize(*a)
		}
		if limit > 0 && protected > limit {
			return nil, false
		}
	}
	latest := st.Latest()
	if !slices.ContainsFunc(st.Releases, func(r Release) bool { return droppable(&r, next, latest) }) {
		return nil, true // nothing could go: no need to weigh the history (a restart at 10k leases asks each)
	}
	for i := range st.Releases {
		total += encodedSize(st.Releases[i])
	}
	var drop []int
	for i := range st.Releases {
		r := &st.Releases[i]
		if !droppable(r, next, latest) {
			continue
		}
		expired := env.Limits.ReleasesMaxAge > 0 && env.Now.Sub(r.CreatedAt) > env.Limits.ReleasesMaxAge
		if expired || (limit > 0 && total > limit) {
			drop = append(drop, r.Version)
			total -= encodedSize(*r)
		}
	}
	if len(drop) == 0 {
		return nil, true
	}
	return []persistence.Event{event(EvReleasesPruned, env.Now, ReleasesPruned{Versions: drop})}, true
}

// droppable reports whether the history may drop r: superseded or failed, and
// not the latest when nothing new is appended (the latest stays the latest).
func droppable(r *Release, next, latest *Release) bool {
	if r.Status != messages.ReleaseSuperseded && r.Status != messages.ReleaseFailed {
		return false
	}
	return next != nil || latest == nil || r.Version != latest.Version
}

func encodedSize(r Release) int {
	b, _ := json.Marshal(r)
	return len(b)
}

func (r *Release) clone() Release {
	c := *r
	c.Items = slices.Clone(r.Items)
	c.Services = slices.Clone(r.Services)
	c.Manifest = slices.Clone(r.Manifest)
	c.Images = slices.Clone(r.Images)
	return c
}

// expected is the set of instances a complete cohort of r has.
func (r *Release) expected() map[dockerio.InstanceKey]bool {
	out := make(map[dockerio.InstanceKey]bool)
	for _, svc := range r.Services {
		for i := 0; i < svc.Quantity; i++ {
			out[dockerio.InstanceKey{Service: svc.Name, Index: i}] = true
		}
	}
	return out
}

// Wire is the release as GET /releases shows it.
func (r *Release) Wire() messages.Release {
	return messages.Release{Version: r.Version, Image: "stack", Status: r.Status, CreatedAt: r.CreatedAt,
		Reason: r.Reason, Message: r.Message, Manifest: encodeManifest(r.Manifest)}
}

func samePins(a, b []ServiceImage) bool { return slices.Equal(a, b) }

// --- small helpers ---------------------------------------------------------------

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

func findContainer(cs []messages.Container, id string) (messages.Container, bool) {
	for _, c := range cs {
		if c.ID == id {
			return c, true
		}
	}
	return messages.Container{}, false
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func maintenanceReason(kind string) string {
	if kind == KindUpdate {
		return messages.ReasonUpdateFailed
	}
	return messages.ReasonRestartFailed
}

// Curated, on-chain-safe callback error texts (never logs or runtime data).
const (
	errCanceled = "Canceled: the lease was closed before provisioning completed"
	errDiverged = "Internal: the running containers no longer match the lease's deployment"
)

// callbackError is the curated error text of a provision or runtime failure reason.
func callbackError(reason string) string {
	switch reason {
	case messages.ReasonContainerExited:
		return "ContainerExited: a container exited"
	case messages.ReasonImagePullFailed:
		return "ImagePullFailed: an image could not be pulled"
	case messages.ReasonHealthCheckFailed:
		return "HealthCheckFailed: a health check did not pass"
	case messages.ReasonContainerStartFailed:
		return "ContainerStartFailed: a container could not be started"
	case messages.ReasonCleanupFailed:
		return "CleanupFailed: cleanup did not complete"
	case messages.ReasonRestoreFailed:
		return "RestoreFailed: the retained data could not be restored; it is retained again"
	}
	return "Internal: provisioning failed on the provider"
}

// maintenanceError is the curated error text of a failed restart or update; cause
// is a reason code of the target's failure, "rolled-back", "unchanged" or "".
func maintenanceError(kind, cause string) string {
	prefix, what := messages.ReasonRestartFailed, "the restart"
	if kind == KindUpdate {
		prefix, what = messages.ReasonUpdateFailed, "the update"
	}
	switch cause {
	case "rolled-back":
		return prefix + ": " + what + " failed and the previous deployment was restored"
	case "unchanged":
		return prefix + ": " + what + " failed; the lease is unchanged"
	case reasonCanceled:
		return prefix + ": the lease was closed before " + what + " completed"
	case messages.ReasonImagePullFailed:
		return prefix + ": ImagePullFailed: an image could not be pulled; the lease is unchanged"
	case messages.ReasonContainerExited, messages.ReasonHealthCheckFailed, messages.ReasonContainerStartFailed:
		return prefix + ": " + cause + ": " + what + " did not become ready"
	}
	return prefix + ": " + what + " failed"
}

// ShareAdmission points the state's copies of what the spec already holds at the
// spec's: the releases of the spec's own admission get its manifest, items and
// services (equal by construction: the release was built from that spec; a release
// journaled without them, by an older berthd, gets them the same way), and the
// service names recorded in pins and in the running cohort share the manifest's
// strings. Image references, IDs and digests are interned process-wide (leases
// of one image share one copy). An idle lease then keeps one parsed manifest, not
// two — it is what keeps 10,000 idle leases within their memory budget.
func (s *State) ShareAdmission(spec *Spec) {
	for i := range s.Releases {
		r := &s.Releases[i]
		if r.Kind != KindProvision || r.OperationID != spec.OperationID {
			continue
		}
		if len(r.Services) == 0 || bytes.Equal(r.Manifest, spec.Manifest) {
			r.Manifest, r.Items, r.Services = spec.Manifest, spec.Items, spec.Services
		}
		r.Kind, r.OperationID = KindProvision, spec.OperationID
	}
	if s.OperationID == spec.OperationID {
		s.OperationID = spec.OperationID // one copy of the string, not two
	}
	name := func(service string) string {
		for _, svc := range spec.Services {
			if svc.Name == service {
				return svc.Name
			}
		}
		return service
	}
	for i := range s.Releases {
		for k := range s.Releases[i].Images {
			si := &s.Releases[i].Images[k]
			si.Service = name(si.Service)
			si.Ref, si.ID, si.Digest = intern(si.Ref), intern(si.ID), intern(si.Digest)
		}
	}
	for i := range s.Containers {
		c := &s.Containers[i]
		c.Service, c.Image = name(c.Service), intern(c.Image)
	}
}

// intern returns the process-wide canonical copy of s (unique: released when no
// lease holds it any more).
func intern(s string) string {
	if s == "" {
		return ""
	}
	return unique.Make(s).Value()
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
		if err := persistence.DecodeValid(l.Snapshot.Data, st); err != nil {
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

// ClosedReceipt reports whether a lease's journal ends in a closed receipt: the
// authority for removing containers of a lease nobody runs. A lease without a
// stream has none.
func ClosedReceipt(store *persistence.Store) func(lease string) (bool, error) {
	return func(lease string) (bool, error) {
		st, seq, err := Load(store, lease)
		if err != nil {
			return false, err
		}
		return seq > 0 && st.Status == Closed, nil
	}
}
