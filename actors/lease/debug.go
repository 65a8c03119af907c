package lease

import (
	"cmp"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/berth-dev/berth/messages"
	"github.com/berth-dev/berth/persistence"
	"github.com/berth-dev/berth/supervisors"
)

// The lease's part of the operator's debug API: its services and instances as
// the actor knows them, and — read straight from the store, for any lease, live
// or closed — its journal summarised and its stored failure captures.

// Capture kinds (Capture.Kind).
const (
	CaptureProvision   = "provision"
	CaptureRuntime     = "runtime"
	CaptureMaintenance = "maintenance"
	captureUnrecorded  = "failure" // a capture stored before kinds were recorded
)

// debugLease answers DebugLease from the state: every service of the running
// release with the instances journaled for it.
func (a *Actor) debugLease() messages.DebugLeaseReply {
	if a.st == nil {
		return messages.DebugLeaseReply{LeaseStatus: string(Reserved), Services: []messages.DebugService{}}
	}
	return messages.DebugLeaseReply{LeaseStatus: string(a.st.Status), Services: debugServices(a.spec.Load(), a.st)}
}

// debugServices groups the state's instances by service, in service-name order.
func debugServices(spec *Spec, st *State) []messages.DebugService {
	services, byService := servicesRunning(spec, st)
	out := make([]messages.DebugService, 0, len(services))
	for _, svc := range services {
		insts := byService[svc.Name]
		ds := messages.DebugService{Name: svc.Name, Instances: make([]messages.DebugInstance, 0, len(insts))}
		for _, inst := range insts {
			ds.Instances = append(ds.Instances, messages.DebugInstance{Index: inst.Index, ContainerID: shortID(inst.ContainerID),
				State: instanceState(st, inst), Image: inst.Image, Ports: inst.Ports.byKey(), Degraded: inst.Degraded})
		}
		out = append(out, ds)
	}
	return out
}

// instanceState is what the journal says of one instance of the state's cohort.
func instanceState(st *State, inst Instance) string {
	switch st.Status {
	case Ready:
		return "running"
	case Failing:
		if f := st.PendingFailure; f != nil && f.ContainerID == inst.ContainerID {
			return "exited"
		}
		return "running"
	case Restarting, Updating:
		return "source" // the cohort the maintenance replaces, or falls back to
	case Deprovisioning:
		return "stopping"
	}
	return string(st.Status)
}

// History is a lease's journal for the debug API, read from the store: every
// event still journaled, summarised, and the state they leave (nil when the
// stream does not exist). CompactedBefore is the first seq still journaled when a
// snapshot compacted the ones before it (0: nothing compacted).
type History struct {
	Events          []messages.DebugEvent
	CompactedBefore uint64
	State           *State
}

// LoadHistory reads lease's stream once and replays it.
func LoadHistory(store *persistence.Store, lease string) (History, error) {
	h := History{Events: []messages.DebugEvent{}}
	l, err := store.Load(Stream(lease))
	if err != nil || l.LastSeq == 0 && l.Snapshot == nil {
		return h, err
	}
	st, _, err := Load(snapshotOnly{l: l}, lease)
	if err != nil {
		return h, err
	}
	if l.Snapshot != nil {
		h.CompactedBefore = l.Snapshot.Seq + 1
	}
	for _, r := range l.Events {
		h.Events = append(h.Events, messages.DebugEvent{Seq: r.Seq, Type: r.Type, At: r.At, Summary: Summary(r.Event), Data: r.Data})
		// A replay error leaves the state where it stopped; the events are still shown.
		_ = st.Apply(r.Event)
	}
	h.State = st
	return h, nil
}

// snapshotOnly serves Load a stream already read, without its events: the
// history replays them itself, past any that does not apply.
type snapshotOnly struct {
	supervisors.JournalStore
	l persistence.Loaded
}

func (s snapshotOnly) Load(string) (persistence.Loaded, error) {
	s.l.Events = nil
	return s.l, nil
}

// Row is the debug row of a lease no actor runs (closed, or not yet respawned),
// from its replayed state.
func (h History) Row(lease string) messages.LeaseRow {
	row := messages.LeaseRow{LeaseUUID: lease, Items: []messages.DebugItem{}, Services: []messages.DebugService{},
		TerminalBudget: messages.TerminalBudget{Verdict: "retry"}}
	if len(h.Events) > 0 {
		row.CreatedAt = h.Events[0].At
	}
	if st := h.State; st != nil {
		row.Status, row.LeaseStatus = string(st.Status), string(st.Status)
		row.FailCount, row.Reason, row.Message = st.FailCount, st.Reason, st.Message
		row.TerminalBudget = *st.Verdict()
	}
	return row
}

// Summary is one human line for a lease event: its type, then what it says.
func Summary(ev persistence.Event) string {
	summarize, ok := summaries[ev.Type]
	if !ok {
		return ev.Type
	}
	detail, err := summarize(ev.Data)
	if err != nil {
		return ev.Type + " (undecodable: " + err.Error() + ")"
	}
	if detail == "" {
		return ev.Type
	}
	return ev.Type + ": " + detail
}

// summaries say what each event's payload holds ("": nothing beyond its type).
var summaries = map[string]func(json.RawMessage) (string, error){
	EvProvisionStarted: summary(func(e ProvisionStarted) string {
		if e.Release == nil {
			return fmt.Sprintf("retry under generation %d (admission %d)", e.Generation, e.Admission)
		}
		return fmt.Sprintf("admission %d, generation %d, new %s release, deadline %s", e.Admission, e.Generation,
			e.Release.Kind, e.Deadline.UTC().Format("15:04:05Z"))
	}),
	EvReleasePinned: summary(func(e ReleasePinned) string {
		pins := make([]string, 0, len(e.Images))
		for _, p := range e.Images {
			pins = append(pins, p.Service+" "+p.Ref+" → "+shortImage(p.ID))
		}
		return fmt.Sprintf("v%d %s", e.Version, strings.Join(pins, ", "))
	}),
	EvProvisionSucceeded: summary(func(e ProvisionSucceeded) string {
		return fmt.Sprintf("generation %d ready, %s", e.Generation, cohortLine(e.Containers))
	}),
	EvProvisionFailed:   summary(func(e ProvisionFailed) string { return cause(e.Reason, e.Message) }),
	EvRuntimeFailed:     summary(func(e RuntimeFailed) string { return cause(e.Reason, e.Message) }),
	EvMaintenanceFailed: summary(func(e MaintenanceFailed) string { return cause(e.Reason, e.Message) }),
	EvRuntimeFailing: summary(func(e RuntimeFailing) string {
		s := fmt.Sprintf("%s/%d (%s) exited with code %d", e.Service, e.Index, shortID(e.ContainerID), e.ExitCode)
		if e.OOMKilled {
			s += ", out of memory"
		}
		if !e.Counted {
			s += ", not counted"
		}
		return s
	}),
	EvCohortDiverged: summary(func(e CohortDiverged) string { return e.Message }),
	EvMaintenanceStarted: summary(func(e MaintenanceStarted) string {
		return fmt.Sprintf("%s %s, target generation %d, source generation %d", e.Kind, e.ID, e.Generation, e.SourceGen)
	}),
	EvMaintenanceDone: summary(func(e MaintenanceDone) string {
		return fmt.Sprintf("%s, generation %d ready, %s", e.ID, e.Generation, cohortLine(e.Containers))
	}),
	EvMaintenanceRestored: summary(func(e MaintenanceRestored) string {
		how := "source intact"
		if e.Compensated {
			how = "source recreated"
		}
		return fmt.Sprintf("%s, %s (generation %d) — %s", e.ID, how, e.Generation, cause(e.Reason, e.Message))
	}),
	EvReleasesPruned: summary(func(e ReleasesPruned) string {
		vs := make([]string, 0, len(e.Versions))
		for _, v := range e.Versions {
			vs = append(vs, fmt.Sprintf("v%d", v))
		}
		return strings.Join(vs, ", ")
	}),
	EvCloseRequested: summary(func(e CloseRequested) string {
		switch {
		case e.Requarantine:
			return "the restored data goes back to its retention record"
		case e.Retain:
			return "volumes retained"
		}
		return ""
	}),
	EvCloseJudged: summary(func(e CloseJudged) string {
		if len(e.Reclaim) == 0 {
			return "every volume retained"
		}
		return "writable-path-only, destroyed: " + strings.Join(e.Reclaim, ", ")
	}),
	EvClosed: summary(func(e ClosedEv) string {
		r := e.Retention
		switch {
		case r == nil && len(e.Reclaimed) > 0:
			return "nothing retained: every volume held only writable-path copies"
		case r == nil:
			return ""
		case r.RetainedUntil.IsZero():
			return "data retained until evicted"
		}
		return "data retained until " + r.RetainedUntil.UTC().Format("2006-01-02 15:04:05Z")
	}),
}

// summary decodes an event's payload as T, then says it.
func summary[T any](say func(T) string) func(json.RawMessage) (string, error) {
	return func(data json.RawMessage) (string, error) {
		var e T
		if err := json.Unmarshal(data, &e); err != nil {
			return "", err
		}
		return say(e), nil
	}
}

// cause is "Reason — message", either part possibly absent.
func cause(reason, message string) string {
	switch {
	case reason == "":
		return message
	case message == "":
		return reason
	}
	return reason + " — " + message
}

// cohortLine lists a cohort as "app/0 127.0.0.1:32768, app/1 …".
func cohortLine(cs []Instance) string {
	if len(cs) == 0 {
		return "no containers"
	}
	parts := make([]string, 0, len(cs))
	for _, c := range cs {
		p := fmt.Sprintf("%s/%d", c.Service, c.Index)
		for _, port := range c.Ports {
			p += " " + port.HostIP + ":" + port.HostPort
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, ", ")
}

// shortImage is an image ID without its algorithm, 12 hex digits.
func shortImage(id string) string {
	return shortID(strings.TrimPrefix(id, "sha256:"))
}

// captureBlobs bounds how many stored captures one debug read decodes.
const captureBlobs = 20

// DiagnosticSummaries summarises a lease's newest stored failure captures, one
// entry per captured container, newest capture first; the log bytes themselves
// are never returned.
func DiagnosticSummaries(diag *persistence.Diagnostics, lease string) ([]messages.DebugDiagnostic, error) {
	out := []messages.DebugDiagnostic{}
	if diag == nil {
		return out, nil
	}
	blobs, err := diag.Recent(lease, captureBlobs)
	if err != nil {
		return out, err
	}
	for _, b := range blobs {
		var c Capture
		if err := json.Unmarshal(b.Blob, &c); err != nil {
			continue // an undecodable capture has nothing to summarise
		}
		kind := cmp.Or(c.Kind, captureUnrecorded)
		if c.Kind == "" && c.MaintenanceID != "" {
			kind = CaptureMaintenance // stored before kinds were: its maintenance ID tells
		}
		at := c.At
		if at.IsZero() {
			at = b.At
		}
		for _, cc := range c.Containers {
			out = append(out, messages.DebugDiagnostic{Kind: kind, Service: cc.Service, Index: cc.Index, At: at,
				Bytes: len(cc.Logs), Reason: c.Reason, State: cc.State})
		}
	}
	return out, nil
}
