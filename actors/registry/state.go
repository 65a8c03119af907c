package registry

import (
	"encoding/json"
	"fmt"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/berth-dev/berth/actors/lease"
	"github.com/berth-dev/berth/messages"
	"github.com/berth-dev/berth/persistence"
)

// Stream is the registry's journal stream.
const Stream = "registry"

// Registry events, version 1.
const (
	EvLeaseAdmitted = "lease.admitted" // a lease (or a re-provision of a failed one, or a restore) with its frozen spec
	EvLeaseClosed   = "lease.closed"   // the lease's closed receipt is journaled; its reservation is released
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

// State is the registry's durable knowledge: every live lease's latest admitted
// spec. The pool is derived from it.
type State struct {
	Leases     map[string]*lease.Spec `json:"leases"`
	Admissions uint64                 `json:"admissions"` // last admission number handed out
	Retentions map[string]*Retention  `json:"retentions,omitempty"`
}

func newState() *State {
	return &State{Leases: map[string]*lease.Spec{}, Retentions: map[string]*Retention{}}
}

// Apply folds one registry event into the state.
func (s *State) Apply(ev persistence.Event) error {
	if ev.V != eventVersion {
		return fmt.Errorf("event %s: version %d not supported (this berthd reads %d)", ev.Type, ev.V, eventVersion)
	}
	switch ev.Type {
	case EvLeaseAdmitted:
		var e leaseAdmitted
		if err := persistence.DecodeValid(ev.Data, &e); err != nil || e.Spec == nil || e.Spec.Lease == "" {
			return fmt.Errorf("event %s: malformed", ev.Type)
		}
		if e.Spec.Admission <= s.Admissions {
			return fmt.Errorf("event %s: admission %d not after %d", ev.Type, e.Spec.Admission, s.Admissions)
		}
		if r := e.Spec.Restore; r != nil {
			// The claim of the source record is the same event as the admission.
			rec := s.Retentions[r.From]
			if rec == nil || rec.Status != RetentionActive {
				return fmt.Errorf("event %s: restore of %s, which is not an active retention", ev.Type, r.From)
			}
			rec.Status, rec.Dest = RetentionRestoring, e.Spec.Lease
		}
		s.Leases[e.Spec.Lease] = e.Spec
		s.Admissions = e.Spec.Admission
	case EvLeaseClosed:
		var e leaseClosed
		if err := persistence.DecodeValid(ev.Data, &e); err != nil {
			return fmt.Errorf("event %s: %w", ev.Type, err)
		}
		if cur, ok := s.Leases[e.Lease]; ok && cur.Admission == e.Admission {
			delete(s.Leases, e.Lease)
		}
		if e.Retention != nil {
			s.Retentions[e.Lease] = &Retention{Record: *e.Retention, Status: RetentionActive}
		}
		if rec := s.Retentions[e.Requarantined]; rec != nil && rec.Status == RetentionRestoring && rec.Dest == e.Lease {
			rec.Status, rec.Dest = RetentionActive, ""
		}
	case EvRetentionConsumed, EvRetentionReleased, EvRetentionReaping, EvRetentionDeleted, EvRetentionPruned:
		var e retentionEvent
		if err := persistence.DecodeValid(ev.Data, &e); err != nil {
			return fmt.Errorf("event %s: %w", ev.Type, err)
		}
		rec := s.Retentions[e.Lease]
		if rec == nil {
			return fmt.Errorf("event %s: no retention record of %s", ev.Type, e.Lease)
		}
		switch ev.Type {
		case EvRetentionConsumed:
			if rec.Status != RetentionRestoring {
				return fmt.Errorf("event %s: record of %s is %s", ev.Type, e.Lease, rec.Status)
			}
			delete(s.Retentions, e.Lease)
		case EvRetentionReleased:
			if rec.Status != RetentionRestoring {
				return fmt.Errorf("event %s: record of %s is %s", ev.Type, e.Lease, rec.Status)
			}
			rec.Status, rec.Dest = RetentionActive, ""
		case EvRetentionReaping:
			if rec.Status != RetentionActive {
				return fmt.Errorf("event %s: record of %s is %s", ev.Type, e.Lease, rec.Status)
			}
			rec.Status, rec.Reason = RetentionReaping, e.Reason
		case EvRetentionDeleted:
			if rec.Status != RetentionReaping {
				return fmt.Errorf("event %s: record of %s is %s", ev.Type, e.Lease, rec.Status)
			}
			delete(s.Retentions, e.Lease)
		case EvRetentionPruned:
			if rec.Status != RetentionActive {
				return fmt.Errorf("event %s: record of %s is %s", ev.Type, e.Lease, rec.Status)
			}
			delete(s.Retentions, e.Lease)
		}
	default:
		return fmt.Errorf("event type %q unknown to this berthd", ev.Type)
	}
	return nil
}

// Sorted lists live lease IDs in UUID order.
func (s *State) Sorted() []string {
	out := make([]string, 0, len(s.Leases))
	for id := range s.Leases {
		out = append(out, id)
	}
	sort.Strings(out)
	return out
}

// LoadState rebuilds the registry's state from its stream; it also returns the
// stream's last sequence number.
func LoadState(store *persistence.Store) (*State, uint64, error) {
	l, err := store.Load(Stream)
	if err != nil {
		return nil, 0, fmt.Errorf("load registry: %w", err)
	}
	st := newState()
	if l.Snapshot != nil {
		if l.Snapshot.V != eventVersion {
			return nil, 0, fmt.Errorf("load registry: snapshot version %d not supported (this berthd reads %d)", l.Snapshot.V, eventVersion)
		}
		if err := persistence.DecodeValid(l.Snapshot.Data, st); err != nil {
			return nil, 0, fmt.Errorf("load registry: snapshot: %w", err)
		}
		if st.Leases == nil {
			st.Leases = map[string]*lease.Spec{}
		}
		if st.Retentions == nil {
			st.Retentions = map[string]*Retention{}
		}
	}
	for _, r := range l.Events {
		if err := st.Apply(r.Event); err != nil {
			return nil, 0, fmt.Errorf("load registry: seq %d: %w", r.Seq, err)
		}
	}
	return st, l.LastSeq, nil
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
	ids := make([]string, 0, len(streams))
	named := make(map[string]bool, len(streams))
	for _, s := range streams {
		id := s[len("lease/"):]
		ids = append(ids, id)
		named[id] = true
	}
	// The registry's own stream replays beside the lease streams (it names
	// which leases are live, needed only once all are replayed): at 10k leases
	// it is a fifth of the work, and serially it was a fifth of restart → healthy.
	var st *State
	var stSeq uint64
	var stErr error
	regDone := make(chan struct{})
	go func() {
		defer close(regDone)
		st, stSeq, stErr = LoadState(store)
	}()
	states, seqs, errs := replayLeases(store, ids)
	<-regDone
	if stErr != nil {
		return stErr
	}
	// A live lease without a stream still replays (to its initial state).
	var unnamed []string
	for _, id := range st.Sorted() {
		if !named[id] {
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

func admittedEvent(spec *lease.Spec, at time.Time) persistence.Event {
	data, _ := json.Marshal(leaseAdmitted{Spec: spec})
	return persistence.Event{Type: EvLeaseAdmitted, V: eventVersion, At: at, Data: data}
}

func closedEvent(m messages.LeaseClosed, at time.Time) persistence.Event {
	data, _ := json.Marshal(leaseClosed{Lease: m.Lease, Admission: m.Admission, Retention: m.Retention, Requarantined: m.Requarantined})
	return persistence.Event{Type: EvLeaseClosed, V: eventVersion, At: at, Data: data}
}

func retentionEv(typ, leaseID, reason string, at time.Time) persistence.Event {
	data, _ := json.Marshal(retentionEvent{Lease: leaseID, Reason: reason})
	return persistence.Event{Type: typ, V: eventVersion, At: at, Data: data}
}
