package lease

// The lease state machine: the statuses, the events that move a lease between
// them, and the State (here); Apply (apply.go: the only code that changes a State,
// used both live and to replay the journal); and Decide (decide.go: the only code
// that chooses events: given a State, an Input — a command, a worker's completion,
// an observation — and the environment, it returns the events to journal, the
// callbacks to queue with them in the same transaction, and the effects the actor
// then runs). Neither touches Docker, bbolt or an actor: the whole lifecycle is
// table-tested without them.
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
//	    failing | failed ──provision.started (re-provision: a new admission)──▶ provisioning
//
// Closed is final: no event follows it, so a lease UUID is never provisioned twice
// (the registry refuses a closed UUID's provision or restore; this refuses it too).
//
// Every terminal decision (ready, failed, closed, a maintenance outcome) is
// journaled together with exactly one callback row; nothing else sends callbacks.
// A close that pre-empts a provision or a maintenance queues that operation's
// failed completion in the close's own transaction, ahead of the deprovisioned one.

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"time"
	"unique"

	"github.com/berth-dev/berth/messages"
	"github.com/berth-dev/berth/persistence"
	"github.com/berth-dev/berth/supervisors"
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
	EvCloseJudged         = "close.judged" // a retaining close's verdict on each volume, before any is touched
	EvClosed              = "closed"
	EvAdopted             = "lease.adopted" // a fred v0.13 lease taken over as it ran (cmd/berthd/takeover)
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

// Event payloads: one type per event, shared by Apply (which folds them), Decide
// (which chooses them) and the debug API (which summarises them). Their JSON is the
// journal's: field names never change.
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
		// Kept: the attempt's containers are kept — its diagnostics could not be
		// written, or their removal failed — and their cleanup is retried.
		Kept bool `json:"kept,omitempty"`
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
		// Judged and Reclaim are a retaining close's verdict (close.judged), set
		// once its containers are gone and before any volume is touched: the
		// volumes in Reclaim held only writable-path copies and are destroyed,
		// the rest retained. Every later run of the close carries it out as
		// journaled, never judging again.
		Judged  bool     `json:"judged,omitempty"`
		Reclaim []string `json:"reclaim,omitempty"`
	}
	// CloseJudged is a retaining close's verdict: the volumes that hold only
	// writable-path copies (dockerio.WritablePathOnly) and are destroyed
	// instead of retained.
	CloseJudged struct {
		Reclaim []string `json:"reclaim"`
	}
	// Adopted: a fred v0.13 lease taken over as it ran: its release history as
	// fred kept it, its cohort by exact container ID — running (ready) or exited
	// (failed, fail_count as fred's own cold start counts it). Fred's containers
	// carry no generation: the cohort is generation 0 and the first relaunch
	// starts generation 1.
	Adopted struct {
		Admission   uint64     `json:"admission"`
		OperationID string     `json:"operation_id"`
		At          time.Time  `json:"at"`
		Releases    []Release  `json:"releases"`
		Containers  []Instance `json:"containers"`
		FailCount   int        `json:"fail_count,omitempty"`
		Failed      *Cause     `json:"failed,omitempty"`
		// FredLayout: its volumes keep fred's nested VOLUME subdirectories,
		// moved onto berthd's names (Volumes.Unnest) before any relaunch.
		FredLayout bool `json:"fred_layout,omitempty"`
		// FredScratch are fred's volumes of diskless instances (their writable
		// paths, under the canonical name): destroyed at close, never retained.
		FredScratch []string `json:"fred_scratch,omitempty"`
	}
	ClosedEv struct {
		Admission uint64    `json:"admission"`
		At        time.Time `json:"at"`
		// Retention is the record of the retained volumes (nil: destroyed).
		Retention *messages.RetentionRecord `json:"retention,omitempty"`
		// Requarantined is the retention source a pre-commit restore handed back.
		Requarantined string `json:"requarantined,omitempty"`
		// Reclaimed are the volumes a retaining close destroyed as
		// writable-path-only (its close.judged verdict).
		Reclaimed []string `json:"reclaimed,omitempty"`
	}
)

// event encodes a payload as a journal event of the lease stream.
func event(typ string, at time.Time, payload any) persistence.Event {
	return supervisors.NewEvent(typ, eventVersion, at, payload)
}

// Instance is one container of a running cohort, as recorded when it became Ready.
type Instance struct {
	Service     string `json:"service"`
	Index       int    `json:"index"`
	ContainerID string `json:"container_id"`
	Image       string `json:"image"`
	Ports       Ports  `json:"ports,omitempty"`
	Degraded    string `json:"degraded,omitempty"` // why its launch's preparation was degraded: its death never counts
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
func (p Ports) MarshalJSON() ([]byte, error) { return json.Marshal(p.byKey()) }

// byKey is the ports keyed by port, as the wire shows them (never nil).
func (p Ports) byKey() map[string]messages.PortBinding {
	m := make(map[string]messages.PortBinding, len(p))
	for _, x := range p {
		m[x.Key] = x.PortBinding
	}
	return m
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
	// Kept: a failed provision's containers were kept (ProvisionFailed.Kept).
	Kept bool `json:"kept,omitempty"`
	// Close is the close in progress (deprovisioning): what becomes of the volumes.
	Close *CloseRequested `json:"close,omitempty"`
	// Closed is the closed receipt (status closed): the retention record, if any.
	Closed *ClosedEv `json:"closed,omitempty"`
	// Desired are the custom domains a reconcile gave the lease (reconcile_domains.go).
	Desired *DomainsDesired `json:"desired_domains,omitempty"`
	// FredLayout: adopted from fred v0.13 with nested VOLUME subdirectories
	// (Adopted.FredLayout); every launch first unnests them, idempotently.
	FredLayout bool `json:"fred_layout,omitempty"`
	// FredScratch: fred's diskless instances' volumes (Adopted.FredScratch).
	FredScratch []string `json:"fred_scratch,omitempty"`
	// LastAt is the time of the latest event applied: the floor of the lease's
	// clock after a restart (clock.go), so a wall clock set back grants no
	// deadline more than it had left.
	LastAt time.Time `json:"last_at"`
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

func (s *State) instance(containerID string) (Instance, bool) {
	for _, inst := range s.Containers {
		if inst.ContainerID == containerID {
			return inst, true
		}
	}
	return Instance{}, false
}

// Load rebuilds a lease's state from its stream.
func Load(store supervisors.JournalStore, lease string) (*State, uint64, error) {
	return supervisors.Rebuild(store, Stream(lease), eventVersion, NewState, nil)
}

// Stream is the journal stream of a lease.
func Stream(lease string) string { return streamPrefix + lease }

// streamPrefix begins every lease's stream name.
const streamPrefix = "lease/"

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

// ClosedStreams keeps what the host's closed leases hold in state.db bounded:
// a lease closed before compactBefore keeps only a snapshot of its receipt
// (its journal compacted: the history went with the close), and one closed
// before forgetBefore (releases_max_age: until then the reconciler removes
// its late containers by the receipt) is deleted. keep holds the leases to
// leave alone (live, or with containers); at most max streams change a call.
// Both steps are fenced by the stream's last sequence: a lease admitted again
// meanwhile keeps its stream. A deleted stream stays retired: its UUID is
// never provisioned again.
func ClosedStreams(store *persistence.Store) func(compactBefore, forgetBefore time.Time, keep func(lease string) bool, max int) (compacted, forgotten int, err error) {
	return func(compactBefore, forgetBefore time.Time, keep func(string) bool, max int) (compacted, forgotten int, err error) {
		streams, err := store.Streams(streamPrefix)
		if err != nil {
			return 0, 0, err
		}
		for _, stream := range streams {
			id := strings.TrimPrefix(stream, streamPrefix)
			if compacted+forgotten >= max || keep(id) {
				continue
			}
			loaded, err := store.Load(stream)
			if err != nil {
				return compacted, forgotten, err
			}
			st, seq, err := Load(store, id)
			if err != nil {
				return compacted, forgotten, err
			}
			if seq == 0 || st.Status != Closed || st.LastAt.IsZero() {
				continue
			}
			switch {
			case st.LastAt.Before(forgetBefore):
				deleted, err := store.RetireStream(stream, seq) // unless written since; the UUID stays used
				if err != nil {
					return compacted, forgotten, err
				}
				if deleted {
					forgotten++
				}
			case st.LastAt.Before(compactBefore) && len(loaded.Events) > 0:
				data, err := json.Marshal(st)
				if err == nil {
					err = store.SaveSnapshot(stream, persistence.Snapshot{Seq: seq, V: eventVersion, At: st.LastAt, Data: data})
				}
				if err != nil {
					return compacted, forgotten, err
				}
				compacted++
			}
		}
		return compacted, forgotten, nil
	}
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

// AdoptedEvent is the first event of an adopted fred v0.13 lease's stream
// (written by the takeover's adoption, never by the actor).
func AdoptedEvent(e Adopted) persistence.Event { return event(EvAdopted, e.At, e) }
