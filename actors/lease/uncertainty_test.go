package lease_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/berth-dev/berth/actors/lease"
	"github.com/berth-dev/berth/dockerio/fake"
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
