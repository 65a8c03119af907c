package lease_test

import (
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/berth-dev/berth/actors/lease"
	"github.com/berth-dev/berth/dockerio/dockertest/fake"
	"github.com/berth-dev/berth/messages"
)

// wantNoFailure checks the lease never journaled provision.failed nor queued a
// failed callback: uncertainty is not a finding.
func wantNoFailure(t *testing.T, l *leaseUnderTest) {
	t.Helper()
	if slices.Contains(l.eventTypes(), lease.EvProvisionFailed) {
		t.Fatalf("provision.failed journaled on uncertainty: %v", l.eventTypes())
	}
	for _, r := range l.rows() {
		if cb := callback(t, r); cb.Status == messages.CallbackFailed {
			t.Fatalf("a failed callback on uncertainty: %+v", cb)
		}
	}
}

// TestUncertainty_LaunchRefusedWithoutFinding_StaysInFlightAndSettles: a launch
// Docker refused before creating anything holds no definite finding; the attempt
// stays provisioning and the resume settles it (here: ready), never failed.
func TestUncertainty_LaunchRefusedWithoutFinding_StaysInFlightAndSettles(t *testing.T) {
	h := newHarness(t, nil)
	h.eng.FailNextUp(errors.New("Error response from daemon: no space left on device"))
	l := h.start(newSpec(1))
	h.awaitReport("ready", func(r messages.LeaseReport) bool { return r.Status == string(lease.Ready) })
	wantNoFailure(t, l)
	if st := l.state(); st.FailCount != 0 {
		t.Fatalf("fail_count %d after an uncertain launch, want 0", st.FailCount)
	}
	wantRows(t, l, opRow(messages.CallbackSuccess))
}

// TestUncertainty_InspectFaultAtVerify_StaysProvisioningAndSettlesByResume:
// Docker unreachable while verification inspects the container leaves the lease
// provisioning (no failed callback); once Docker answers again the resume
// verifies the cohort and the lease becomes ready.
func TestUncertainty_InspectFaultAtVerify_StaysProvisioningAndSettlesByResume(t *testing.T) {
	h := newHarness(t, func(s *lease.Settings) { s.ProvisionTimeout = 30 * time.Second })
	verify := h.eng.Hold(fake.OpInspect)
	l := h.start(newSpec(1))
	awaitGate(t, "verification to inspect the container", verify.entered)
	h.eng.SetUnavailable(true)
	verify.Release()
	// Longer than verification's inspect patience: the attempt gives up on
	// inspecting and must stay in flight, not fail.
	h.stayQuiet("a failure while Docker cannot be inspected", 12*time.Second, func() bool {
		return l.state().Status != lease.Provisioning
	})
	wantNoFailure(t, l)
	h.eng.SetUnavailable(false)
	h.awaitReport("ready", func(r messages.LeaseReport) bool { return r.Status == string(lease.Ready) })
	wantNoFailure(t, l)
	if got := l.containers(); len(got) != 1 || got[0].State != "running" {
		t.Fatalf("containers %+v, want the one launched, running", got)
	}
}

// TestClockStep_WallSteppedBack_ProvisionDeadlineHolds: a provision that never
// completes fails at its deadline though the wall clock was stepped back an hour
// mid-attempt — the lease's clock advances by elapsed time only.
func TestClockStep_WallSteppedBack_ProvisionDeadlineHolds(t *testing.T) {
	h := newHarness(t, func(s *lease.Settings) { s.ProvisionTimeout = 3 * time.Second })
	var mu sync.Mutex
	var step time.Duration
	start := time.Now()
	h.deps.Now = lease.ProcessClock(func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		return time.Now().Add(step)
	}, func() time.Duration { return time.Since(start) })
	first := h.eng.Hold(fake.OpUp)
	for range 200 {
		h.eng.Hold(fake.OpUp) // every launch hangs until its context ends
	}
	t.Cleanup(h.eng.releaseAll)
	l := h.start(newSpec(1))
	awaitGate(t, "the first launch", first.entered)
	mu.Lock()
	step = -time.Hour
	mu.Unlock()
	began := time.Now()
	h.awaitReport("failed", func(r messages.LeaseReport) bool { return r.Status == string(lease.Failed) })
	if took := time.Since(began); took > 15*time.Second {
		t.Fatalf("failed %s after the step, want at the 3 s deadline", took)
	}
	failed := payload[lease.ProvisionFailed](t, l.waitEvent(lease.EvProvisionFailed))
	if failed.Message != "provisioning did not complete in time" {
		t.Fatalf("provision.failed %+v, want the deadline", failed)
	}
}

// TestClockStep_WallSteppedForward_AttemptNotFailedAtOnce: a wall clock stepped
// an hour forward while an attempt is in flight does not put the provision past
// its deadline: the resume starts it again and it becomes ready.
func TestClockStep_WallSteppedForward_AttemptNotFailedAtOnce(t *testing.T) {
	h := newHarness(t, func(s *lease.Settings) { s.ProvisionTimeout = 20 * time.Second })
	var mu sync.Mutex
	var step time.Duration
	start := time.Now()
	h.deps.Now = lease.ProcessClock(func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		return time.Now().Add(step)
	}, func() time.Duration { return time.Since(start) })
	launch := h.eng.Hold(fake.OpUp)
	h.eng.FailNextUp(errors.New("Error response from daemon: no space left on device")) // no finding: the resume retries
	l := h.start(newSpec(1))
	awaitGate(t, "the first launch", launch.entered)
	mu.Lock()
	step = time.Hour
	mu.Unlock()
	launch.Release()
	h.awaitReport("ready", func(r messages.LeaseReport) bool { return r.Status == string(lease.Ready) })
	wantNoFailure(t, l)
}
