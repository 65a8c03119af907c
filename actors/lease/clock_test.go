package lease_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/berth-dev/berth/actors/lease"
	"github.com/berth-dev/berth/persistence"
)

func TestFloorShift_TheLeaseClockNeverReadsBeforeItsLastEvent(t *testing.T) {
	t0 := time.Date(2026, 12, 7, 18, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name      string
		prev      time.Duration
		last, now time.Time
		want      time.Duration
	}{
		{"a clock not behind: no shift", 0, t0, t0.Add(time.Minute), 0},
		{"a fresh lease (no event yet): no shift", 0, time.Time{}, t0, 0},
		{"set back an hour across the restart: the hour", 0, t0, t0.Add(-time.Hour), time.Hour},
		{"an actor restart in the same process keeps the larger shift", time.Hour, t0, t0.Add(-time.Hour + 10*time.Second), time.Hour},
		{"the clock caught up since: the shift it had is kept", 5 * time.Minute, t0, t0.Add(time.Hour), 5 * time.Minute},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := lease.FloorShift(tc.prev, tc.last, tc.now); got != tc.want {
				t.Fatalf("FloorShift(%s, %s, %s) = %s, want %s", tc.prev, tc.last, tc.now, got, tc.want)
			}
		})
	}
}

// The restore-from-journal path with an injected clock: a lease provisioning
// with a 10-minute deadline, 4 minutes in when berthd stops; the wall clock is
// set back an hour across the restart. Replayed, the lease's latest event time
// floors its clock, so Decide sees 6 minutes left (not an hour and 6), and the
// deadline passes when those 6 minutes have run on the process clock.
func TestRestart_ClockSetBack_ReplayedDeadlineKeepsOnlyWhatWasLeft(t *testing.T) {
	t0 := time.Date(2026, 12, 7, 18, 0, 0, 0, time.UTC)
	started := lease.ProvisionStarted{Admission: 1, Generation: 1, OperationID: "op-1", At: t0, Deadline: t0.Add(10 * time.Minute),
		Release: &lease.Release{Kind: lease.KindProvision, OperationID: "op-1"}}
	pinned := lease.ReleasePinned{Version: 1}
	st := lease.NewState()
	for _, ev := range []persistence.Event{envelope(t, lease.EvProvisionStarted, t0, started),
		envelope(t, lease.EvReleasePinned, t0.Add(4*time.Minute), pinned)} {
		if err := st.Apply(ev); err != nil {
			t.Fatal(err)
		}
	}
	if !st.LastAt.Equal(t0.Add(4 * time.Minute)) {
		t.Fatalf("LastAt = %s, want the pinned event's time", st.LastAt)
	}
	// The restart: a process clock anchored to a wall clock an hour behind.
	wall := t0.Add(4*time.Minute + 30*time.Second - time.Hour)
	var elapsed time.Duration
	process := lease.ProcessClock(func() time.Time { return wall }, func() time.Duration { return elapsed })
	shift := lease.FloorShift(0, st.LastAt, process())
	now := func() time.Time { return process().Add(shift) }
	// Unfloored, the set-back wall clock would grant the hour on top.
	if left := st.Deadline.Sub(process()); left != time.Hour+5*time.Minute+30*time.Second {
		t.Fatalf("the unfloored clock leaves %s: the test does not set the clock back", left)
	}
	if left := st.Deadline.Sub(now()); left != 6*time.Minute {
		t.Fatalf("after the restart the lease has %s left, want the 6 minutes it had", left)
	}
	elapsed = 6 * time.Minute
	if now().Before(st.Deadline) {
		t.Fatalf("6 minutes on, the lease clock reads %s, before its deadline %s", now(), st.Deadline)
	}
}

func envelope(t *testing.T, typ string, at time.Time, data any) persistence.Event {
	t.Helper()
	raw, err := json.Marshal(data)
	if err != nil {
		t.Fatal(err)
	}
	return persistence.Event{Type: typ, V: 1, At: at, Data: raw}
}
