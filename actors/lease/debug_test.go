package lease_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/berth-dev/berth/actors/lease"
	"github.com/berth-dev/berth/messages"
	"github.com/berth-dev/berth/persistence"
)

// Unit tests of the lease's part of the debug API (debug.go): one summary line
// per event, the history read from the store, capture summaries without their
// logs, and the instances a lease actor reports.

func TestSummary_OneLinePerEvent(t *testing.T) {
	inst := lease.Instance{Service: "app", Index: 0, ContainerID: strings.Repeat("ab", 32), Image: unitImage,
		Ports: lease.Ports{{Key: "8080/tcp", PortBinding: messages.PortBinding{HostIP: "127.0.0.1", HostPort: "32768"}}}}
	for _, c := range []struct {
		ev   persistence.Event
		want string
	}{
		{evStarted(1, 1, t0), "provision.started: retry under generation 1 (admission 1)"},
		{mkEvent(lease.EvProvisionStarted, t0, lease.ProvisionStarted{Admission: 2, Generation: 3, At: t0, Deadline: at(10 * time.Minute),
			Release: &lease.Release{Kind: lease.KindProvision}}), "provision.started: admission 2, generation 3, new provision release, deadline 12:10:00Z"},
		{mkEvent(lease.EvReleasePinned, t0, lease.ReleasePinned{Version: 1, Images: []lease.ServiceImage{{Service: "app",
			ImagePin: messages.ImagePin{Ref: unitImage, ID: "sha256:" + strings.Repeat("0123456789", 7)}}}}),
			"release.pinned: v1 app " + unitImage + " → 012345678901"},
		{mkEvent(lease.EvProvisionSucceeded, t0, lease.ProvisionSucceeded{Stamp: lease.Stamp{Generation: 1}, Containers: []lease.Instance{inst}}),
			"provision.succeeded: generation 1 ready, app/0 127.0.0.1:32768"},
		{mkEvent(lease.EvProvisionFailed, t0, lease.ProvisionFailed{Stamp: lease.Stamp{Generation: 1},
			Cause: lease.Cause{Reason: messages.ReasonHealthCheckFailed, Message: "health check failed during startup"}}), "provision.failed: HealthCheckFailed — health check failed during startup"},
		{mkEvent(lease.EvRuntimeFailing, t0, lease.RuntimeFailing{Service: "app", Index: 1, ContainerID: strings.Repeat("cd", 32),
			ExitCode: 137, OOMKilled: true}), "runtime.failing: app/1 (cdcdcdcdcdcd) exited with code 137, out of memory, not counted"},
		{evRuntimeFailed(1, t0), "runtime.failed: ContainerExited — container exited unexpectedly"},
		{mkEvent(lease.EvCohortDiverged, t0, lease.CohortDiverged{Message: "an unexpected instance app/3 runs"}),
			"cohort.diverged: an unexpected instance app/3 runs"},
		{evMaintenanceRequested(lease.KindRestart, mID1, 1, 2, t0), "maintenance.requested: restart " + mID1 + ", target generation 2, source generation 1"},
		{mkEvent(lease.EvMaintenanceDone, t0, lease.MaintenanceDone{ID: mID1, Stamp: lease.Stamp{Generation: 2}, Containers: []lease.Instance{inst}}),
			"maintenance.completed: " + mID1 + ", generation 2 ready, app/0 127.0.0.1:32768"},
		{mkEvent(lease.EvMaintenanceRestored, t0, lease.MaintenanceRestored{ID: mID1, Stamp: lease.Stamp{Generation: 3}, Compensated: true,
			Cause: lease.Cause{Reason: messages.ReasonImagePullFailed, Message: "image could not be pulled"}}),
			"maintenance.recovered: " + mID1 + ", source recreated (generation 3) — ImagePullFailed — image could not be pulled"},
		{mkEvent(lease.EvMaintenanceFailed, t0, lease.MaintenanceFailed{Cause: lease.Cause{Reason: messages.ReasonRestartFailed}}), "maintenance.failed: RestartFailed"},
		{mkEvent(lease.EvReleasesPruned, t0, lease.ReleasesPruned{Versions: []int{1, 2}}), "releases.pruned: v1, v2"},
		{evCloseRequested(1, t0), "close.requested"},
		{mkEvent(lease.EvCloseRequested, t0, lease.CloseRequested{Retain: true}), "close.requested: volumes retained"},
		{evClosed(1, t0), "closed"},
		{mkEvent(lease.EvClosed, t0, lease.ClosedEv{Retention: &messages.RetentionRecord{RetainedUntil: at(time.Hour)}}),
			"closed: data retained until 2025-06-01 13:00:00Z"},
		{persistence.Event{Type: "something.new", V: 1, Data: json.RawMessage(`{}`)}, "something.new"},
	} {
		if got := lease.Summary(c.ev); got != c.want {
			t.Errorf("%s:\n got %q\nwant %q", c.ev.Type, got, c.want)
		}
	}
	bad := lease.Summary(persistence.Event{Type: lease.EvProvisionFailed, V: 1, Data: json.RawMessage(`[1]`)})
	if !strings.HasPrefix(bad, "provision.failed (undecodable: json: cannot unmarshal array") {
		t.Errorf("undecodable event: %q", bad)
	}
}

func TestLoadHistory_EventsAfterTheSnapshotAndTheStateTheyLeave(t *testing.T) {
	store, _, err := persistence.Open(persistence.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { _ = store.Close() })
	id := uuid.NewString()

	if h, err := lease.LoadHistory(store, id); err != nil || h.State != nil || h.Events == nil || len(h.Events) != 0 || h.CompactedBefore != 0 {
		t.Fatalf("no stream: %+v, %v", h, err)
	}

	events := []persistence.Event{evStarted(1, 1, at(0)), evProvisionFailed(1, at(time.Minute)),
		evStarted(2, 2, at(2*time.Minute)), evSucceeded(2, at(3*time.Minute))}
	events[2] = mkEvent(lease.EvProvisionStarted, at(2*time.Minute), lease.ProvisionStarted{Admission: 2, Generation: 2,
		At: at(2 * time.Minute), Deadline: at(12 * time.Minute), Release: &lease.Release{Kind: lease.KindProvision}})
	if _, err := store.Commit(persistence.Write{Appends: []persistence.Append{{Stream: lease.Stream(id), Events: events}}}); err != nil {
		t.Fatal(err)
	}
	h, err := lease.LoadHistory(store, id)
	if err != nil {
		t.Fatal(err)
	}
	if len(h.Events) != 4 || h.CompactedBefore != 0 || h.Events[1].Seq != 2 || h.Events[1].Type != lease.EvProvisionFailed ||
		h.Events[1].Summary != "provision.failed: ImagePullFailed — image could not be pulled" || !h.Events[1].At.Equal(at(time.Minute)) ||
		string(h.Events[1].Data) != string(events[1].Data) {
		t.Fatalf("history = %+v", h.Events)
	}
	if h.State == nil || h.State.Status != lease.Ready || h.State.FailCount != 1 {
		t.Fatalf("state = %+v", h.State)
	}

	snap, _ := json.Marshal(replay(t, events[:2]...))
	if err := store.SaveSnapshot(lease.Stream(id), persistence.Snapshot{Seq: 2, V: 1, At: at(time.Hour), Data: snap}); err != nil {
		t.Fatal(err)
	}
	h, err = lease.LoadHistory(store, id)
	if err != nil {
		t.Fatal(err)
	}
	if h.CompactedBefore != 3 || len(h.Events) != 2 || h.Events[0].Seq != 3 || h.State.Status != lease.Ready || h.State.FailCount != 1 {
		t.Fatalf("after a snapshot at 2: compacted before %d, events %+v, state %+v", h.CompactedBefore, h.Events, h.State)
	}
	row := h.Row(id)
	if row.LeaseUUID != id || row.Status != "ready" || row.LeaseStatus != "ready" || row.FailCount != 1 ||
		!row.CreatedAt.Equal(at(2*time.Minute)) || row.TerminalBudget.Verdict != "retry" || row.Items == nil || row.Services == nil {
		t.Fatalf("row = %+v", row)
	}
}

func TestDiagnosticSummaries_KindsAndSizesNeverTheLogs(t *testing.T) {
	diag, err := persistence.OpenDiagnostics(persistence.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = diag.Close() })
	id := uuid.NewString()
	if got, err := lease.DiagnosticSummaries(diag, id); err != nil || got == nil || len(got) != 0 {
		t.Fatalf("nothing stored: %#v, %v", got, err)
	}
	put := func(c lease.Capture) {
		blob, _ := json.Marshal(c)
		if err := diag.Put(id, c.At, blob); err != nil {
			t.Fatal(err)
		}
	}
	secret := "tenant log line 42"
	put(lease.Capture{Lease: id, Kind: lease.CaptureProvision, Stamp: lease.Stamp{At: at(0)}, Cause: lease.Cause{Reason: messages.ReasonHealthCheckFailed},
		Containers: []lease.ContainerCapture{{Service: "app", Index: 0, State: "running", Logs: secret}, {Service: "app", Index: 1, State: "exited", Logs: "xy"}}})
	put(lease.Capture{Lease: id, MaintenanceID: mID1, Stamp: lease.Stamp{At: at(time.Minute)}, Cause: lease.Cause{Reason: messages.ReasonImagePullFailed},
		Containers: []lease.ContainerCapture{{Service: "web", Index: 0, State: "created"}}})
	put(lease.Capture{Lease: id, Stamp: lease.Stamp{At: at(2 * time.Minute)}, Cause: lease.Cause{Reason: messages.ReasonContainerExited},
		Containers: []lease.ContainerCapture{{Service: "app", Index: 0, State: "exited", Logs: "abc"}}})

	got, err := lease.DiagnosticSummaries(diag, id)
	if err != nil {
		t.Fatal(err)
	}
	want := []messages.DebugDiagnostic{
		{Kind: "failure", Service: "app", Index: 0, At: at(2 * time.Minute), Bytes: 3, Reason: messages.ReasonContainerExited, State: "exited"},
		{Kind: lease.CaptureMaintenance, Service: "web", Index: 0, At: at(time.Minute), Bytes: 0, Reason: messages.ReasonImagePullFailed, State: "created"},
		{Kind: lease.CaptureProvision, Service: "app", Index: 0, At: at(0), Bytes: len(secret), Reason: messages.ReasonHealthCheckFailed, State: "running"},
		{Kind: lease.CaptureProvision, Service: "app", Index: 1, At: at(0), Bytes: 2, Reason: messages.ReasonHealthCheckFailed, State: "exited"},
	}
	gotJSON, _ := json.Marshal(got)
	wantJSON, _ := json.Marshal(want)
	if string(gotJSON) != string(wantJSON) {
		t.Fatalf("summaries\n got %s\nwant %s", gotJSON, wantJSON)
	}
	if strings.Contains(string(gotJSON), secret) {
		t.Fatal("a summary carries the captured log")
	}
}

func TestDebugServices_InstancesWithWhatTheJournalSaysOfThem(t *testing.T) {
	spec := &lease.Spec{Lease: uuid.NewString(), Services: []lease.ServiceSpec{{Name: "app"}, {Name: "db"}}}
	journals := statusJournals()
	for status, want := range map[lease.Status]string{
		lease.Ready: "running", lease.Failing: "exited", lease.Restarting: "source", lease.Updating: "source",
	} {
		got := lease.DebugServicesForTest(spec, replay(t, journals[status]...))
		if len(got) != 2 || got[0].Name != "app" || got[1].Name != "db" || len(got[1].Instances) != 0 || got[1].Instances == nil {
			t.Fatalf("%s: services %+v", status, got)
		}
		if len(got[0].Instances) != 1 {
			t.Fatalf("%s: app instances %+v", status, got[0].Instances)
		}
		i := got[0].Instances[0]
		if i.State != want || i.Index != 0 || len(i.ContainerID) != 12 || i.Image != unitImage ||
			i.Ports["8080/tcp"] != (messages.PortBinding{HostIP: "127.0.0.1", HostPort: "32768"}) {
			t.Errorf("%s: instance %+v, want state %s", status, i, want)
		}
	}
	for _, status := range []lease.Status{lease.Reserved, lease.Provisioning, lease.Failed, lease.Closed} {
		got := lease.DebugServicesForTest(spec, replay(t, journals[status]...))
		if len(got) != 2 || len(got[0].Instances) != 0 {
			t.Errorf("%s: %+v, want the services without instances", status, got)
		}
	}
}
