package lease_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/berth-dev/berth/actors/lease"
	"github.com/berth-dev/berth/messages"
	"github.com/berth-dev/berth/persistence"
)

// Unit tests of the lease state machine (machine.go, apply.go): Apply against the diagram at
// the top of machine.go, fail_count, the closed → new admission reset, the terminal
// budget rules, and Load (snapshot + later events) against a full replay.

// t0 anchors every journal of these tests.
var t0 = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

func at(d time.Duration) time.Time { return t0.Add(d) }

// mkEvent encodes a payload as a version-1 journal event, as the actor does.
func mkEvent(typ string, when time.Time, p any) persistence.Event {
	data, err := json.Marshal(p)
	if err != nil {
		panic(fmt.Sprintf("encode %s: %v", typ, err)) // test payloads always encode
	}
	return persistence.Event{Type: typ, V: 1, At: when, Data: data}
}

func evStarted(admission, gen uint64, when time.Time) persistence.Event {
	return mkEvent(lease.EvProvisionStarted, when, lease.ProvisionStarted{Admission: admission, Generation: gen,
		OperationID: fmt.Sprintf("op-%d-%d", admission, gen), At: when, Deadline: when.Add(10 * time.Minute)})
}

func evSucceeded(gen uint64, when time.Time) persistence.Event {
	return mkEvent(lease.EvProvisionSucceeded, when, lease.ProvisionSucceeded{Stamp: lease.Stamp{Generation: gen, At: when},
		Containers: []lease.Instance{{Service: "app", Index: 0, ContainerID: fmt.Sprintf("%064d", gen), Image: unitImage,
			Ports: lease.Ports{{Key: "8080/tcp", PortBinding: messages.PortBinding{HostIP: "127.0.0.1", HostPort: "32768"}}}}}})
}

func evProvisionFailed(gen uint64, when time.Time) persistence.Event {
	return mkEvent(lease.EvProvisionFailed, when, lease.ProvisionFailed{Stamp: lease.Stamp{Generation: gen, At: when},
		Cause: lease.Cause{Reason: messages.ReasonImagePullFailed, Message: "image could not be pulled"}})
}

func evFailing(gen uint64, when time.Time, counted bool) persistence.Event {
	return mkEvent(lease.EvRuntimeFailing, when, lease.RuntimeFailing{Stamp: lease.Stamp{Generation: gen, At: when},
		ContainerID: fmt.Sprintf("%064d", gen), Service: "app", ExitCode: 1, Counted: counted})
}

func evRuntimeFailed(gen uint64, when time.Time) persistence.Event {
	return mkEvent(lease.EvRuntimeFailed, when, lease.RuntimeFailed{Stamp: lease.Stamp{Generation: gen, At: when},
		Cause: lease.Cause{Reason: messages.ReasonContainerExited, Message: "container exited unexpectedly"}})
}

func evCloseRequested(admission uint64, when time.Time) persistence.Event {
	return mkEvent(lease.EvCloseRequested, when, lease.CloseRequested{Admission: admission, At: when})
}

func evClosed(admission uint64, when time.Time) persistence.Event {
	return mkEvent(lease.EvClosed, when, lease.ClosedEv{Admission: admission, At: when})
}

// replay applies events to a new state, failing the test on any refusal.
func replay(t *testing.T, events ...persistence.Event) *lease.State {
	t.Helper()
	st := lease.NewState()
	for i, ev := range events {
		if err := st.Apply(ev); err != nil {
			t.Fatalf("event %d (%s) refused while building the fixture: %v", i, ev.Type, err)
		}
	}
	return st
}

// stateJSON is a state's full encoding: every field of State is exported and tagged.
func stateJSON(t *testing.T, st *lease.State) string {
	t.Helper()
	b, err := json.Marshal(st)
	if err != nil {
		t.Fatalf("encode state: %v", err)
	}
	return string(b)
}

// statusJournals reach each status with admission 1, generation 1 (a maintenance
// in flight: target generation 2, compensation 3).
func statusJournals() map[lease.Status][]persistence.Event {
	ready := []persistence.Event{evStarted(1, 1, at(0)), evSucceeded(1, at(time.Minute))}
	return map[lease.Status][]persistence.Event{
		lease.Reserved:       nil,
		lease.Provisioning:   {evStarted(1, 1, at(0))},
		lease.Ready:          ready,
		lease.Failing:        append(slices.Clone(ready), evFailing(1, at(2*time.Minute), true)),
		lease.Failed:         {evStarted(1, 1, at(0)), evProvisionFailed(1, at(time.Minute))},
		lease.Restarting:     append(slices.Clone(ready), evMaintenanceRequested(lease.KindRestart, mID1, 1, 2, at(2*time.Minute))),
		lease.Updating:       append(slices.Clone(ready), evMaintenanceRequested(lease.KindUpdate, mID1, 1, 2, at(2*time.Minute))),
		lease.Deprovisioning: {evStarted(1, 1, at(0)), evCloseRequested(1, at(time.Minute))},
		lease.Closed:         {evStarted(1, 1, at(0)), evCloseRequested(1, at(time.Minute)), evClosed(1, at(2*time.Minute))},
	}
}

// evMaintenanceRequested admits a maintenance of the ready release v1 (source
// generation sourceGen) under target generation gen, compensation gen+1.
func evMaintenanceRequested(kind, id string, sourceGen, gen uint64, when time.Time) persistence.Event {
	return mkEvent(lease.EvMaintenanceStarted, when, lease.MaintenanceStarted{
		Maintenance: lease.Maintenance{ID: id, Kind: kind, AdmittedAt: when, At: when, Deadline: when.Add(10 * time.Minute),
			SourceVersion: 1, SourceStatus: lease.Ready, SourceGen: sourceGen, Generation: gen, CompensateGen: gen + 1},
		Release: lease.Release{Kind: kind, MaintenanceID: id, CreatedAt: when}})
}

var allStatuses = []lease.Status{lease.Reserved, lease.Provisioning, lease.Ready, lease.Failing, lease.Failed,
	lease.Restarting, lease.Updating, lease.Deprovisioning, lease.Closed}

// allEventTypes is every event type of the lease stream.
var allEventTypes = []string{lease.EvProvisionStarted, lease.EvReleasePinned, lease.EvProvisionSucceeded,
	lease.EvProvisionFailed, lease.EvRuntimeFailing, lease.EvRuntimeFailed, lease.EvCohortDiverged,
	lease.EvMaintenanceStarted, lease.EvMaintenanceDone, lease.EvMaintenanceRestored, lease.EvMaintenanceFailed,
	lease.EvReleasesPruned, lease.EvCloseRequested, lease.EvClosed}

// diagramJournals reach each status with a history that holds a disposable
// release wherever the status can hold one: admission 1 failed (v1 failed), and
// admission 2 (v2, generation 2) is the lease now; restarting and updating have a
// maintenance target v3 (generation 3, compensation 4) deploying.
func diagramJournals() map[lease.Status]*journal {
	base := func() *journal {
		return newJournal(dspec(1)).provision(dspec(1)).provisionFails().provision(dspec(2)).pin()
	}
	return map[lease.Status]*journal{
		lease.Reserved:       newJournal(dspec(1)),
		lease.Provisioning:   base(),
		lease.Ready:          base().ready(),
		lease.Failing:        base().ready().dies(true),
		lease.Failed:         base().provisionFails(),
		lease.Restarting:     base().ready().restart(mID1),
		lease.Updating:       base().ready().update(mID1, service("app", imgApp2, 1)),
		lease.Deprovisioning: base().close(),
		lease.Closed:         base().close().closed(),
	}
}

// Candidate kinds beyond the plain event types: provision.started as a new
// admission (with its release) and as a retry (the journal's admission, the next
// generation, no release); maintenance.requested as a restart and as an update.
const (
	kStarted = "provision.started (new admission)"
	kRetry   = "provision.started (retry)"
	kRestart = "maintenance.requested (restart)"
	kUpdate  = "maintenance.requested (update)"
)

var diagramKinds = []string{kStarted, kRetry, lease.EvReleasePinned, lease.EvProvisionSucceeded, lease.EvProvisionFailed,
	lease.EvRuntimeFailing, lease.EvRuntimeFailed, lease.EvCohortDiverged, kRestart, kUpdate, lease.EvMaintenanceDone,
	lease.EvMaintenanceRestored, lease.EvMaintenanceFailed, lease.EvReleasesPruned, lease.EvCloseRequested, lease.EvClosed}

// candidate is the natural event of a kind for st: its generation, admission and
// maintenance (or, without one, those a maintenance admitted now would have); the
// next admission and generation for a start; the oldest release for a prune.
func candidate(st *lease.State, kind string) persistence.Event {
	when := at(24 * time.Hour) // after every fixture
	gen := max(st.LastGeneration, st.Generation) + 1
	m := st.Maintenance
	if m == nil {
		m = &lease.Maintenance{ID: mID1, Kind: lease.KindRestart, SourceGen: st.Generation, Generation: gen, CompensateGen: gen + 1}
	}
	services := dspec(1).Services
	switch kind {
	case kStarted:
		spec := dspec(st.Admission + 1)
		rel := releaseOf(spec, when)
		return mkEvent(lease.EvProvisionStarted, when, lease.ProvisionStarted{Admission: spec.Admission, Generation: gen,
			OperationID: spec.OperationID, At: when, Deadline: when.Add(10 * time.Minute), Release: &rel})
	case kRetry:
		// From reserved (no admission yet) this is a first start in the older
		// journal form, without a release payload.
		return mkEvent(lease.EvProvisionStarted, when, lease.ProvisionStarted{Admission: max(st.Admission, 1), Generation: gen,
			OperationID: st.OperationID, At: when, Deadline: when.Add(10 * time.Minute)})
	case lease.EvReleasePinned:
		v := 1
		if l := st.Latest(); l != nil {
			v = l.Version
		}
		return mkEvent(kind, when, lease.ReleasePinned{Version: v, Images: pinsOf(services)})
	case lease.EvProvisionSucceeded:
		return mkEvent(kind, when, lease.ProvisionSucceeded{Stamp: lease.Stamp{Generation: st.Generation, At: when}, Containers: cohortOf(services, st.Generation)})
	case lease.EvProvisionFailed:
		return mkEvent(kind, when, lease.ProvisionFailed{Stamp: lease.Stamp{Generation: st.Generation, At: when}, Cause: lease.Cause{Reason: messages.ReasonImagePullFailed}})
	case lease.EvRuntimeFailing:
		return mkEvent(kind, when, lease.RuntimeFailing{Stamp: lease.Stamp{Generation: st.Generation, At: when}, ContainerID: ctrID("app", 0, st.Generation),
			Service: "app", ExitCode: 1, Counted: true})
	case lease.EvRuntimeFailed:
		return mkEvent(kind, when, lease.RuntimeFailed{Stamp: lease.Stamp{Generation: st.Generation, At: when}, Cause: lease.Cause{Reason: messages.ReasonContainerExited}})
	case lease.EvCohortDiverged:
		return mkEvent(kind, when, lease.CohortDiverged{Stamp: lease.Stamp{Generation: st.Generation, At: when}, Message: "unexpected instance app/1"})
	case kRestart, kUpdate:
		k := lease.KindRestart
		if kind == kUpdate {
			k = lease.KindUpdate
		}
		target := lease.Release{Kind: k, MaintenanceID: mID3, CreatedAt: when, Services: services}
		if r := st.Running(); r != nil {
			target.Manifest, target.Items, target.Services = r.Manifest, r.Items, r.Services
		}
		return mkEvent(lease.EvMaintenanceStarted, when, lease.MaintenanceStarted{Maintenance: lease.Maintenance{ID: mID3, Kind: k,
			AdmittedAt: when, At: when, Deadline: when.Add(10 * time.Minute), SourceStatus: lease.Ready, SourceGen: st.Generation,
			Source: st.Containers, Generation: gen, CompensateGen: gen + 1}, Release: target})
	case lease.EvMaintenanceDone:
		return mkEvent(kind, when, lease.MaintenanceDone{ID: m.ID, Stamp: lease.Stamp{Generation: m.Generation, At: when}, Containers: cohortOf(services, m.Generation)})
	case lease.EvMaintenanceRestored:
		return mkEvent(kind, when, lease.MaintenanceRestored{ID: m.ID, Stamp: lease.Stamp{Generation: m.CompensateGen, At: when},
			Containers: cohortOf(services, m.CompensateGen), Compensated: true, Cause: lease.Cause{Reason: messages.ReasonRestartFailed}})
	case lease.EvMaintenanceFailed:
		return mkEvent(kind, when, lease.MaintenanceFailed{ID: m.ID, Stamp: lease.Stamp{Generation: m.Generation, At: when}, Cause: lease.Cause{Reason: messages.ReasonRestartFailed}})
	case lease.EvReleasesPruned:
		return mkEvent(kind, when, lease.ReleasesPruned{Versions: []int{1}})
	case lease.EvCloseRequested:
		return mkEvent(kind, when, lease.CloseRequested{Admission: max(st.Admission, 1), At: when})
	case lease.EvClosed:
		return mkEvent(kind, when, lease.ClosedEv{Admission: st.Admission, At: when})
	}
	panic("unknown candidate kind " + kind)
}

// diagram is the transition table of Apply: from → candidate → to. Beyond the
// diagram drawn at the top of machine.go it shows the self-loops: a retry of the
// provision in flight, the pins of a deploying release, a prune of disposable
// history (from any status that holds some), and a repeated close intent ("a
// repeated intent changes nothing"). Nothing else is permitted: in particular a
// re-provision of a failed or failing lease is a new admission — a
// provision.started of its own admission is refused — and a closed lease takes no
// event at all (the close fences its UUID for good).
var diagram = map[lease.Status]map[string]lease.Status{
	lease.Reserved: {kStarted: lease.Provisioning, kRetry: lease.Provisioning, lease.EvCloseRequested: lease.Deprovisioning},
	lease.Provisioning: {kRetry: lease.Provisioning, lease.EvReleasePinned: lease.Provisioning,
		lease.EvProvisionSucceeded: lease.Ready, lease.EvProvisionFailed: lease.Failed,
		lease.EvReleasesPruned: lease.Provisioning, lease.EvCloseRequested: lease.Deprovisioning},
	lease.Ready: {lease.EvRuntimeFailing: lease.Failing, lease.EvCohortDiverged: lease.Failed, kRestart: lease.Restarting,
		kUpdate: lease.Updating, lease.EvReleasesPruned: lease.Ready, lease.EvCloseRequested: lease.Deprovisioning},
	lease.Failing: {kStarted: lease.Provisioning, lease.EvRuntimeFailed: lease.Failed, kRestart: lease.Restarting,
		kUpdate: lease.Updating, lease.EvReleasesPruned: lease.Failing, lease.EvCloseRequested: lease.Deprovisioning},
	lease.Failed: {kStarted: lease.Provisioning, kRestart: lease.Restarting, kUpdate: lease.Updating,
		lease.EvReleasesPruned: lease.Failed, lease.EvCloseRequested: lease.Deprovisioning},
	lease.Restarting: {lease.EvReleasePinned: lease.Restarting, lease.EvMaintenanceDone: lease.Ready,
		lease.EvMaintenanceRestored: lease.Ready, lease.EvMaintenanceFailed: lease.Failed,
		lease.EvReleasesPruned: lease.Restarting, lease.EvCloseRequested: lease.Deprovisioning},
	lease.Updating: {lease.EvReleasePinned: lease.Updating, lease.EvMaintenanceDone: lease.Ready,
		lease.EvMaintenanceRestored: lease.Ready, lease.EvMaintenanceFailed: lease.Failed,
		lease.EvReleasesPruned: lease.Updating, lease.EvCloseRequested: lease.Deprovisioning},
	lease.Deprovisioning: {lease.EvClosed: lease.Closed, lease.EvCloseRequested: lease.Deprovisioning,
		lease.EvReleasesPruned: lease.Deprovisioning},
	lease.Closed: {},
}

// TestApply_TransitionTable_PermitsExactlyTheDiagram applies every candidate from
// every status: the diagram's transitions land on their target; every other
// (status, event) pair is refused with an error and leaves the state exactly as it
// was. The candidates cover every event type.
func TestApply_TransitionTable_PermitsExactlyTheDiagram(t *testing.T) {
	covered := map[string]bool{}
	journals := diagramJournals()
	for _, from := range allStatuses {
		for _, kind := range diagramKinds {
			t.Run(fmt.Sprintf("%s/%s", from, kind), func(t *testing.T) {
				st := replay(t, journals[from].evs...)
				if st.Status != from {
					t.Fatalf("fixture reached %s, want %s", st.Status, from)
				}
				ev := candidate(st, kind)
				covered[ev.Type] = true
				before := stateJSON(t, st)
				err := st.Apply(ev)
				to, permitted := diagram[from][kind]
				switch {
				case permitted && err != nil:
					t.Fatalf("%s → %s is in the diagram but was refused: %v", from, kind, err)
				case permitted && st.Status != to:
					t.Fatalf("%s → %s landed on %s, want %s", from, kind, st.Status, to)
				case !permitted && err == nil:
					t.Fatalf("%s → %s is not in the diagram but was applied (now %s)", from, kind, st.Status)
				case !permitted && stateJSON(t, st) != before:
					t.Fatalf("refused %s → %s changed the state:\nbefore %s\nafter  %s", from, kind, before, stateJSON(t, st))
				}
			})
		}
	}
	for _, typ := range allEventTypes {
		if !covered[typ] {
			t.Errorf("no candidate of event type %s", typ)
		}
	}
}

// TestApply_ClosedLease_IsFinal: a closed lease takes no event — not a start of
// the closed admission, not one of a newer admission (issue 18: a closed UUID
// lived again under a newer admission; the close is now a permanent fence), not
// another close.
func TestApply_ClosedLease_IsFinal(t *testing.T) {
	closed := statusJournals()[lease.Closed]
	for _, tc := range []struct {
		name string
		ev   persistence.Event
	}{
		{"provision.started of the closed admission", evStarted(1, 2, at(time.Hour))},
		{"provision.started of a newer admission", evStarted(2, 2, at(time.Hour))},
		{"close.requested of the closed admission", evCloseRequested(1, at(time.Hour))},
		{"close.requested of a newer admission", evCloseRequested(2, at(time.Hour))},
		{"closed again", evClosed(1, at(time.Hour))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := replay(t, closed...)
			before := stateJSON(t, st)
			if err := st.Apply(tc.ev); err == nil {
				t.Fatalf("a closed lease applied %s (now %s)", tc.ev.Type, st.Status)
			}
			if stateJSON(t, st) != before {
				t.Fatalf("a refused event changed the closed lease")
			}
		})
	}
}

// TestApply_WrongGeneration_Refused: completions and failures name the generation
// (and a maintenance outcome its maintenance) they belong to; one of another
// attempt is refused, and so is a start that would reuse a generation, a pin of a
// release that is not deploying and a prune of history that is not disposable.
func TestApply_WrongGeneration_Refused(t *testing.T) {
	j := statusJournals()
	when := at(time.Hour)
	done := func(id string, gen uint64) persistence.Event {
		return mkEvent(lease.EvMaintenanceDone, when, lease.MaintenanceDone{ID: id, Stamp: lease.Stamp{Generation: gen, At: when}})
	}
	restored := func(id string, gen uint64) persistence.Event {
		return mkEvent(lease.EvMaintenanceRestored, when, lease.MaintenanceRestored{ID: id, Stamp: lease.Stamp{Generation: gen, At: when}, Compensated: true})
	}
	mfailed := func(id string, gen uint64) persistence.Event {
		return mkEvent(lease.EvMaintenanceFailed, when, lease.MaintenanceFailed{ID: id, Stamp: lease.Stamp{Generation: gen, At: when}})
	}
	retry := func(admission, gen uint64) persistence.Event {
		return mkEvent(lease.EvProvisionStarted, when, lease.ProvisionStarted{Admission: admission, Generation: gen, At: when, Deadline: when})
	}
	badComp := mkEvent(lease.EvMaintenanceStarted, when, lease.MaintenanceStarted{
		Maintenance: lease.Maintenance{ID: mID2, Kind: lease.KindRestart, SourceGen: 1, Generation: 2, CompensateGen: 2}})
	for _, tc := range []struct {
		name string
		from lease.Status
		ev   persistence.Event
	}{
		{"provision.succeeded of an older attempt", lease.Provisioning, evSucceeded(0, at(time.Hour))},
		{"provision.succeeded of a later attempt", lease.Provisioning, evSucceeded(2, at(time.Hour))},
		{"provision.failed of another attempt", lease.Provisioning, evProvisionFailed(2, at(time.Hour))},
		{"runtime.failing of another attempt", lease.Ready, evFailing(2, at(time.Hour), true)},
		{"runtime.failed of another attempt", lease.Failing, evRuntimeFailed(2, at(time.Hour))},
		{"cohort.diverged of another attempt", lease.Ready,
			mkEvent(lease.EvCohortDiverged, when, lease.CohortDiverged{Stamp: lease.Stamp{Generation: 2, At: when}})},
		{"a retry that reuses the generation in flight", lease.Provisioning, retry(1, 1)},
		{"a retry of another admission", lease.Provisioning, retry(2, 2)},
		{"release.pinned of a version that does not exist", lease.Provisioning,
			mkEvent(lease.EvReleasePinned, when, lease.ReleasePinned{Version: 2})},
		{"release.pinned of the active release", lease.Ready, mkEvent(lease.EvReleasePinned, when, lease.ReleasePinned{Version: 1})},
		{"maintenance.requested reusing the running generation", lease.Ready, evMaintenanceRequested(lease.KindRestart, mID2, 1, 1, when)},
		{"maintenance.requested whose compensation is not above its target", lease.Ready, badComp},
		{"maintenance.completed of the source generation", lease.Restarting, done(mID1, 1)},
		{"maintenance.completed of another maintenance", lease.Restarting, done(mID2, 2)},
		{"maintenance.recovered under the target generation", lease.Updating, restored(mID1, 2)},
		{"maintenance.recovered of another maintenance", lease.Restarting, restored(mID2, 3)},
		{"maintenance.failed of another maintenance", lease.Updating, mfailed(mID2, 2)},
		{"maintenance.failed of a generation the maintenance never had", lease.Restarting, mfailed(mID1, 7)},
		{"releases.pruned of the active, latest release", lease.Ready, mkEvent(lease.EvReleasesPruned, when, lease.ReleasesPruned{Versions: []int{1}})},
		{"releases.pruned of the deploying target", lease.Restarting, mkEvent(lease.EvReleasesPruned, when, lease.ReleasesPruned{Versions: []int{2}})},
		{"releases.pruned of a version that does not exist", lease.Failed, mkEvent(lease.EvReleasesPruned, when, lease.ReleasesPruned{Versions: []int{9}})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := replay(t, j[tc.from]...)
			before := stateJSON(t, st)
			if err := st.Apply(tc.ev); err == nil {
				t.Fatalf("applied; want refused")
			}
			if after := stateJSON(t, st); after != before {
				t.Fatalf("refused event changed the state:\nbefore %s\nafter  %s", before, after)
			}
		})
	}
}

// TestApply_UnknownTypeVersionOrData_Refused: an event this berthd does not know,
// of another version, or whose data does not decode, is refused from any status.
func TestApply_UnknownTypeVersionOrData_Refused(t *testing.T) {
	good := evStarted(1, 1, at(0))
	v0, v2 := good, good
	v0.V, v2.V = 0, 2
	unknown := good
	unknown.Type = "provision.paused"
	garbled := good
	garbled.Data = json.RawMessage(`{"admission":"one"}`)
	for _, tc := range []struct {
		name string
		ev   persistence.Event
		want string // in the error
	}{
		{"version 0", v0, "version 0"},
		{"version 2", v2, "version 2"},
		{"unknown type", unknown, `"provision.paused"`},
		{"data that does not decode", garbled, lease.EvProvisionStarted},
	} {
		for _, from := range allStatuses {
			t.Run(tc.name+"/"+string(from), func(t *testing.T) {
				st := replay(t, statusJournals()[from]...)
				before := stateJSON(t, st)
				err := st.Apply(tc.ev)
				if err == nil {
					t.Fatalf("applied; want refused")
				}
				if !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("error %q does not mention %q", err, tc.want)
				}
				if after := stateJSON(t, st); after != before {
					t.Fatalf("refused event changed the state:\nbefore %s\nafter  %s", before, after)
				}
			})
		}
	}
}

// TestApply_FailCount_IncrementsOnProvisionFailedAndRuntimeFailedOnly walks a
// journal through every event type and checks fail_count's step at each event.
func TestApply_FailCount_IncrementsOnProvisionFailedAndRuntimeFailedOnly(t *testing.T) {
	steps := []persistence.Event{
		evStarted(1, 1, at(0)),
		evProvisionFailed(1, at(time.Minute)),
		evStarted(2, 2, at(2*time.Minute)), // re-provision of the failed lease
		evSucceeded(2, at(3*time.Minute)),
		evFailing(2, at(4*time.Minute), true),
		evRuntimeFailed(2, at(5*time.Minute)),
		evStarted(3, 3, at(6*time.Minute)),
		evSucceeded(3, at(7*time.Minute)),
		evFailing(3, at(8*time.Minute), false),
		evRuntimeFailed(3, at(9*time.Minute)),
		evCloseRequested(3, at(10*time.Minute)),
		evCloseRequested(3, at(11*time.Minute)),
		evClosed(3, at(12*time.Minute)),
	}
	st := lease.NewState()
	for i, ev := range steps {
		prev := st.FailCount
		if err := st.Apply(ev); err != nil {
			t.Fatalf("step %d (%s): %v", i, ev.Type, err)
		}
		want := prev
		if ev.Type == lease.EvProvisionFailed || ev.Type == lease.EvRuntimeFailed {
			want++
		}
		if st.FailCount != want {
			t.Fatalf("step %d (%s): fail_count %d → %d, want %d", i, ev.Type, prev, st.FailCount, want)
		}
	}
	if st.FailCount != 3 {
		t.Fatalf("fail_count %d after three failures, want 3", st.FailCount)
	}
}

// TestApply_FailingThenNewAdmission_RecordsTheDeath: a re-provision of a failing
// lease (the seed's Failing → Provisioning) replaces it before runtime.failed: the
// death it replaces still counts in fail_count, the budget it counted is kept, and
// the failed callback never comes (Decide queues none).
func TestApply_FailingThenNewAdmission_RecordsTheDeath(t *testing.T) {
	st := replay(t, evStarted(1, 1, at(0)), evSucceeded(1, at(time.Minute)), evFailing(1, at(2*time.Minute), true))
	if err := st.Apply(evStarted(1, 2, at(3*time.Minute))); err == nil {
		t.Fatal("a start of the failing lease's own admission was applied")
	}
	if err := st.Apply(evStarted(2, 2, at(3*time.Minute))); err != nil {
		t.Fatalf("re-provision of a failing lease refused: %v", err)
	}
	if st.Status != lease.Provisioning || st.FailCount != 1 || st.Budget.Streak != 1 || st.PendingFailure != nil {
		t.Fatalf("after the re-provision: %s", stateJSON(t, st))
	}
}

// life is one Ready period of a lease that ends in a runtime failure: provision
// started at start, Ready at ready, the container died at died.
type life struct {
	start, ready, died time.Duration
	counted            bool
	wantStreak         int  // after the death
	wantExhausted      bool // the verdict recorded with it
}

// TestApply_TerminalBudget applies the seed's terminal budget rules: a counted
// failure exhausts the budget only when it is the third or later in a row and at
// least 30 minutes after the streak's first; ten minutes of Ready (anchored on
// Ready entry, not on the provision's start) reset the streak at the next exit
// from Ready; an uncounted failure never increments the streak (but is an exit from
// Ready like any other, and its recorded verdict is never exhausted).
func TestApply_TerminalBudget(t *testing.T) {
	m := time.Minute
	for _, tc := range []struct {
		name  string
		lives []life
	}{
		{"three counted failures inside 30 minutes do not exhaust", []life{
			{0, 0, 1 * m, true, 1, false},
			{10 * m, 10 * m, 11 * m, true, 2, false},
			{20 * m, 20 * m, 21 * m, true, 3, false},
		}},
		{"the third counted failure 30 minutes after the streak's first exhausts", []life{
			{0, 0, 1 * m, true, 1, false},
			{15 * m, 15 * m, 16 * m, true, 2, false},
			{30 * m, 30 * m, 31 * m, true, 3, true},
		}},
		{"a second failure past 30 minutes does not exhaust; the third does", []life{
			{0, 0, 1 * m, true, 1, false},
			{35 * m, 35 * m, 40 * m, true, 2, false},
			{41 * m, 41 * m, 42 * m, true, 3, true},
		}},
		{"a younger streak is re-evaluated at its next counted failure", []life{
			{0, 0, 1 * m, true, 1, false},
			{5 * m, 5 * m, 6 * m, true, 2, false},
			{10 * m, 10 * m, 11 * m, true, 3, false},
			{25 * m, 25 * m, 31 * m, true, 4, true},
		}},
		{"ten minutes of Ready reset the streak", []life{
			{0, 0, 1 * m, true, 1, false},
			{4 * m, 4 * m, 5 * m, true, 2, false},
			{21 * m, 21 * m, 31 * m, true, 1, false}, // Ready exactly 10 minutes
		}},
		{"a Ready period one second short of ten minutes does not reset", []life{
			{0, 0, 1 * m, true, 1, false},
			{4 * m, 4 * m, 5 * m, true, 2, false},
			{21*m + time.Second, 21*m + time.Second, 31 * m, true, 3, true},
		}},
		{"the Ready period is anchored on Ready entry, not on the provision's start", []life{
			{0, 0, 1 * m, true, 1, false},
			{2 * m, 2 * m, 3 * m, true, 2, false},
			{10 * m, 25 * m, 31 * m, true, 3, true}, // 21 minutes since started, 6 of them Ready
		}},
		{"uncounted failures never increment the streak", []life{
			{0, 0, 1 * m, true, 1, false},
			{15 * m, 15 * m, 16 * m, false, 1, false},
			{30 * m, 30 * m, 31 * m, false, 1, false},
			{32 * m, 32 * m, 33 * m, true, 2, false},
		}},
		{"an uncounted failure records retry even on a streak that is exhausted", []life{
			{0, 0, 1 * m, true, 1, false},
			{15 * m, 15 * m, 16 * m, true, 2, false},
			{30 * m, 30 * m, 31 * m, true, 3, true},
			{32 * m, 32 * m, 33 * m, false, 3, false},
		}},
		{"an uncounted exit after ten minutes of Ready resets the streak", []life{
			{0, 0, 1 * m, true, 1, false},
			{4 * m, 4 * m, 5 * m, true, 2, false},
			{6 * m, 6 * m, 16 * m, false, 0, false},
			{17 * m, 17 * m, 18 * m, true, 1, false},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := lease.NewState()
			apply := func(ev persistence.Event) {
				t.Helper()
				if err := st.Apply(ev); err != nil {
					t.Fatalf("%s: %v", ev.Type, err)
				}
			}
			var streakStart time.Time
			for i, l := range tc.lives {
				gen := uint64(i + 1)
				apply(evStarted(gen, gen, at(l.start))) // the first starts a reserved lease; the rest re-provision a failed one
				apply(evSucceeded(gen, at(l.ready)))
				apply(evFailing(gen, at(l.died), l.counted))
				if st.Budget.Streak != l.wantStreak || st.Budget.Exhausted != l.wantExhausted {
					t.Fatalf("death %d at +%s: streak %d exhausted %v, want %d %v", i+1, l.died,
						st.Budget.Streak, st.Budget.Exhausted, l.wantStreak, l.wantExhausted)
				}
				if v := st.Verdict(); v.Verdict != "retry" {
					t.Fatalf("death %d: verdict %q while failing, want retry until the lease is failed", i+1, v.Verdict)
				}
				if l.wantStreak == 1 && l.counted {
					streakStart = at(l.died)
				}
				if l.wantStreak > 0 && !st.Budget.StreakStart.Equal(streakStart) {
					t.Fatalf("death %d: streak start %s, want %s", i+1, st.Budget.StreakStart, streakStart)
				}
				apply(evRuntimeFailed(gen, at(l.died+time.Second)))
				want := "retry"
				if l.wantExhausted {
					want = "exhausted"
				}
				if v := st.Verdict(); v.Verdict != want || v.ConsecutiveFailures != l.wantStreak {
					t.Fatalf("death %d: failed lease's verdict %+v, want %s/%d", i+1, *v, want, l.wantStreak)
				}
			}
		})
	}
}

// TestApply_TerminalBudget_VerdictRecordedAtFailureAndClearedByReprovision: the
// verdict is the one recorded with the failure (it stays while the lease is
// failed), a re-provision clears it but carries the streak, a provision failure
// does not re-exhaust it, and the next counted failure decides again.
func TestApply_TerminalBudget_VerdictRecordedAtFailureAndClearedByReprovision(t *testing.T) {
	m := time.Minute
	st := replay(t,
		evStarted(1, 1, at(0)), evSucceeded(1, at(0)), evFailing(1, at(1*m), true), evRuntimeFailed(1, at(1*m)),
		evStarted(2, 2, at(15*m)), evSucceeded(2, at(15*m)), evFailing(2, at(16*m), true), evRuntimeFailed(2, at(16*m)),
		evStarted(3, 3, at(30*m)), evSucceeded(3, at(30*m)), evFailing(3, at(31*m), true), evRuntimeFailed(3, at(31*m)),
	)
	if v := st.Verdict(); v.Verdict != "exhausted" || v.ConsecutiveFailures != 3 {
		t.Fatalf("fixture verdict %+v, want exhausted/3", *v)
	}
	if err := st.Apply(evStarted(4, 4, at(40*m))); err != nil {
		t.Fatal(err)
	}
	if st.Budget.Exhausted || st.Budget.Streak != 3 || st.Verdict().Verdict != "retry" {
		t.Fatalf("after re-provision: budget %+v verdict %+v, want cleared verdict and the streak of 3 kept", st.Budget, *st.Verdict())
	}
	if err := st.Apply(evProvisionFailed(4, at(41*m))); err != nil {
		t.Fatal(err)
	}
	if v := st.Verdict(); v.Verdict != "retry" || v.ConsecutiveFailures != 3 {
		t.Fatalf("after a provision failure: verdict %+v, want retry/3", *v)
	}
	for _, ev := range []persistence.Event{evStarted(5, 5, at(42*m)), evSucceeded(5, at(43*m)),
		evFailing(5, at(44*m), true), evRuntimeFailed(5, at(44*m))} {
		if err := st.Apply(ev); err != nil {
			t.Fatal(err)
		}
	}
	if v := st.Verdict(); v.Verdict != "exhausted" || v.ConsecutiveFailures != 4 {
		t.Fatalf("after the next counted failure: verdict %+v, want exhausted/4", *v)
	}
}

// loadJournal is a long, realistic lease journal touching every event type and
// every reset (the budget's, a maintenance's and the new admission's): a failed
// provision, a re-provision retried under a new generation, a completed restart, an
// update rolled back, history pruned, a death, a restart of the failed lease that
// failed, a third admission whose cohort diverged, a fourth replacing it while
// failing, and a close (repeated) of that one.
func loadJournal() []persistence.Event {
	return newJournal(dspec(1)).provision(dspec(1)).provisionFails().
		provision(dspec(2)).retry().pin().ready().
		restart(mID1).pin().completes().
		update(mID2, service("app", imgApp2, 1)).rollsBack().prune(2).
		dies(true).fails().
		restart(mID3).maintenanceFails().
		provision(dspec(3)).pin().ready().diverges().
		provision(dspec(4)).pin().ready().dies(true).
		provision(dspec(5)).pin().ready().
		close().close().closed().evs
}

// TestLoad_SnapshotPlusLaterEvents_EqualsFullReplay: for every cut of a journal,
// Load of (snapshot of the state at the cut, compacted journal after it) gives the
// same State and last sequence as replaying every event.
func TestLoad_SnapshotPlusLaterEvents_EqualsFullReplay(t *testing.T) {
	store, _, err := persistence.Open(persistence.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { _ = store.Close() })
	events := loadJournal()
	seen := map[string]bool{}
	for _, ev := range events {
		seen[ev.Type] = true
	}
	for _, typ := range allEventTypes {
		if !seen[typ] {
			t.Fatalf("the journal has no %s event", typ)
		}
	}
	want := stateJSON(t, replay(t, events...))
	for cut := 0; cut <= len(events); cut++ {
		t.Run(fmt.Sprintf("snapshot at seq %d", cut), func(t *testing.T) {
			id := uuid.NewString()
			if _, err := store.Commit(persistence.Write{Appends: []persistence.Append{{Stream: lease.Stream(id), Events: events}}}); err != nil {
				t.Fatalf("journal: %v", err)
			}
			if cut > 0 {
				snap, err := json.Marshal(replay(t, events[:cut]...))
				if err != nil {
					t.Fatal(err)
				}
				if err := store.SaveSnapshot(lease.Stream(id), persistence.Snapshot{Seq: uint64(cut), V: 1, At: at(time.Hour), Data: snap}); err != nil {
					t.Fatalf("snapshot: %v", err)
				}
			}
			raw, err := store.Load(lease.Stream(id))
			if err != nil {
				t.Fatal(err)
			}
			if len(raw.Events) != len(events)-cut || (cut > 0) != (raw.Snapshot != nil) {
				t.Fatalf("store holds snapshot %v and %d events, want the journal compacted to %d", raw.Snapshot != nil, len(raw.Events), len(events)-cut)
			}
			st, seq, err := lease.Load(store, id)
			if err != nil {
				t.Fatalf("load: %v", err)
			}
			if got := stateJSON(t, st); got != want {
				t.Fatalf("loaded state differs from the full replay:\nloaded %s\nreplay %s", got, want)
			}
			if seq != uint64(len(events)) {
				t.Fatalf("last seq %d, want %d", seq, len(events))
			}
		})
	}
}

// TestLoad_EventNotPermitted_RefusedNamingTheSeq: a journal the state machine does
// not permit is refused (startup refuses rather than guess), naming the sequence.
func TestLoad_EventNotPermitted_RefusedNamingTheSeq(t *testing.T) {
	store, _, err := persistence.Open(persistence.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { _ = store.Close() })
	id := uuid.NewString()
	events := []persistence.Event{evStarted(1, 1, at(0)), evSucceeded(1, at(time.Minute)), evSucceeded(1, at(2*time.Minute))}
	if _, err := store.Commit(persistence.Write{Appends: []persistence.Append{{Stream: lease.Stream(id), Events: events}}}); err != nil {
		t.Fatal(err)
	}
	_, _, err = lease.Load(store, id)
	if err == nil {
		t.Fatal("a journal with provision.succeeded twice loaded; want refused")
	}
	if !strings.Contains(err.Error(), "seq 3") || !strings.Contains(err.Error(), id) {
		t.Fatalf("error %q does not name the lease and seq 3", err)
	}
}
