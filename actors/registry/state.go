package registry

import (
	"fmt"
	"maps"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/berth-dev/berth/actors/lease"
	"github.com/berth-dev/berth/messages"
	"github.com/berth-dev/berth/persistence"
	"github.com/berth-dev/berth/supervisors"
)

// Stream is the registry's journal stream.
const Stream = "registry"

// Registry events, version 1.
const (
	EvLeaseAdmitted = "lease.admitted" // a lease (or a re-provision of a failed one, or a restore) with its frozen spec
	EvLeaseClosed   = "lease.closed"   // the lease's closed receipt is journaled; its reservation is released
	// EvClosedSettled: a reconciliation pass begun after these leases closed
	// (closedGrace after) listed none of their containers; what they held is
	// forgotten.
	EvClosedSettled = "closed.settled"
	// Retention records: a retaining close creates one (in lease.closed); a restore
	// claims it (in lease.admitted); these move it on.
	EvRetentionConsumed = "retention.consumed" // the restore committed: the data is the destination's
	EvRetentionReleased = "retention.released" // the restore failed before committing: active again
	EvRetentionReaping  = "retention.reaping"  // expired or evicted: its volumes are being destroyed (bytes still counted)
	EvRetentionDeleted  = "retention.deleted"  // every volume is gone
	EvRetentionPruned   = "retention.pruned"   // its volumes vanished out of band (orphan), confirmed over several sweeps
)

// Retention statuses.
const (
	RetentionActive    = "active"
	RetentionRestoring = "restoring"
	RetentionReaping   = "reaping"
)

// Retention is a retention record and where it is in its life.
type Retention struct {
	Record messages.RetentionRecord `json:"record"`
	Status string                   `json:"status"`
	Dest   string                   `json:"dest,omitempty"`   // restoring: the destination lease
	Reason string                   `json:"reason,omitempty"` // reaping: expired | evicted
}

type retentionEvent struct {
	Lease  string `json:"lease_uuid"`
	Reason string `json:"reason,omitempty"`
}

const eventVersion = 1

type leaseAdmitted struct {
	Spec *lease.Spec `json:"spec"`
}

type leaseClosed struct {
	Lease         string                    `json:"lease_uuid"`
	Admission     uint64                    `json:"admission"`
	Retention     *messages.RetentionRecord `json:"retention,omitempty"`
	Requarantined string                    `json:"requarantined,omitempty"`
}

type closedSettled struct {
	Leases []string `json:"leases"`
}

// ClosedUse is what a closed lease held: its late containers (a late create, a
// removal Docker refused) hold it again while a pass still lists them.
type ClosedUse struct {
	At       time.Time `json:"at"` // the close
	Tenant   string    `json:"tenant"`
	CPUMilli int64     `json:"cpu_milli,omitempty"`
	MemoryMB int64     `json:"memory_mb,omitempty"`
	DiskMB   int64     `json:"disk_mb,omitempty"`
}

func closedUseOf(spec *lease.Spec, at time.Time) *ClosedUse {
	n := Need(spec)
	return &ClosedUse{At: at, Tenant: spec.Tenant, CPUMilli: n.CPUMilli, MemoryMB: n.MemoryMB, DiskMB: n.DiskMB}
}

func (c *ClosedUse) resources() Resources { return Resources{c.CPUMilli, c.MemoryMB, c.DiskMB} }

// State is the registry's durable knowledge: every live lease's latest admitted
// spec, the retention records, and what each lease closed since a pass last
// saw it without containers held. The pool is derived from it (Directory.fold).
type State struct {
	Leases     map[string]*lease.Spec `json:"leases"`
	Admissions uint64                 `json:"admissions"` // last admission number handed out
	Retentions map[string]*Retention  `json:"retentions,omitempty"`
	Closed     map[string]*ClosedUse  `json:"closed,omitempty"`
}

func newState() *State {
	return &State{Leases: map[string]*lease.Spec{}, Retentions: map[string]*Retention{}, Closed: map[string]*ClosedUse{}}
}

// retentionMoves is each retention event's required record status and the
// status it moves the record to ("": the record is deleted).
var retentionMoves = map[string][2]string{
	EvRetentionConsumed: {RetentionRestoring, ""},
	EvRetentionReleased: {RetentionRestoring, RetentionActive},
	EvRetentionReaping:  {RetentionActive, RetentionReaping},
	EvRetentionDeleted:  {RetentionReaping, ""},
	EvRetentionPruned:   {RetentionActive, ""},
}

// Apply folds one registry event into the state.
func (s *State) Apply(ev persistence.Event) error {
	_, err := s.apply(ev)
	return err
}

// apply is Apply naming the leases whose reservation or retention record the
// event touched, so the registry's pool follows (Directory.fold).
func (s *State) apply(ev persistence.Event) ([]string, error) {
	if ev.V != eventVersion {
		return nil, fmt.Errorf("event %s: version %d not supported (this berthd reads %d)", ev.Type, ev.V, eventVersion)
	}
	switch ev.Type {
	case EvLeaseAdmitted:
		var e leaseAdmitted
		if err := persistence.DecodeValid(ev.Data, &e); err != nil || e.Spec == nil || e.Spec.Lease == "" {
			return nil, fmt.Errorf("event %s: malformed", ev.Type)
		}
		if e.Spec.Admission <= s.Admissions {
			return nil, fmt.Errorf("event %s: admission %d not after %d", ev.Type, e.Spec.Admission, s.Admissions)
		}
		touched := []string{e.Spec.Lease}
		if r := e.Spec.Restore; r != nil {
			// The claim of the source record is the same event as the admission.
			rec := s.Retentions[r.From]
			if rec == nil || rec.Status != RetentionActive {
				return nil, fmt.Errorf("event %s: restore of %s, which is not an active retention", ev.Type, r.From)
			}
			rec.Status, rec.Dest = RetentionRestoring, e.Spec.Lease
			touched = append(touched, r.From)
		}
		s.Leases[e.Spec.Lease] = e.Spec
		s.Admissions = e.Spec.Admission
		return touched, nil
	case EvLeaseClosed:
		var e leaseClosed
		if err := persistence.DecodeValid(ev.Data, &e); err != nil {
			return nil, fmt.Errorf("event %s: %w", ev.Type, err)
		}
		if cur, ok := s.Leases[e.Lease]; ok && cur.Admission == e.Admission {
			delete(s.Leases, e.Lease)
			s.Closed[e.Lease] = closedUseOf(cur, ev.At)
		}
		if e.Retention != nil {
			s.Retentions[e.Lease] = &Retention{Record: *e.Retention, Status: RetentionActive}
		}
		if rec := s.Retentions[e.Requarantined]; rec != nil && rec.Status == RetentionRestoring && rec.Dest == e.Lease {
			rec.Status, rec.Dest = RetentionActive, ""
		}
		return []string{e.Lease, e.Requarantined}, nil
	case EvClosedSettled:
		return nil, s.settle(ev)
	}
	move, ok := retentionMoves[ev.Type]
	if !ok {
		return nil, fmt.Errorf("event type %q unknown to this berthd", ev.Type)
	}
	var e retentionEvent
	if err := persistence.DecodeValid(ev.Data, &e); err != nil {
		return nil, fmt.Errorf("event %s: %w", ev.Type, err)
	}
	rec := s.Retentions[e.Lease]
	switch {
	case rec == nil:
		return nil, fmt.Errorf("event %s: no retention record of %s", ev.Type, e.Lease)
	case rec.Status != move[0]:
		return nil, fmt.Errorf("event %s: record of %s is %s", ev.Type, e.Lease, rec.Status)
	case move[1] == "":
		delete(s.Retentions, e.Lease)
	default:
		rec.Status, rec.Dest = move[1], ""
		if move[1] == RetentionReaping {
			rec.Reason = e.Reason
		}
	}
	return []string{e.Lease}, nil
}

// settle forgets what the closed leases of a closed.settled held; each must be
// remembered.
func (s *State) settle(ev persistence.Event) error {
	var e closedSettled
	if err := persistence.DecodeValid(ev.Data, &e); err != nil {
		return fmt.Errorf("event %s: %w", ev.Type, err)
	}
	for _, id := range e.Leases {
		if s.Closed[id] == nil {
			return fmt.Errorf("event %s: %s is not a closed lease remembered", ev.Type, id)
		}
	}
	for _, id := range e.Leases {
		delete(s.Closed, id)
	}
	return nil
}

// Sorted lists live lease IDs in UUID order.
func (s *State) Sorted() []string { return slices.Sorted(maps.Keys(s.Leases)) }

// LoadState rebuilds the registry's state from its stream; it also returns the
// stream's last sequence number.
func LoadState(store supervisors.JournalStore) (*State, uint64, error) {
	st := newState()
	seq, err := supervisors.Replay(store, Stream, eventVersion, st, st.repair)
	return st, seq, err
}

// repair gives a decoded snapshot the maps JSON left unset.
func (s *State) repair() {
	if s.Leases == nil {
		s.Leases = map[string]*lease.Spec{}
	}
	if s.Retentions == nil {
		s.Retentions = map[string]*Retention{}
	}
	if s.Closed == nil {
		s.Closed = map[string]*ClosedUse{}
	}
}

// Replayed is what startup's verification replayed, handed to the actors' first
// start so that a start reads every journal once: the registry's state (taken by
// the registry's first Started) and each live lease's (Leases). Each is taken
// once; a restarted actor loads from the store. Nothing writes a journal before
// the actor owning it started, so what is handed over is what it would load.
type Replayed struct {
	Leases *lease.Preloaded

	mu  sync.Mutex
	st  *State
	seq uint64
}

// NewReplayed returns an empty Replayed.
func NewReplayed() *Replayed { return &Replayed{Leases: lease.NewPreloaded()} }

// takeState hands over the registry's state once; a nil Replayed holds nothing.
func (r *Replayed) takeState() (*State, uint64, bool) {
	if r == nil {
		return nil, 0, false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	st, seq := r.st, r.seq
	r.st = nil
	return st, seq, st != nil
}

// Verify loads the registry and every lease stream it names, the way the actors
// will, so a journal berthd cannot read refuses startup before anything runs.
func Verify(store *persistence.Store) error { return VerifyInto(store, nil) }

// VerifyInto is Verify that keeps what it replayed in into (when not nil) for
// the actors' first start. The lease streams are replayed on every CPU (read
// transactions run concurrently); the error reported is the first in stream
// order, as a serial replay would report it.
func VerifyInto(store *persistence.Store, into *Replayed) error {
	streams, err := store.Streams("lease/")
	if err != nil {
		return fmt.Errorf("list lease streams: %w", err)
	}
	ids := make([]string, len(streams)) // sorted, as the streams are
	for i, s := range streams {
		ids[i] = s[len("lease/"):]
	}
	// The registry's own stream replays beside the lease streams (it names
	// which leases are live, needed only once all are replayed): at 10k leases
	// it is a fifth of the work, and serially it was a fifth of restart → healthy.
	var st *State
	var stSeq uint64
	loaded := make(chan error, 1)
	go func() {
		var err error
		st, stSeq, err = LoadState(store)
		loaded <- err
	}()
	states, seqs, errs := replayLeases(store, ids)
	if err := <-loaded; err != nil {
		return err
	}
	// A live lease without a stream still replays (to its initial state).
	var unnamed []string
	for _, id := range st.Sorted() {
		if _, named := slices.BinarySearch(ids, id); !named {
			unnamed = append(unnamed, id)
		}
	}
	if len(unnamed) > 0 {
		s2, q2, e2 := replayLeases(store, unnamed)
		ids, states, seqs, errs = append(ids, unnamed...), append(states, s2...), append(seqs, q2...), append(errs, e2...)
	}
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	if into != nil {
		for i, id := range ids {
			if _, live := st.Leases[id]; live {
				into.Leases.Put(id, states[i], seqs[i])
			}
		}
		into.mu.Lock()
		into.st, into.seq = st, stSeq
		into.mu.Unlock()
	}
	return nil
}

// replayLeases loads each lease stream of ids on every CPU (read transactions
// run concurrently); results and errors are in ids' order.
func replayLeases(store *persistence.Store, ids []string) ([]*lease.State, []uint64, []error) {
	states, seqs, errs := make([]*lease.State, len(ids)), make([]uint64, len(ids)), make([]error, len(ids))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(ids)) {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < len(ids); i = int(next.Add(1)) - 1 {
				states[i], seqs[i], errs[i] = lease.Load(store, ids[i])
			}
		})
	}
	wg.Wait()
	return states, seqs, errs
}

// AdmittedEvent is the journal event of an admission (also written by a
// takeover's adoption, which admits fred v0.13's leases as they ran).
func AdmittedEvent(spec *lease.Spec, at time.Time) persistence.Event {
	return supervisors.NewEvent(EvLeaseAdmitted, eventVersion, at, leaseAdmitted{Spec: spec})
}

// ClosedEvent is the journal event of a close (also written by a takeover's
// adoption: a lease fred v0.13 closed with its data retained).
func ClosedEvent(m messages.LeaseClosed, at time.Time) persistence.Event {
	return supervisors.NewEvent(EvLeaseClosed, eventVersion, at,
		leaseClosed{Lease: m.Lease, Admission: m.Admission, Retention: m.Retention, Requarantined: m.Requarantined})
}

// ReapingEvent is the journal event that hands a retention record to the
// reaper (also written by a takeover's adoption: a record fred v0.13 was reaping).
func ReapingEvent(leaseID, reason string, at time.Time) persistence.Event {
	return retentionEv(EvRetentionReaping, leaseID, reason, at)
}

func closedSettledEvent(leases []string, at time.Time) persistence.Event {
	return supervisors.NewEvent(EvClosedSettled, eventVersion, at, closedSettled{Leases: leases})
}

func retentionEv(typ, leaseID, reason string, at time.Time) persistence.Event {
	return supervisors.NewEvent(typ, eventVersion, at, retentionEvent{Lease: leaseID, Reason: reason})
}
