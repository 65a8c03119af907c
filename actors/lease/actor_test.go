package lease_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/berth-dev/berth/actors/lease"
	"github.com/berth-dev/berth/dockerio"
	"github.com/berth-dev/berth/dockerio/dockertest/fake"
	"github.com/berth-dev/berth/messages"
	"github.com/berth-dev/berth/messages/manifest"
	"github.com/berth-dev/berth/persistence"
)

// Unit tests of the lease actor (actor.go, worker.go, verify.go) in a real
// supervision tree, on the real store and the fake Docker engine. The harness is in
// harness_unit_test.go.

func isReady(r messages.LeaseReport) bool { return r.Status == string(lease.Ready) }

// readyLease starts a one-container lease and waits until it is Ready.
func readyLease(t *testing.T, h *harness) (*leaseUnderTest, messages.Container) {
	t.Helper()
	l := h.start(newSpec(1))
	h.awaitReport("ready", isReady)
	ctrs := l.containers()
	if len(ctrs) != 1 || ctrs[0].State != "running" {
		t.Fatalf("a ready lease with one service of quantity 1 runs %d containers: %+v", len(ctrs), ctrs)
	}
	return l, ctrs[0]
}

func wantTypes(t *testing.T, l *leaseUnderTest, want ...string) {
	t.Helper()
	if got := l.eventTypes(); !slices.Equal(got, want) {
		t.Fatalf("journal %v, want %v", got, want)
	}
}

// wantRow is an expected outbox row: its callback status, and whether it goes to
// the lifecycle URL (deaths, deprovisions) or the exact callback URL (provision
// outcomes).
type wantRow struct {
	status    string
	lifecycle bool
}

func opRow(status string) wantRow { return wantRow{status: status} }
func lcRow(status string) wantRow { return wantRow{status: status, lifecycle: true} }

// wantRows checks the lease's pending outbox rows, in order: callback status, URL,
// kind, and a body naming the lease, the backend and the storage ID.
func wantRows(t *testing.T, l *leaseUnderTest, want ...wantRow) []messages.Callback {
	t.Helper()
	rows := l.rows()
	var got, wantStatuses []string
	var out []messages.Callback
	for _, r := range rows {
		cb := callback(t, r)
		got = append(got, cb.Status)
		out = append(out, cb)
	}
	for _, w := range want {
		wantStatuses = append(wantStatuses, w.status)
	}
	if !slices.Equal(got, wantStatuses) {
		t.Fatalf("outbox rows %v, want %v", got, wantStatuses)
	}
	spec := l.spec
	for i, r := range rows {
		cb := out[i]
		wantURL, wantKind := spec.CallbackURL, "operation"
		if want[i].lifecycle {
			wantURL, wantKind = spec.LifecycleURL, "lifecycle"
		}
		if r.URL != wantURL || r.Kind != wantKind {
			t.Fatalf("row %d (%s) goes to %s as %q, want %s as %q", i, cb.Status, r.URL, r.Kind, wantURL, wantKind)
		}
		if cb.LeaseUUID != l.id || cb.Backend != l.h.set.BackendName || cb.BackendStorageID != l.h.set.StorageID {
			t.Fatalf("row %d body %+v does not name the lease, backend %q and storage %q", i, cb, l.h.set.BackendName, l.h.set.StorageID)
		}
		if r.DeliveryID == "" || r.Lease != l.id {
			t.Fatalf("row %d: delivery id %q lease %q", i, r.DeliveryID, r.Lease)
		}
	}
	return out
}

// TestLease_Provision_ReadyWithOneSuccessCallbackCommittedWithTheEvent: reserved →
// provisioning → ready journals provision.started then provision.succeeded, and the
// success callback (to the exact callback URL, naming backend and storage) is
// committed in the same transaction as provision.succeeded: a reader never sees one
// without the other, whichever it reads first. The outbox is woken after the
// commit, and the parent hears Ready.
func TestLease_Provision_ReadyWithOneSuccessCallbackCommittedWithTheEvent(t *testing.T) {
	h := newHarness(t, nil)
	spec := newSpec(1)

	// Watch the store while the lease provisions.
	stop, torn := make(chan struct{}), make(chan string, 2)
	watching := make(chan struct{})
	go func() {
		defer close(watching)
		for {
			select {
			case <-stop:
				return
			default:
			}
			row1 := hasSuccessRow(h.store, spec.Lease)
			ev1 := hasEvent(h.store, spec.Lease, lease.EvProvisionSucceeded)
			if row1 && !ev1 {
				torn <- "outbox row visible before provision.succeeded"
				return
			}
			ev2 := hasEvent(h.store, spec.Lease, lease.EvProvisionSucceeded)
			row2 := hasSuccessRow(h.store, spec.Lease)
			if ev2 && !row2 {
				torn <- "provision.succeeded visible before its outbox row"
				return
			}
			if ev2 && row2 {
				return
			}
		}
	}()
	t.Cleanup(func() { close(stop); <-watching })

	l := h.start(spec)
	r := h.awaitReport("ready", isReady)
	if r.Lease != spec.Lease || r.Admission != 1 || r.Running != 1 || r.Info.Status != messages.StatusReady {
		t.Fatalf("ready report %+v", r)
	}
	<-watching
	select {
	case why := <-torn:
		t.Fatalf("journal and outbox were not committed together: %s", why)
	default:
	}

	wantTypes(t, l, lease.EvProvisionStarted, lease.EvReleasePinned, lease.EvProvisionSucceeded)
	recs := l.events()
	started := payload[lease.ProvisionStarted](t, recs[0])
	if started.Admission != 1 || started.Generation != 1 || started.OperationID != spec.OperationID ||
		!started.Deadline.Equal(started.At.Add(h.set.ProvisionTimeout)) {
		t.Fatalf("provision.started %+v", started)
	}
	pinned := payload[lease.ReleasePinned](t, recs[1])
	if len(pinned.Images) != 1 || pinned.Version != 1 || pinned.Images[0].Service != "app" || pinned.Images[0].Ref != unitImage || pinned.Images[0].ID == "" {
		t.Fatalf("release.pinned %+v: want release 1's app image recorded by ID", pinned)
	}
	done := payload[lease.ProvisionSucceeded](t, recs[2])
	ctrs := l.containers()
	if len(ctrs) != 1 || len(done.Containers) != 1 || done.Containers[0].ContainerID != ctrs[0].ID {
		t.Fatalf("provision.succeeded records %+v; the fake runs %+v", done.Containers, ctrs)
	}
	if c := ctrs[0]; c.Generation != 1 || c.OperationID != spec.OperationID || c.State != "running" {
		t.Fatalf("container generation %d operation %q state %s", c.Generation, c.OperationID, c.State)
	}
	if b, ok := done.Containers[0].Ports.Get("8080/tcp"); !ok || b.HostPort == "" {
		t.Fatalf("provision.succeeded records no port binding: %+v", done.Containers[0])
	}
	cbs := wantRows(t, l, opRow(messages.CallbackSuccess))
	if cbs[0].Error != "" {
		t.Fatalf("success callback carries an error: %+v", cbs[0])
	}
	st := l.state()
	if st.Status != lease.Ready || st.FailCount != 0 || len(st.Containers) != 1 {
		t.Fatalf("state %+v", st)
	}

	select {
	case w := <-h.wakes:
		if w.err != nil || w.lease != spec.Lease || !slices.Contains(w.events, lease.EvProvisionSucceeded) || len(w.rows) != 1 {
			t.Fatalf("outbox woken before the commit was visible: %+v", w)
		}
	case <-time.After(unitWait):
		t.Fatalf("the outbox was never woken")
	}
	l.barrier()
	select {
	case w := <-h.wakes:
		t.Fatalf("a second outbox wake: %+v", w)
	default:
	}
}

func hasSuccessRow(store *persistence.Store, id string) bool {
	all, err := store.OutboxAll()
	if err != nil {
		return false
	}
	for _, e := range all {
		if e.Row.Lease == id && strings.Contains(string(e.Row.Body), `"status":"success"`) {
			return true
		}
	}
	return false
}

func hasEvent(store *persistence.Store, id, typ string) bool {
	l, err := store.Load(lease.Stream(id))
	if err != nil {
		return false
	}
	for _, r := range l.Events {
		if r.Type == typ {
			return true
		}
	}
	return false
}

// TestLease_ProvisionFails_OneCuratedFailedCallbackAndCleanup: a start Docker
// refused (its container left created), or a container found exited at verification, ends the attempt with
// provision.failed and exactly one failed row carrying the curated error text;
// fail_count is 1, diagnostics are captured and the attempt's containers are
// removed.
func TestLease_ProvisionFails_OneCuratedFailedCallbackAndCleanup(t *testing.T) {
	for _, tc := range []struct {
		name     string
		arm      func(h *harness) func(l *leaseUnderTest)
		reason   string
		message  string
		errText  string
		exitCode int // of the captured container; -1: nothing was created
	}{
		{
			name: "start refused, container left created",
			arm: func(h *harness) func(*leaseUnderTest) {
				h.eng.RefuseNextStart(errors.New("Error response from daemon: no space left on device"))
				return func(*leaseUnderTest) {}
			},
			reason: messages.ReasonContainerStartFailed, message: "container could not be started",
			errText: "ContainerStartFailed: a container could not be started", exitCode: -1,
		},
		{
			name: "container exited before verification",
			arm: func(h *harness) func(*leaseUnderTest) {
				verify := h.eng.Hold(fake.OpInspect)
				return func(l *leaseUnderTest) {
					awaitGate(h.t, "verification to inspect the container", verify.entered)
					ctrs := l.containers()
					if len(ctrs) != 1 {
						h.t.Fatalf("launched %d containers, want 1", len(ctrs))
					}
					if err := h.eng.Kill(ctrs[0].ID, 3); err != nil {
						h.t.Fatal(err)
					}
					verify.Release()
				}
			},
			reason: messages.ReasonContainerExited, message: "container exited during startup",
			errText: "ContainerExited: a container exited", exitCode: 3,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, nil)
			act := tc.arm(h)
			l := h.start(newSpec(1))
			act(l)
			r := h.awaitReport("failed", func(r messages.LeaseReport) bool { return r.Status == string(lease.Failed) })
			if r.Info.Status != messages.StatusFailed || r.Info.FailCount != 1 || r.Info.Reason != tc.reason {
				t.Fatalf("failed report %+v", r.Info)
			}
			wantTypes(t, l, lease.EvProvisionStarted, lease.EvReleasePinned, lease.EvProvisionFailed)
			failed := payload[lease.ProvisionFailed](t, l.events()[2])
			if failed.Generation != 1 || failed.Reason != tc.reason || failed.Message != tc.message {
				t.Fatalf("provision.failed %+v, want %s %q", failed, tc.reason, tc.message)
			}
			cbs := wantRows(t, l, opRow(messages.CallbackFailed))
			if cbs[0].Error != tc.errText {
				t.Fatalf("callback error %q, want %q", cbs[0].Error, tc.errText)
			}
			if st := l.state(); st.Status != lease.Failed || st.FailCount != 1 {
				t.Fatalf("status %s fail_count %d, want failed/1", st.Status, st.FailCount)
			}
			if h.eng.Calls(fake.OpDown) < 1 {
				t.Fatalf("the failed attempt was never cleaned up (no compose down)")
			}
			if left := l.containers(); len(left) != 0 {
				t.Fatalf("%d containers of the failed attempt remain: %+v", len(left), left)
			}
			capture, err := lease.LatestCapture(h.diag, l.id)
			if err != nil || capture == nil {
				t.Fatalf("no diagnostics captured: %v", err)
			}
			if capture.Reason != tc.reason || capture.Generation != 1 || capture.FailCount != 1 {
				t.Fatalf("capture %+v", capture)
			}
			if tc.exitCode >= 0 && (len(capture.Containers) != 1 || capture.Containers[0].ExitCode != tc.exitCode) {
				t.Fatalf("capture containers %+v, want one that exited %d", capture.Containers, tc.exitCode)
			}
		})
	}
}

// TestLease_HealthCheckedService_FailsUnhealthyBeforePassing: a health-checked
// instance that reports unhealthy before it ever passed fails the provision with
// HealthCheckFailed.
func TestLease_HealthCheckedService_FailsUnhealthyBeforePassing(t *testing.T) {
	h := newHarness(t, func(s *lease.Settings) { s.ProvisionTimeout = 20 * time.Second })
	spec := newSpec(1, checkedService("web", 2))
	h.eng.PinHealth(spec.Lease, "web", "unhealthy")
	l := h.start(spec)
	h.awaitReport("failed", func(r messages.LeaseReport) bool { return r.Status == string(lease.Failed) })
	wantTypes(t, l, lease.EvProvisionStarted, lease.EvReleasePinned, lease.EvProvisionFailed)
	failed := payload[lease.ProvisionFailed](t, l.events()[2])
	if failed.Reason != messages.ReasonHealthCheckFailed || failed.Message != "health check failed during startup" {
		t.Fatalf("provision.failed %+v, want HealthCheckFailed during startup", failed)
	}
	if cbs := wantRows(t, l, opRow(messages.CallbackFailed)); cbs[0].Error != "HealthCheckFailed: a health check did not pass" {
		t.Fatalf("callback error %q", cbs[0].Error)
	}
	if left := l.containers(); len(left) != 0 {
		t.Fatalf("%d containers remain after the failed health check", len(left))
	}
}

// TestLease_HealthCheckedService_PassIsSticky: once an instance passed its health
// check, a later flap to unhealthy (seen by verification while another instance is
// still starting) does not fail the provision: it becomes ready when the other
// instance passes.
func TestLease_HealthCheckedService_PassIsSticky(t *testing.T) {
	h := newHarness(t, func(s *lease.Settings) { s.ProvisionTimeout = 20 * time.Second })
	spec := newSpec(1, checkedService("web", 2))
	h.eng.PinHealth(spec.Lease, "web", "starting") // no automatic transition: the test decides
	l := h.start(spec)
	h.waitFor("verification to poll the cohort", func() bool { return h.eng.Calls(fake.OpInspect) >= 2 })
	var web [2]string
	for _, c := range l.containers() {
		web[c.Index] = c.ID
	}
	if web[0] == "" || web[1] == "" {
		t.Fatalf("cohort %+v, want web/0 and web/1", l.containers())
	}
	// Each verification pass inspects web/0 then web/1; four more inspect calls after
	// a change guarantee that a whole pass saw it and was evaluated.
	passAfterChange := func(what string) {
		t.Helper()
		base := h.eng.Calls(fake.OpInspect)
		h.waitFor(what, func() bool { return h.eng.Calls(fake.OpInspect) >= base+4 })
	}
	if err := h.eng.SetHealth(web[0], "healthy"); err != nil {
		t.Fatal(err)
	}
	passAfterChange("a verification pass to see web/0 healthy")
	if err := h.eng.SetHealth(web[0], "unhealthy"); err != nil {
		t.Fatal(err)
	}
	passAfterChange("a verification pass to see web/0 flap to unhealthy")
	if types := l.eventTypes(); len(types) != 2 {
		t.Fatalf("the flap of a passed instance ended the provision: journal %v", types)
	}
	if err := h.eng.SetHealth(web[1], "healthy"); err != nil {
		t.Fatalf("set web/1 healthy: %v (journal %v)", err, l.eventTypes())
	}
	h.awaitReport("ready", func(r messages.LeaseReport) bool {
		return r.Status != string(lease.Reserved) && r.Status != string(lease.Provisioning)
	})
	wantTypes(t, l, lease.EvProvisionStarted, lease.EvReleasePinned, lease.EvProvisionSucceeded)
	done := payload[lease.ProvisionSucceeded](t, l.events()[2])
	if len(done.Containers) != 2 {
		t.Fatalf("ready cohort %+v, want web/0 and web/1", done.Containers)
	}
	wantRows(t, l, opRow(messages.CallbackSuccess))
}

// TestLease_CloseDuringProvisioning_PreemptedFailedThenDeprovisioned: a close while
// the provision worker is held (in compose up, or in verification with the
// container running) cancels it; the Deprovision reply comes only after the
// teardown finished; the journal has close.requested then closed and no provision
// outcome; the provision's own failed completion (to its callback_url) is queued in
// the close's transaction, before "deprovisioned" to the lifecycle URL; no
// container remains.
func TestLease_CloseDuringProvisioning_PreemptedFailedThenDeprovisioned(t *testing.T) {
	for _, tc := range []struct {
		name       string
		hold       fake.Op
		containers int // running when the close arrives
	}{
		{"held in compose up", fake.OpUp, 0},
		{"held in verification", fake.OpInspect, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, nil)
			spec := newSpec(1)
			h.eng.Delay(tc.hold, time.Hour) // the held call waits until its context ends
			l := h.start(spec)
			h.waitFor("the provision worker to be held", func() bool { return h.eng.Calls(tc.hold) >= 1 })
			h.eng.Delay(tc.hold, 0)
			if got := len(l.containers()); got != tc.containers {
				t.Fatalf("%d containers when the close arrives, want %d", got, tc.containers)
			}
			down := h.eng.Hold(fake.OpDown)
			reply := l.deprovision()
			awaitGate(t, "teardown's compose down", down.entered)
			select {
			case err := <-reply:
				t.Fatalf("deprovision answered %v while teardown was still running", err)
			default:
			}
			wantTypes(t, l, lease.EvProvisionStarted, lease.EvReleasePinned, lease.EvCloseRequested)
			down.Release()
			if err := awaitReply(t, "deprovision", reply, unitWait); err != nil {
				t.Fatalf("deprovision: %v", err)
			}
			wantTypes(t, l, lease.EvProvisionStarted, lease.EvReleasePinned, lease.EvCloseRequested, lease.EvClosed)
			// The pre-empted provision's own failed completion, queued in the close's
			// transaction, comes before the deprovisioned callback.
			if rows := wantRows(t, l, opRow(messages.CallbackFailed), lcRow(messages.CallbackDeprovisioned)); !strings.HasPrefix(rows[0].Error, "Canceled:") {
				t.Fatalf("pre-empted provision's callback error %q, want the curated Canceled text", rows[0].Error)
			}
			if left := l.containers(); len(left) != 0 {
				t.Fatalf("%d containers remain after the close: %+v", len(left), left)
			}
			closed := payload[lease.ClosedEv](t, l.events()[3])
			if closed.Admission != 1 {
				t.Fatalf("closed %+v, want admission 1", closed)
			}
			select {
			case m := <-h.closed:
				if m.Lease != l.id || m.Admission != 1 {
					t.Fatalf("LeaseClosed %+v", m)
				}
			case <-time.After(unitWait):
				t.Fatalf("the parent was never told the lease closed")
			}
			if st := l.state(); st.Status != lease.Closed || st.ClosedAdmission != 1 {
				t.Fatalf("state %s closed admission %d", st.Status, st.ClosedAdmission)
			}
		})
	}
}

// TestLease_CloseDuringFailing_ClosesWithoutFailedCallback: a confirmed death moves a
// ready lease to failing; a close while the failure is still being captured wins:
// no runtime.failed, no "failed" callback, the lease tears down and closes, and the
// Deprovision is answered.
func TestLease_CloseDuringFailing_ClosesWithoutFailedCallback(t *testing.T) {
	h := newHarness(t, nil)
	l, ctr := readyLease(t, h)
	h.eng.Delay(fake.OpLogs, time.Hour) // holds the failure capture until canceled
	if err := h.eng.Kill(ctr.ID, 1); err != nil {
		t.Fatal(err)
	}
	l.send(&messages.ContainerDied{ContainerID: ctr.ID, Generation: 1, ExitCode: 1, Counted: true})
	failing := payload[lease.RuntimeFailing](t, l.waitEvent(lease.EvRuntimeFailing))
	if failing.ContainerID != ctr.ID || failing.ExitCode != 1 || !failing.Counted {
		t.Fatalf("runtime.failing %+v", failing)
	}
	h.waitFor("the failure capture to be held reading logs", func() bool { return h.eng.Calls(fake.OpLogs) >= 1 })
	h.eng.Delay(fake.OpLogs, 0)
	reply := l.deprovision()
	select {
	case err := <-reply:
		if err != nil {
			t.Fatalf("deprovision: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("a close during failing never completed: %s", l.describe())
	}
	wantTypes(t, l, lease.EvProvisionStarted, lease.EvReleasePinned, lease.EvProvisionSucceeded, lease.EvRuntimeFailing,
		lease.EvCloseRequested, lease.EvClosed)
	wantRows(t, l, opRow(messages.CallbackSuccess), lcRow(messages.CallbackDeprovisioned))
	if left := l.containers(); len(left) != 0 {
		t.Fatalf("%d containers remain after the close", len(left))
	}
}

// TestLease_StaleOrDuplicateDeaths_NothingJournaled: a death for a container that
// still runs, of another generation, for a container the lease does not own, or a
// repeat of a death already handled, journals nothing; the one real death
// journals exactly one runtime.failing and one runtime.failed.
func TestLease_StaleOrDuplicateDeaths_NothingJournaled(t *testing.T) {
	h := newHarness(t, nil)
	l, ctr := readyLease(t, h)
	readyJournal := []string{lease.EvProvisionStarted, lease.EvReleasePinned, lease.EvProvisionSucceeded}

	// Still running: the confirming inspect sees it running.
	confirm := h.eng.Hold(fake.OpInspect)
	l.send(&messages.ContainerDied{ContainerID: ctr.ID, Generation: 1, ExitCode: 137, Counted: true})
	awaitGate(t, "the death to be confirmed by an inspect", confirm.entered)
	confirm.Release()
	awaitGate(t, "the confirming inspect to return", confirm.returned)
	l.barrier()
	wantTypes(t, l, readyJournal...)

	// Now it really exited; deaths of another generation or of containers the lease
	// does not own are dropped before any inspect.
	if err := h.eng.Kill(ctr.ID, 7); err != nil {
		t.Fatal(err)
	}
	inspects := h.eng.Calls(fake.OpInspect)
	for _, d := range []messages.ContainerDied{
		{ContainerID: ctr.ID, Generation: 2, ExitCode: 7, Counted: true},
		{ContainerID: ctr.ID, Generation: 0, ExitCode: 7, Counted: true},
		{ContainerID: strings.Repeat("ab", 32), Generation: 1, ExitCode: 7, Counted: true},
		{ContainerID: ctr.ID[:12], Generation: 1, ExitCode: 7, Counted: true},
	} {
		l.send(&d)
	}
	l.barrier()
	h.stayQuiet("stale deaths were sent to be confirmed by an inspect", 200*time.Millisecond, func() bool {
		return h.eng.Calls(fake.OpInspect) != inspects
	})
	wantTypes(t, l, readyJournal...)

	// The real death (reported uncounted), then a duplicate of it.
	l.send(&messages.ContainerDied{ContainerID: ctr.ID, Generation: 1, ExitCode: 7, Counted: false})
	failing := payload[lease.RuntimeFailing](t, l.waitEvent(lease.EvRuntimeFailing))
	if failing.ContainerID != ctr.ID || failing.ExitCode != 7 || failing.Counted || failing.Service != "app" || failing.Index != 0 {
		t.Fatalf("runtime.failing %+v, want the real death (exit 7, uncounted)", failing)
	}
	l.send(&messages.ContainerDied{ContainerID: ctr.ID, Generation: 1, ExitCode: 7, Counted: true})
	l.waitEvent(lease.EvRuntimeFailed)
	l.send(&messages.ContainerDied{ContainerID: ctr.ID, Generation: 1, ExitCode: 7, Counted: true})
	l.barrier()
	wantTypes(t, l, lease.EvProvisionStarted, lease.EvReleasePinned, lease.EvProvisionSucceeded, lease.EvRuntimeFailing, lease.EvRuntimeFailed)
	cbs := wantRows(t, l, opRow(messages.CallbackSuccess), lcRow(messages.CallbackFailed))
	if cbs[1].Error != "ContainerExited: a container exited" {
		t.Fatalf("runtime failure callback error %q", cbs[1].Error)
	}
	if st := l.state(); st.Status != lease.Failed || st.FailCount != 1 || st.Budget.Streak != 0 {
		t.Fatalf("state %s fail_count %d streak %d, want failed/1/0 (uncounted)", st.Status, st.FailCount, st.Budget.Streak)
	}
}

// TestLease_RestartWhileVerifying_ResumesToOneTerminalEvent: a chaos crash while the
// provision worker is held in verification restarts the actor; the old worker is
// drained, its canceled completion ignored, and the new incarnation resumes the
// running cohort (no second compose up, no second provision.started) to Ready.
func TestLease_RestartWhileVerifying_ResumesToOneTerminalEvent(t *testing.T) {
	h := newHarness(t, nil)
	h.eng.Delay(fake.OpInspect, time.Hour)
	l := h.start(newSpec(1))
	h.waitFor("verification to be held", func() bool { return h.eng.Calls(fake.OpInspect) >= 1 })
	h.eng.Delay(fake.OpInspect, 0) // the held call stays held until canceled
	l.send(&messages.Crash{})
	h.waitFor("the lease actor to be restarted", func() bool { return l.restarts() >= 1 })
	l.waitEvent(lease.EvProvisionSucceeded)
	l.barrier()
	wantTypes(t, l, lease.EvProvisionStarted, lease.EvReleasePinned, lease.EvProvisionSucceeded)
	if n := h.eng.Calls(fake.OpUp); n != 1 {
		t.Fatalf("compose up ran %d times, want once (the restart resumes, it does not relaunch)", n)
	}
	wantRows(t, l, opRow(messages.CallbackSuccess))
	done := payload[lease.ProvisionSucceeded](t, l.events()[2])
	ctrs := l.containers()
	if len(ctrs) != 1 || len(done.Containers) != 1 || done.Containers[0].ContainerID != ctrs[0].ID {
		t.Fatalf("ready cohort %+v, fake runs %+v", done.Containers, ctrs)
	}
}

// TestLease_RestartWithADefiniteOutcomeInFlight_StaleEpochIgnored: the old worker of
// a crashed incarnation finishes with a definite failure (ContainerExited) after the
// restart; its completion carries the old epoch and is ignored. The new
// incarnation's resume finds the interrupted attempt's cohort gone and starts the
// provision again at once under a new generation, within the same deadline: the
// only terminal event is the retry's, and the only callback its success.
func TestLease_RestartWithADefiniteOutcomeInFlight_StaleEpochIgnored(t *testing.T) {
	h := newHarness(t, func(s *lease.Settings) { s.ProvisionTimeout = 10 * time.Second })
	verify := h.eng.Hold(fake.OpInspect)
	cleanup := h.eng.Hold(fake.OpDown)
	l := h.start(newSpec(1))
	awaitGate(t, "verification to inspect", verify.entered)
	ctrs := l.containers()
	if len(ctrs) != 1 {
		t.Fatalf("launched %d containers, want 1", len(ctrs))
	}
	if err := h.eng.Kill(ctrs[0].ID, 3); err != nil {
		t.Fatal(err)
	}
	verify.Release()
	awaitGate(t, "the failed attempt's cleanup", cleanup.entered) // the worker holds a ContainerExited outcome
	l.send(&messages.Crash{})
	cleanup.Release()
	h.waitFor("the lease actor to be restarted", func() bool { return l.restarts() >= 1 })
	h.awaitReport("ready after the retry", isReady)
	l.barrier()
	wantTypes(t, l, lease.EvProvisionStarted, lease.EvReleasePinned, lease.EvProvisionStarted, lease.EvProvisionSucceeded)
	first := payload[lease.ProvisionStarted](t, l.events()[0])
	retry := payload[lease.ProvisionStarted](t, l.events()[2])
	if retry.Generation != first.Generation+1 || retry.Admission != first.Admission || !retry.Deadline.Equal(first.Deadline) || retry.Release != nil {
		t.Fatalf("retry %+v after %+v: want the same admission and deadline under the next generation", retry, first)
	}
	wantRows(t, l, opRow(messages.CallbackSuccess))
}

// journalStarted writes a provision.started with no completion, as a worker that
// died with its actor (or the process) leaves it.
func journalStarted(t *testing.T, h *harness, spec *lease.Spec, started, deadline time.Time) {
	t.Helper()
	ev := mkEvent(lease.EvProvisionStarted, started, lease.ProvisionStarted{Admission: spec.Admission, Generation: 1,
		OperationID: spec.OperationID, At: started, Deadline: deadline})
	if _, err := h.store.Commit(persistence.Write{Appends: []persistence.Append{{Stream: lease.Stream(spec.Lease), Events: []persistence.Event{ev}}}}); err != nil {
		t.Fatalf("journal provision.started: %v", err)
	}
}

// launchInFake makes the fake run generation 1 of the lease's service "app" with
// quantity instances, labelled as the lease's own launch would be.
func launchInFake(t *testing.T, h *harness, spec *lease.Spec, quantity int) {
	t.Helper()
	ctx := context.Background()
	img, err := h.eng.Engine.InspectImage(ctx, unitImage)
	if err != nil {
		t.Fatal(err)
	}
	netID, err := h.eng.Engine.EnsureNetwork(ctx, dockerio.NetworkSpec{Lease: spec.Lease, Tenant: spec.Tenant,
		BackendName: h.set.BackendName, InstallationID: h.set.InstallationID})
	if err != nil {
		t.Fatal(err)
	}
	plan := dockerio.Plan{Lease: spec.Lease, Tenant: spec.Tenant, ProviderUUID: spec.ProviderUUID,
		BackendName: h.set.BackendName, InstallationID: h.set.InstallationID, OperationID: spec.OperationID,
		Generation: 1, CallbackURL: spec.CallbackURL, LifecycleURL: spec.LifecycleURL, NetworkID: netID,
		HostBindIP: h.set.HostBindIP, Services: []dockerio.ServicePlan{{Name: "app", SKU: "docker-small",
			Quantity: quantity, Service: manifest.Service{Image: unitImage, Ports: map[string]manifest.Port{"8080/tcp": {}}}, ImageID: img.ID}}}
	if err := h.eng.Engine.Up(ctx, plan); err != nil {
		t.Fatalf("launch in fake: %v", err)
	}
}

// TestLease_ResumeAfterRestart: a journal with provision.started and no completion
// is resumed by the actor's Started: a complete running cohort of that generation
// is verified to Ready (without a new attempt); with nothing launched the lease
// stays provisioning until the deadline, then fails Internal and cleans up; past
// the deadline an incomplete cohort is failed and removed at once.
func TestLease_ResumeAfterRestart(t *testing.T) {
	t.Run("complete running cohort resumes to ready", func(t *testing.T) {
		h := newHarness(t, nil)
		spec := newSpec(1)
		launchInFake(t, h, spec, 1)
		ups, pulls := h.eng.Calls(fake.OpUp), h.eng.Calls(fake.OpPullImage)
		now := time.Now()
		journalStarted(t, h, spec, now, now.Add(h.set.ProvisionTimeout))
		l := h.start(spec)
		first := h.awaitReport("after start", func(messages.LeaseReport) bool { return true })
		if first.Status != string(lease.Provisioning) {
			t.Fatalf("first report %s, want provisioning", first.Status)
		}
		h.awaitReport("ready", isReady)
		wantTypes(t, l, lease.EvProvisionStarted, lease.EvProvisionSucceeded)
		if h.eng.Calls(fake.OpUp) != ups || h.eng.Calls(fake.OpPullImage) != pulls {
			t.Fatalf("the resume launched a new attempt (up %d→%d, pull %d→%d)", ups, h.eng.Calls(fake.OpUp), pulls, h.eng.Calls(fake.OpPullImage))
		}
		done := payload[lease.ProvisionSucceeded](t, l.events()[1])
		ctrs := l.containers()
		if done.Generation != 1 || len(done.Containers) != 1 || len(ctrs) != 1 || done.Containers[0].ContainerID != ctrs[0].ID {
			t.Fatalf("provision.succeeded %+v; fake runs %+v", done, ctrs)
		}
		wantRows(t, l, opRow(messages.CallbackSuccess))
	})

	t.Run("nothing launched: started again at once under a new generation", func(t *testing.T) {
		h := newHarness(t, nil)
		spec := newSpec(1)
		now := time.Now()
		journalStarted(t, h, spec, now, now.Add(h.set.ProvisionTimeout))
		l := h.start(spec)
		h.awaitReport("ready", isReady)
		l.barrier()
		wantTypes(t, l, lease.EvProvisionStarted, lease.EvProvisionStarted, lease.EvReleasePinned, lease.EvProvisionSucceeded)
		if retry := payload[lease.ProvisionStarted](t, l.events()[1]); retry.Generation != 2 {
			t.Fatalf("retry generation %d, want 2", retry.Generation)
		}
		if done := payload[lease.ProvisionSucceeded](t, l.events()[3]); done.Generation != 2 {
			t.Fatalf("ready generation %d, want 2", done.Generation)
		}
		wantRows(t, l, opRow(messages.CallbackSuccess))
	})

	t.Run("incomplete cohort: removed by exact ID, then started again", func(t *testing.T) {
		h := newHarness(t, nil)
		spec := newSpec(1, plainService("app", 2))
		launchInFake(t, h, spec, 1) // app/0 only: an interrupted launch
		stale := leaseContainers(t, h, spec.Lease)
		now := time.Now()
		journalStarted(t, h, spec, now, now.Add(h.set.ProvisionTimeout))
		l := h.start(spec)
		h.awaitReport("ready", isReady)
		ctrs := l.containers()
		if len(ctrs) != 2 {
			t.Fatalf("%d containers after the retry, want 2", len(ctrs))
		}
		for _, c := range ctrs {
			if c.ID == stale[0].ID || c.Generation != 2 {
				t.Fatalf("container %s of generation %d survived or was reused; want generation 2 only", c.ID, c.Generation)
			}
		}
		if h.eng.Calls(fake.OpStopRemove) < 1 {
			t.Fatalf("the interrupted launch was not removed by exact ID")
		}
		wantRows(t, l, opRow(messages.CallbackSuccess))
	})

	t.Run("incomplete cohort past the deadline: failed and removed at once", func(t *testing.T) {
		h := newHarness(t, nil)
		spec := newSpec(1, plainService("app", 2))
		launchInFake(t, h, spec, 1) // app/0 only
		now := time.Now()
		journalStarted(t, h, spec, now.Add(-time.Minute), now.Add(-time.Second))
		if n := len(leaseContainers(t, h, spec.Lease)); n != 1 {
			t.Fatalf("fixture: %d containers, want 1", n)
		}
		l := h.start(spec)
		failed := payload[lease.ProvisionFailed](t, l.waitEvent(lease.EvProvisionFailed))
		if failed.Reason != messages.ReasonInternal || failed.Message != "provisioning did not complete in time" {
			t.Fatalf("provision.failed %+v", failed)
		}
		if left := l.containers(); len(left) != 0 {
			t.Fatalf("%d containers of the incomplete cohort remain", len(left))
		}
		wantRows(t, l, opRow(messages.CallbackFailed))
	})
}

// TestLease_InventoryWithoutRunningContainer_FailsUncounted: a ready lease given an
// inventory where its container is missing or exited journals runtime.failing
// (uncounted) before it closes the Reply channel, then runtime.failed with one
// failed lifecycle callback. An inventory with the cohort running changes nothing.
func TestLease_InventoryWithoutRunningContainer_FailsUncounted(t *testing.T) {
	for _, tc := range []struct {
		name string
		list func(ctr messages.Container) []messages.Container
		die  func(h *harness, ctr messages.Container) // what really happened in Docker
		exit int
	}{
		{"container missing", func(messages.Container) []messages.Container { return nil },
			func(h *harness, c messages.Container) {
				if err := h.eng.RemoveContainers(context.Background(), []string{c.ID}); err != nil {
					h.t.Fatal(err)
				}
			}, -1},
		{"container exited", func(c messages.Container) []messages.Container {
			c.State, c.ExitCode = "exited", 3
			return []messages.Container{c}
		}, func(h *harness, c messages.Container) {
			if err := h.eng.Kill(c.ID, 3); err != nil {
				h.t.Fatal(err)
			}
		}, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, nil)
			l, ctr := readyLease(t, h)
			inventory := func(list []messages.Container) {
				t.Helper()
				reply := make(chan messages.InventoryAck, 1)
				l.send(&messages.Inventory{Containers: list, Reply: reply})
				select {
				case <-reply:
				case <-time.After(unitWait):
					t.Fatalf("the lease never answered the inventory")
				}
			}
			inventory([]messages.Container{ctr})
			wantTypes(t, l, lease.EvProvisionStarted, lease.EvReleasePinned, lease.EvProvisionSucceeded)

			// A listing that predates the cohort (the container still runs) is only a
			// hint: the inspect finds it running and nothing is journaled.
			inventory(tc.list(ctr))
			h.stayQuiet("a stale listing failed a running lease", 200*time.Millisecond, func() bool {
				return len(l.events()) > 3
			})

			tc.die(h, ctr)
			inventory(tc.list(ctr))
			rec := l.waitEvent(lease.EvRuntimeFailing)
			failing := payload[lease.RuntimeFailing](t, rec)
			if failing.Counted || failing.ContainerID != ctr.ID || failing.ExitCode != tc.exit {
				t.Fatalf("runtime.failing %+v, want uncounted, exit %d", failing, tc.exit)
			}
			l.waitEvent(lease.EvRuntimeFailed)
			l.barrier()
			wantTypes(t, l, lease.EvProvisionStarted, lease.EvReleasePinned, lease.EvProvisionSucceeded, lease.EvRuntimeFailing, lease.EvRuntimeFailed)
			cbs := wantRows(t, l, opRow(messages.CallbackSuccess), lcRow(messages.CallbackFailed))
			if cbs[1].Error != "ContainerExited: a container exited" {
				t.Fatalf("failed callback error %q", cbs[1].Error)
			}
			if st := l.state(); st.Status != lease.Failed || st.FailCount != 1 || st.Budget.Streak != 0 {
				t.Fatalf("state %s fail_count %d streak %d", st.Status, st.FailCount, st.Budget.Streak)
			}
			h.awaitReport("failed", func(r messages.LeaseReport) bool { return r.Status == string(lease.Failed) })
		})
	}
}

// TestLease_TeardownFailsOnce_RetriedThenClosed: a compose down that fails (Docker
// unavailable) is retried after TeardownRetry; the Deprovision is answered
// lifecycle_pending as soon as the first attempt failed (held: a close asked
// meanwhile is answered so at once), and closed is journaled once, by the retry.
func TestLease_TeardownFailsOnce_RetriedThenClosed(t *testing.T) {
	h := newHarness(t, nil)
	l, _ := readyLease(t, h)
	first, second := h.eng.Hold(fake.OpDown), h.eng.Hold(fake.OpDown)
	reply := l.deprovision()
	awaitGate(t, "teardown's first compose down", first.entered)
	h.eng.SetUnavailable(true)
	first.Release()
	awaitGate(t, "the first compose down to fail", first.returned)
	h.eng.SetUnavailable(false)
	awaitGate(t, "teardown to be retried", second.entered)
	if err := awaitReply(t, "deprovision", reply, unitWait); !errors.Is(err, messages.ErrLifecyclePending) {
		t.Fatalf("deprovision of a held close answered %v, want lifecycle_pending", err)
	}
	if err := awaitReply(t, "deprovision asked again", l.deprovision(), unitWait); !errors.Is(err, messages.ErrLifecyclePending) {
		t.Fatalf("deprovision asked while held answered %v, want lifecycle_pending at once", err)
	}
	// Held on a failing teardown, not on a volume: the close to page on.
	if p, held, unheld := h.gauge("berth_pending_close_intents"), h.gauge("berth_close_intents_delete_held"),
		h.gauge("berth_oldest_unheld_close_intent_age_seconds"); p != 1 || held != 0 || unheld <= 0 {
		t.Fatalf("close-intent gauges while the teardown is retried: pending %v, delete_held %v, oldest unheld %v", p, held, unheld)
	}
	wantTypes(t, l, lease.EvProvisionStarted, lease.EvReleasePinned, lease.EvProvisionSucceeded, lease.EvCloseRequested)
	second.Release()
	l.waitEvent(lease.EvClosed)
	if err := awaitReply(t, "deprovision once closed", l.deprovision(), unitWait); err != nil {
		t.Fatalf("deprovision: %v", err)
	}
	wantTypes(t, l, lease.EvProvisionStarted, lease.EvReleasePinned, lease.EvProvisionSucceeded, lease.EvCloseRequested, lease.EvClosed)
	wantRows(t, l, opRow(messages.CallbackSuccess), lcRow(messages.CallbackDeprovisioned))
	if n := h.eng.Calls(fake.OpDown); n != 2 {
		t.Fatalf("compose down ran %d times, want 2 (one failure, one retry)", n)
	}
	if left := l.containers(); len(left) != 0 {
		t.Fatalf("%d containers remain after the close", len(left))
	}
}

// TestLease_TransientDockerErrorDuringVerification_RetriedNotFailed: Docker stops
// answering for a moment while the cohort is verified; the inspect is retried and
// the provision reaches Ready — a transient engine error is never turned into a
// tenant-visible failure.
func TestLease_TransientDockerErrorDuringVerification_RetriedNotFailed(t *testing.T) {
	h := newHarness(t, nil)
	verify := h.eng.Hold(fake.OpInspect)
	l := h.start(newSpec(1))
	awaitGate(t, "verification to inspect", verify.entered)
	h.eng.SetUnavailable(true)
	verify.Release() // this inspect fails: Docker is unavailable
	h.waitFor("a failed inspect to be retried", func() bool { return h.eng.Calls(fake.OpInspect) >= 3 })
	h.eng.SetUnavailable(false)
	h.awaitReport("ready", isReady)
	l.barrier()
	wantTypes(t, l, lease.EvProvisionStarted, lease.EvReleasePinned, lease.EvProvisionSucceeded)
	wantRows(t, l, opRow(messages.CallbackSuccess))
}

// statefulReady provisions a one-instance stateful lease to Ready and returns it
// with its volume's name.
func statefulReady(t *testing.T, h *harness) (*leaseUnderTest, string) {
	t.Helper()
	l := h.start(newSpec(1, statefulService("app", 1)))
	h.awaitReport("ready", isReady)
	name := messages.VolumeName(l.id, "app", 0)
	if q, ok := h.vols.Quota(name); !ok || q != 512 {
		t.Fatalf("volume %s quota %d (exists %t), want 512", name, q, ok)
	}
	return l, name
}

// TestLease_StatefulUserOverride_MountPointsBelongToTheManifestUser: the
// volume's mount points are given to the manifest's user override (it is who
// writes them), and a user the image does not know fails the provision as an
// image problem without launching anything.
func TestLease_StatefulUserOverride_MountPointsBelongToTheManifestUser(t *testing.T) {
	h := newHarness(t, nil)
	svc := statefulService("app", 1)
	svc.Manifest.User = "1000:1001"
	l := h.start(newSpec(1, svc))
	h.awaitReport("ready", isReady)
	if uid, gid, ok := h.vols.Owner(messages.VolumeName(l.id, "app", 0)); !ok || uid != 1000 || gid != 1001 {
		t.Fatalf("volume owner %d:%d (exists %t), want 1000:1001", uid, gid, ok)
	}

	bad := statefulService("app", 1)
	bad.Manifest.User = "nobody-here"
	h.start(newSpec(2, bad))
	r := h.awaitReport("failed", func(r messages.LeaseReport) bool { return r.Status == string(lease.Failed) })
	if r.Info.Reason != messages.ReasonImagePullFailed || r.Running != 0 {
		t.Fatalf("failed report %+v, want reason %q and nothing running", r, messages.ReasonImagePullFailed)
	}
}

// TestLease_CloseRetaining_VolumeRenamedRecordInTheClosedReceipt: a close the
// registry decided to retain renames the volume into the retention namespace,
// measures it, and journals the record in the closed receipt together with the
// deprovisioned callback saying retained: true.
func TestLease_CloseRetaining_VolumeRenamedRecordInTheClosedReceipt(t *testing.T) {
	h := newHarness(t, func(s *lease.Settings) { s.RetentionMaxAge = time.Hour })
	l, name := statefulReady(t, h)
	h.vols.Fill(name, 3<<20)
	if err := awaitReply(t, "deprovision", l.deprovisionRetaining(), unitWait); err != nil {
		t.Fatal(err)
	}
	retained := messages.RetainedVolumeName(l.id, "app", 0)
	if got := h.vols.Names(); len(got) != 1 || got[0] != retained {
		t.Fatalf("volumes %v, want only %s", got, retained)
	}
	closed := payload[lease.ClosedEv](t, l.waitEvent(lease.EvClosed))
	rec := closed.Retention
	if rec == nil || len(rec.Volumes) != 1 || rec.Volumes[0].Name != retained || rec.Volumes[0].UsedBytes != 3<<20 ||
		rec.Volumes[0].QuotaMB != 512 || rec.Tenant == "" || len(rec.Manifest) == 0 || rec.RetainedUntil.Sub(rec.RetainedAt) != time.Hour {
		t.Fatalf("retention record %+v", rec)
	}
	if len(rec.Images) != 1 || rec.Images[0].ID == "" {
		t.Fatalf("retention record keeps no exact image: %+v", rec.Images)
	}
	rows := wantRows(t, l, opRow(messages.CallbackSuccess), lcRow(messages.CallbackDeprovisioned))
	if !rows[1].Retained {
		t.Fatalf("deprovisioned callback %+v, want retained: true", rows[1])
	}
	if got := <-h.closed; got.Retention == nil || got.Retention.Volumes[0].Name != retained {
		t.Fatalf("LeaseClosed %+v carries no retention record", got)
	}
}

// TestLease_CloseDestroying_BusyVolumeHeld_CloseWaitsUntilGone: a close that does
// not retain destroys the volume; a busy one is handed to the volumehold actor and
// the close stays pending (no closed receipt, answered lifecycle_pending) until
// the hold reports it gone.
func TestLease_CloseDestroying_BusyVolumeHeld_CloseWaitsUntilGone(t *testing.T) {
	h := newHarness(t, nil)
	l, name := statefulReady(t, h)
	h.vols.SetBusy(name, -1)
	reply := l.deprovision()
	h.waitFor("the destroy to be refused busy", func() bool { return h.vols.Calls("destroy") >= 1 })
	h.stayQuiet("a close with a held volume closed", 300*time.Millisecond, func() bool {
		return slices.Contains(l.eventTypes(), lease.EvClosed)
	})
	if err := awaitReply(t, "deprovision", reply, unitWait); !errors.Is(err, messages.ErrLifecyclePending) {
		t.Fatalf("deprovision answered %v while its volume is held, want lifecycle_pending", err)
	}
	// The close-intent gauges: one pending, held only on its volume, so not
	// the one to page on.
	if p, held, unheld := h.gauge("berth_pending_close_intents"), h.gauge("berth_close_intents_delete_held"),
		h.gauge("berth_oldest_unheld_close_intent_age_seconds"); p != 1 || held != 1 || unheld != 0 || h.gauge("berth_oldest_close_intent_age_seconds") <= 0 {
		t.Fatalf("close-intent gauges while held on a volume: pending %v, delete_held %v, oldest unheld %v", p, held, unheld)
	}
	h.vols.SetBusy(name, 0)
	l.send(&messages.VolumeHoldDone{Name: name})
	l.waitEvent(lease.EvClosed)
	if err := awaitReply(t, "deprovision once closed", l.deprovision(), unitWait); err != nil {
		t.Fatal(err)
	}
	if p, held := h.gauge("berth_pending_close_intents"), h.gauge("berth_close_intents_delete_held"); p != 0 || held != 0 {
		t.Fatalf("close-intent gauges once closed: pending %v, delete_held %v", p, held)
	}
	if got := h.vols.Names(); len(got) != 0 {
		t.Fatalf("volumes %v remain after the close", got)
	}
	if rows := wantRows(t, l, opRow(messages.CallbackSuccess), lcRow(messages.CallbackDeprovisioned)); rows[1].Retained {
		t.Fatalf("a destroying close said retained")
	}
}

// restoreSpec is a restore admission of source's retained app/0 volume.
func restoreSpec(source string) *lease.Spec {
	spec := newSpec(1, statefulService("app", 1))
	spec.Restore = &lease.RestoreFrom{From: source, Volumes: []lease.RestoreVolume{{Service: "app", Index: 0,
		Retained: messages.RetainedVolumeName(source, "app", 0), SourceQuotaMB: 256}}}
	return spec
}

// TestLease_Restore_AdoptsRetainedVolumeWithItsQuota: a restore renames the
// retained volume into its own name, gives it the destination's quota, and
// deploys on it; its provision status reads restarting until Ready.
func TestLease_Restore_AdoptsRetainedVolumeWithItsQuota(t *testing.T) {
	h := newHarness(t, nil)
	source := uuid.NewString()
	retained := messages.RetainedVolumeName(source, "app", 0)
	if _, err := h.vols.Ensure(context.Background(), retained, 256, []string{"data"}, 0, 0); err != nil {
		t.Fatal(err)
	}
	spec := restoreSpec(source)
	l := h.start(spec)
	h.awaitReport("ready", isReady)
	name := messages.VolumeName(l.id, "app", 0)
	if got := h.vols.Names(); len(got) != 1 || got[0] != name {
		t.Fatalf("volumes %v, want the adopted %s only", got, name)
	}
	if q, _ := h.vols.Quota(name); q != 512 {
		t.Fatalf("adopted quota %d, want the destination tier's 512", q)
	}
	wantRows(t, l, opRow(messages.CallbackSuccess))
}

// TestLease_Restore_FailsBeforeCommit_VolumeHandedBackWithSourceQuota: a restore
// whose launch fails hands the adopted volume back to its retained name and the
// source's quota, and fails RestoreFailed.
func TestLease_Restore_FailsBeforeCommit_VolumeHandedBackWithSourceQuota(t *testing.T) {
	h := newHarness(t, nil)
	source := uuid.NewString()
	retained := messages.RetainedVolumeName(source, "app", 0)
	if _, err := h.vols.Ensure(context.Background(), retained, 256, []string{"data"}, 0, 0); err != nil {
		t.Fatal(err)
	}
	h.eng.RefuseNextStart(errors.New("compose refused the launch"))
	l := h.start(restoreSpec(source))
	failed := payload[lease.ProvisionFailed](t, l.waitEvent(lease.EvProvisionFailed))
	if failed.Reason != messages.ReasonRestoreFailed {
		t.Fatalf("provision.failed %+v, want RestoreFailed", failed)
	}
	if got := h.vols.Names(); len(got) != 1 || got[0] != retained {
		t.Fatalf("volumes %v, want the data back under %s", got, retained)
	}
	if q, _ := h.vols.Quota(retained); q != 256 {
		t.Fatalf("handed-back quota %d, want the source's 256", q)
	}
	if rows := wantRows(t, l, opRow(messages.CallbackFailed)); !strings.HasPrefix(rows[0].Error, "RestoreFailed") {
		t.Fatalf("callback error %q", rows[0].Error)
	}
}

// TestLease_Restore_ClosedBeforeCommit_VolumeHandedBack: a close that pre-empts a
// restore hands the adopted volume back (never destroys or re-retains it) and the
// closed receipt names the source it went back to.
func TestLease_Restore_ClosedBeforeCommit_VolumeHandedBack(t *testing.T) {
	h := newHarness(t, nil)
	source := uuid.NewString()
	retained := messages.RetainedVolumeName(source, "app", 0)
	if _, err := h.vols.Ensure(context.Background(), retained, 256, []string{"data"}, 0, 0); err != nil {
		t.Fatal(err)
	}
	up := h.eng.Hold(fake.OpUp)
	l := h.start(restoreSpec(source))
	awaitGate(t, "the restore's launch", up.entered)
	reply := l.deprovisionRetaining() // the registry never retains a restore; the lease refuses to anyway
	up.Release()
	if err := awaitReply(t, "deprovision", reply, unitWait); err != nil {
		t.Fatal(err)
	}
	if got := h.vols.Names(); len(got) != 1 || got[0] != retained {
		t.Fatalf("volumes %v, want the data back under %s", got, retained)
	}
	closed := payload[lease.ClosedEv](t, l.waitEvent(lease.EvClosed))
	if closed.Requarantined != source || closed.Retention != nil {
		t.Fatalf("closed %+v, want requarantined %s and no new record", closed, source)
	}
}
