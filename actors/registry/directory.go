package registry

import (
	"maps"
	"slices"
	"strings"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/berth-dev/berth/messages"
	"github.com/berth-dev/berth/persistence"
)

// Status is where a lease's entry is in the registry's directory, one per entry:
//
//	(none) | closed ── admission, restore, start: spawn ──▶ admitted
//	                   └ its predecessor still stops ──▶ respawning ── terminated: spawn ──▶ admitted
//	admitted | maintaining ── a report of its admission ──▶ reported
//	reported ── maintain ──▶ maintaining;  reported "failed" ── replacing admission ──▶ admitted
//	admitted | reported | maintaining ── deprovision ──▶ closing ── lease.closed journaled ──▶ closed
//	closed ── terminated ──▶ (none)
//	admitted | reported | maintaining | closing ── terminated past its restart limit ──▶ stopped
//	respawning | closing with no actor ── its spawn refused, no predecessor to wait for ──▶ stopped
//	stopped ── retry, deprovision: spawn ──▶ admitted | reported
//
// Its last report and the status the transition ring shows are data beside it.
type Status string

const (
	Admitted    Status = "admitted"    // its actor runs; no report of its current admission yet
	Reported    Status = "reported"    // its actor reported on its current admission
	Maintaining Status = "maintaining" // a restart or update was forwarded: no replacement until it reports
	Closing     Status = "closing"     // a deprovision was forwarded: no re-admission until it settles
	Closed      Status = "closed"      // lease.closed is journaled; its actor is stopping
	Respawning  Status = "respawning"  // its spawn was refused: a predecessor still stops, or spawnFailed settles it
	Stopped     Status = "stopped"     // its actor stopped past its restart limit: shown unknown, reservation kept
)

// untold is the shown status of a lease this registry incarnation found at
// start (or restored): its first report only says where it is, no transition.
const untold = "?"

// entry is one lease the registry knows about; its spec is the State's.
type entry struct {
	status Status
	pid    *actor.PID // its actor (a respawning entry's: the predecessor's)
	report messages.LeaseReport
	shown  string // the status the transition ring last recorded ("": admitted here, none yet)
	closes int    // deprovisions forwarded to its actor that it has not refused (CloseDropped)
}

// Directory is the one state the registry decides on: the journaled State
// (live specs, the admissions counter, retention records), every lease's
// entry, the pool (folded from the State, plus the reservations of queued
// admissions) and the retention ledger. Only the actor's runner changes it.
type Directory struct {
	set       *Settings
	St        *State
	Pool      *Pool
	Retaining map[string]int64 // closes that decided to retain, by lease: their footprint (MB)
	entries   map[string]*entry
	Ready     bool // startup recovery finished: accounting is whole
	// claiming are the custom domains of reconciles their lease has not answered yet.
	claiming map[string][]map[string]string
	pinRefs  *refCounts // the image references the State pins, counted (nil: not since it changed)
}

// newDirectory is the directory of st, its pool folded from it, no entries yet.
func newDirectory(set *Settings, st *State) *Directory {
	d := &Directory{set: set, St: st, Pool: NewPool(set.Totals, set.TenantQuota), Retaining: map[string]int64{},
		entries: map[string]*entry{}}
	d.sync(st.Sorted()...)
	d.sync(slices.Collect(maps.Keys(st.Retentions))...)
	return d
}

// fold is the Journal's Fold: apply the event, then bring the pool in line.
func (d *Directory) fold(st *State, ev persistence.Event) error {
	touched, err := st.apply(ev)
	d.sync(touched...)
	return err
}

// sync derives the pool (and the ledger) of ids from the State: a live lease
// holds its need, an active or reaping record its disk (a restoring one is
// counted by its destination's reservation).
func (d *Directory) sync(ids ...string) {
	d.pinRefs = nil // image references pinned, counted again when next asked (images.go)
	for _, id := range ids {
		if spec := d.St.Leases[id]; spec != nil {
			d.Pool.Set(id, spec.Tenant, Need(spec))
		} else if id != "" {
			d.Pool.Release(id)
			delete(d.Retaining, id)
		}
		if r := d.St.Retentions[id]; r != nil && r.Status != RetentionRestoring {
			d.Pool.Set(retainedKey(id), "", Resources{DiskMB: r.Record.DiskMB()})
		} else if id != "" {
			d.Pool.Release(retainedKey(id))
		}
	}
}

// lingeringPrefix keys the reservation a closed lease's remaining containers hold.
const lingeringPrefix = "lingering:"

func lingeringKey(leaseID string) string { return lingeringPrefix + leaseID }

// lingeringLeases are the closed leases whose containers hold the pool, sorted.
func (d *Directory) lingeringLeases() []string {
	var ids []string
	for key := range d.Pool.byLease {
		if id, ok := strings.CutPrefix(key, lingeringPrefix); ok {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

// retainedKey is a record's entry in the pool (disk only, no tenant quota).
func retainedKey(leaseID string) string { return "retained:" + leaseID }

// apply runs a directory change of a decision.
func (d *Directory) apply(fx Effect) {
	switch fx := fx.(type) {
	case Claim:
		d.claim(fx)
	case Unclaim:
		d.unclaim(fx)
	case Move:
		if e := d.entries[fx.Lease]; e != nil && fx.To != "" {
			if e.status = fx.To; fx.To == Stopped {
				e.pid = nil
			}
		} else {
			delete(d.entries, fx.Lease)
		}
	case Report:
		if e := d.entries[fx.Report.Lease]; e != nil {
			e.report = fx.Report
		}
	case Note:
		if e := d.entries[fx.Lease]; e != nil {
			e.shown = fx.To
		}
	case Reserve:
		if fx.Use == nil {
			d.Pool.Release(fx.Lease)
		} else {
			d.Pool.Set(fx.Lease, fx.Use.tenant, fx.Use.use)
		}
	case Retain:
		if fx.MB == 0 {
			delete(d.Retaining, fx.Lease)
		} else {
			d.Retaining[fx.Lease] = fx.MB
		}
	case CloseSent:
		if e := d.entries[fx.Lease]; e != nil {
			e.closes += fx.N
		}
	}
}

// spawned records a Spawn's outcome: its actor runs (admitted, or reported when
// its last report is already of this admission), or no actor could be spawned
// (respawning, until spawnFailed decides whether a predecessor still stops).
func (d *Directory) spawned(s Spawn, pid *actor.PID) {
	id := s.Spec.Lease
	e := d.entries[id]
	if e == nil {
		e = &entry{shown: untold}
		d.entries[id] = e
	}
	if s.Admitted && e.shown == untold {
		e.shown = ""
	}
	if pid == nil {
		if e.status == Respawning {
			e.pid = nil // its predecessor's Terminated spawned it: none left to wait for
		}
		e.status = Respawning // until spawnFailed settles it
		return
	}
	e.pid = pid
	if e.status = Admitted; e.report.Admission == s.Spec.Admission {
		e.status = Reported
	}
}

// actorOf is the lease whose actor pid is (named lease-<uuid>). A lease's next
// actor reuses the name as soon as its predecessor left the process registry,
// maybe before the predecessor's Terminated arrives: the PID itself (the one
// spawned, which Terminated carries) tells them apart.
func (d *Directory) actorOf(pid *actor.PID) (string, *entry) {
	id := pid.Id[strings.LastIndex(pid.Id, "/lease-")+len("/lease-"):]
	if e := d.entries[id]; e != nil && e.pid == pid {
		return id, e
	}
	return "", nil
}

// reach is why a command cannot be handed to the lease's actor (nil: it can).
func (d *Directory) reach(e *entry, busy func(*actor.PID) bool) error {
	switch {
	case e != nil && (e.status == Stopped || e.status == Respawning):
		return messages.Refuse(messages.ErrUnavailable, "lease actor is being recovered")
	case e == nil || e.status == Closed || e.pid == nil:
		return messages.Refuse(messages.ErrNotFound, "lease not found")
	case busy != nil && busy(e.pid):
		return messages.Refuse(messages.ErrBusy, "lease is busy, retry later")
	}
	return nil
}

// live is a lease's entry and spec unless it is unknown or closed.
func (d *Directory) live(id string) (*entry, bool) {
	e := d.entries[id]
	return e, e != nil && e.status != Closed && d.St.Leases[id] != nil
}
