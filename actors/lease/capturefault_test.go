package lease_test

import (
	"errors"
	"testing"
	"time"

	"github.com/berth-dev/berth/actors/lease"
	"github.com/berth-dev/berth/messages"
	"github.com/berth-dev/berth/supervisors"
)

// TestCaptureFault_DiagnosticsWriteFails_ContainersKeptUntilWrittenThenRemoved:
// a provision that definitely failed (its container never started) while
// diagnostics.db refuses writes keeps the container — the evidence — and says
// so in provision.failed; the capture and cleanup are retried on the kit's
// backoff, never removing the container before its capture is stored; once the
// store writes again the capture is stored once and the container removed. One
// failed callback, however many retries.
func TestCaptureFault_DiagnosticsWriteFails_ContainersKeptUntilWrittenThenRemoved(t *testing.T) {
	h := newHarness(t, func(s *lease.Settings) {
		s.CleanupRetry = supervisors.Retry{Base: 50 * time.Millisecond, Cap: 400 * time.Millisecond}
	})
	faulty := &lease.FaultyDiagnostics{Diagnostics: h.diag}
	faulty.Failing.Store(true)
	h.deps.Diag = faulty
	h.eng.RefuseNextStart(errors.New("injected: start refused"))
	l := h.start(newSpec(1))
	h.awaitReport("failed", func(r messages.LeaseReport) bool { return r.Status == string(lease.Failed) })
	failed := payload[lease.ProvisionFailed](t, l.waitEvent(lease.EvProvisionFailed))
	if !failed.Kept {
		t.Fatalf("provision.failed %+v does not say its containers were kept", failed)
	}
	h.waitFor("the capture retried three times", func() bool { return faulty.Refused.Load() >= 4 })
	if got := l.containers(); len(got) != 1 {
		t.Fatalf("containers %+v while the capture is unwritten, want the failed attempt's one kept", got)
	}
	if c, err := lease.LatestCapture(h.diag, l.id); err != nil || c != nil {
		t.Fatalf("a capture stored (%+v, %v) although every write failed", c, err)
	}

	faulty.Failing.Store(false)
	h.waitFor("the kept container removed once its capture is written", func() bool { return len(l.containers()) == 0 })
	capt, err := lease.LatestCapture(h.diag, l.id)
	if err != nil || capt == nil || capt.Kind != lease.CaptureProvision || capt.Generation != failed.Generation || len(capt.Containers) != 1 {
		t.Fatalf("stored capture %+v (%v), want the provision's of generation %d with its container", capt, err, failed.Generation)
	}
	refused := faulty.Refused.Load()
	h.stayQuiet("a cleanup retried after it succeeded", time.Second, func() bool { return faulty.Refused.Load() != refused })
	if n, err := h.diag.Count(l.id); err != nil || n != 1 {
		t.Fatalf("%d captures stored (%v), want exactly one", n, err)
	}
	wantRows(t, l, opRow(messages.CallbackFailed))
	if st := l.state(); st.Status != lease.Failed || st.FailCount != 1 {
		t.Fatalf("state %s fail_count %d, want failed once", st.Status, st.FailCount)
	}
}

// TestDecide_FailedCleanup_KeptContainersRetriedOnTheBackoff: the rows of a
// failed attempt whose containers were kept.
func TestDecide_FailedCleanup_KeptContainersRetriedOnTheBackoff(t *testing.T) {
	kept := func() *journal {
		j := jProvisioning()
		return j.put(lease.EvProvisionFailed, lease.ProvisionFailed{Stamp: lease.Stamp{Generation: 1, At: j.tick()},
			Cause: lease.Cause{Reason: messages.ReasonContainerStartFailed, Message: "a container could not be started"}, Kept: true})
	}
	cleanup := string(lease.WorkCleanup)
	backoff := func(n int) lease.Backoff { return lease.Backoff{What: cleanup, Attempt: n} }
	listed := lease.Listed{Containers: []messages.Container{{ID: "c1", Service: "app", Generation: 1, State: "created"}}}
	runDecide(t, []decideRow{
		{name: "failed, containers kept: provision.failed says so, one failed callback, the cleanup retried after the backoff",
			j:  jProvisioning(),
			in: lease.Attempted{Generation: 1, Outcome: lease.Outcome{Kind: lease.OutcomeFailed, Reason: messages.ReasonContainerStartFailed, Kept: true}},
			events: []wantEvent{evOf(lease.EvProvisionFailed, func(t *testing.T, p lease.ProvisionFailed) {
				eq(t, "kept", p.Kept, true)
			})},
			cbs: []wantCB{opCB(messages.CallbackFailed, "ContainerStartFailed: ")}, effects: fx(backoff(1)), status: lease.Failed},
		{name: "the backoff ran out: the cleanup runs as that attempt", j: kept(), in: lease.Timer{What: cleanup, Attempt: 3},
			effects: fx(lease.Work{Kind: lease.WorkCleanup, Attempt: 3})},
		{name: "the backoff ran out while a worker runs: nothing", j: kept(), in: lease.Timer{What: cleanup, Attempt: 3},
			env: []func(*lease.Env){withWorker(lease.WorkCleanup)}},
		{name: "the cleanup kept them again: the next attempt after a longer backoff", j: kept(),
			in: lease.Captured{Generation: 1, Kept: true, Attempt: 3}, effects: fx(backoff(4))},
		{name: "the inventory's cleanup kept them: the backoff starts over", j: kept(),
			in: lease.Captured{Generation: 1, Kept: true}, effects: fx(backoff(1))},
		{name: "the cleanup removed them: nothing more", j: kept(), in: lease.Captured{Generation: 1, Attempt: 3}},
		{name: "kept containers listed: cleaned up now", j: kept(), in: listed, effects: fx(lease.Work{Kind: lease.WorkCleanup})},
		{name: "a failed lease whose containers went: no retry", j: jFailed(), in: lease.Timer{What: cleanup, Attempt: 2}},
		{name: "a cleanup report of an older generation: nothing", j: kept(), in: lease.Captured{Generation: 7, Kept: true, Attempt: 1}},
	})
}
