package lease

import (
	"bytes"
	"fmt"
	"unique"

	"github.com/berth-dev/berth/persistence"
)

// Load rebuilds a lease's state from its stream.
func Load(store *persistence.Store, lease string) (*State, uint64, error) {
	l, st, err := loadStream(store, lease)
	if err != nil {
		return nil, 0, err
	}
	for _, r := range l.Events {
		if err := st.Apply(r.Event); err != nil {
			return nil, 0, fmt.Errorf("load lease %s: seq %d: %w", lease, r.Seq, err)
		}
	}
	return st, l.LastSeq, nil
}

// loadStream reads lease's stream and the state its snapshot holds (a new one
// when there is none); the events after the snapshot are the caller's to apply.
func loadStream(store *persistence.Store, lease string) (persistence.Loaded, *State, error) {
	l, err := store.Load(Stream(lease))
	if err != nil {
		return l, nil, fmt.Errorf("load lease %s: %w", lease, err)
	}
	st := NewState()
	if snap := l.Snapshot; snap != nil {
		if snap.V != eventVersion {
			return l, nil, fmt.Errorf("load lease %s: snapshot version %d not supported (this berthd reads %d)", lease, snap.V, eventVersion)
		}
		if err := persistence.DecodeValid(snap.Data, st); err != nil {
			return l, nil, fmt.Errorf("load lease %s: snapshot: %w", lease, err)
		}
	}
	return l, st, nil
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
