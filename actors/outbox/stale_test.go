package outbox_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/berth-dev/berth/actors/outbox"
	"github.com/berth-dev/berth/messages"
	"github.com/berth-dev/berth/persistence"
)

// Stale lifecycle rows (stale.go) in the running outbox: removed in a store
// transaction, counted, remembered for the debug API, and never an exact
// completion.

// lifecycleRow is a lifecycle observation (a death: failed, or deprovisioned)
// the way the lease actor queues it.
func lifecycleRow(r *receiver, lease string, n int, status string) persistence.OutboxRow {
	row := newRow(r, lease, n)
	row.Kind = persistence.KindLifecycle
	row.Body, _ = json.Marshal(messages.Callback{LeaseUUID: lease, Status: status, BackendStorageID: "storage-outbox-test"})
	return row
}

// The case: a death providerd keeps refusing held the lease's FIFO (and
// the maintenance fence) for good. Once older than MaxAge it is removed at the end
// of its failed send — no sweep needed — and what waited behind it, exact
// completions far older than MaxAge, is delivered in order.
func TestExpiry_RefusedLifecycleHeadExpiresAndTheCompletionsBehindItAreDelivered(t *testing.T) {
	rec := newReceiver(t)
	death := lifecycleRow(rec, "lease-a", 1, messages.CallbackFailed)
	maint, op := newRow(rec, "lease-a", 2), newRow(rec, "lease-a", 3)
	maint.Kind = persistence.KindMaintenance
	maint.CreatedAt, op.CreatedAt = time.Now().Add(-time.Hour), time.Now().Add(-time.Hour)
	rec.setRespond(func(_ context.Context, c call, _ int) int {
		if c.DeliveryID == death.DeliveryID {
			return http.StatusInternalServerError
		}
		return http.StatusOK
	})
	set := fastSettings()
	set.Sweep = longSweep
	set.MaxAge = 100 * time.Millisecond // shorter than one send (0, 50, 100 ms)
	d := startDaemon(t, t.TempDir(), set, daemonOptions{})
	d.commit(death, maint, op)
	if n, err := d.store.OutboxPending("lease-a", persistence.KindMaintenance); err != nil || n != 1 {
		t.Fatalf("maintenance rows queued = %d, %v; want 1 (the fence shut)", n, err)
	}
	d.wake("lease-a")
	eventually(t, "the queue drained and every row remembered", func() bool {
		return d.pending() == 0 && len(d.debugOutbox("lease-a").Delivered) == 3
	})

	if got := rec.accepted("lease-a"); !equal(got, []string{maint.DeliveryID, op.DeliveryID}) {
		t.Errorf("accepted %v, want the completions in order %v", got, []string{maint.DeliveryID, op.DeliveryID})
	}
	if n := len(rec.attemptsOf(death.DeliveryID)); n != len(set.Delays) {
		t.Errorf("the death was attempted %d times, want one send of %d", n, len(set.Delays))
	}
	if got := d.metric("berth_callback_expired_total", "kind", persistence.KindLifecycle); got != 1 {
		t.Errorf("expired = %v, want 1", got)
	}
	if got := d.metric("berth_callback_coalesced_total", "kind", persistence.KindLifecycle); got != 0 {
		t.Errorf("coalesced = %v, want 0", got)
	}
	rep := d.debugOutbox("lease-a")
	if rep.Expired != 1 || rep.Coalesced != 0 {
		t.Fatalf("debug = %+v, want one expired row and three remembered", rep)
	}
	if gone := rep.Delivered[0]; gone.DeliveryID != death.DeliveryID || gone.Dropped != outbox.DroppedExpired ||
		gone.Attempts != len(set.Delays) || gone.LastError == "" {
		t.Errorf("remembered death = %+v, want expired after its attempts", gone)
	}
	for _, dc := range rep.Delivered[1:] {
		if dc.Dropped != "" {
			t.Errorf("completion %s remembered as %s", dc.DeliveryID, dc.Dropped)
		}
	}
}

// A newer lifecycle row supersedes older queued deaths (the newest state is what
// providerd needs); a deprovision is never superseded, completions never
// coalesce, and a row already in flight is not touched.
func TestCoalesce_NewerLifecycleRowSupersedesOlderDeathsOnly(t *testing.T) {
	rec := newReceiver(t)
	held := lifecycleRow(rec, "lease-a", 1, messages.CallbackFailed)
	release := make(chan struct{})
	rec.setRespond(func(ctx context.Context, c call, _ int) int {
		if c.DeliveryID == held.DeliveryID {
			rec.wait(ctx, release)
		}
		return http.StatusOK
	})
	set := fastSettings()
	set.Sweep = longSweep
	d := startDaemon(t, t.TempDir(), set, daemonOptions{})
	d.commit(held)
	d.wake("lease-a")
	eventually(t, "the first death in flight", func() bool { return len(rec.attemptsOf(held.DeliveryID)) == 1 })

	death2, maint := lifecycleRow(rec, "lease-a", 2, messages.CallbackFailed), newRow(rec, "lease-a", 3)
	maint.Kind = persistence.KindMaintenance
	death3, closed := lifecycleRow(rec, "lease-a", 4, messages.CallbackFailed), lifecycleRow(rec, "lease-a", 5, messages.CallbackDeprovisioned)
	late := lifecycleRow(rec, "lease-a", 6, messages.CallbackFailed)
	d.commit(death2, maint, death3, closed, late)
	d.wake("lease-a") // ignored while the head is in flight
	close(release)
	eventually(t, "the queue drained", func() bool { return d.pending() == 0 })

	want := []string{held.DeliveryID, maint.DeliveryID, closed.DeliveryID, late.DeliveryID}
	if got := rec.accepted("lease-a"); !equal(got, want) {
		t.Errorf("accepted %v, want %v", got, want)
	}
	if got := d.metric("berth_callback_coalesced_total", "kind", persistence.KindLifecycle); got != 2 {
		t.Errorf("coalesced = %v, want 2", got)
	}
	if rep := d.debugOutbox(""); rep.Coalesced != 2 || rep.Expired != 0 {
		t.Errorf("debug counts = %d coalesced, %d expired; want 2, 0", rep.Coalesced, rep.Expired)
	}
}
