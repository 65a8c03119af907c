package outbox_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/berth-dev/berth/messages"
	"github.com/berth-dev/berth/supervisors"
)

// The outbox's delivery bookkeeping for the debug API (debug.go).

func (d *daemon) debugOutbox(lease string) messages.DebugOutboxReply {
	d.t.Helper()
	rep, err := supervisors.Ask(context.Background(), d.tree, outboxPath, 5*time.Second, func(r chan<- messages.DebugOutboxReply) any {
		return &messages.DebugOutbox{Lease: lease, Reply: r}
	})
	if err != nil {
		d.t.Fatalf("ask the outbox: %v", err)
	}
	return rep
}

func TestDebug_AttemptsOfAQueuedRowThenItsDeliveryRemembered(t *testing.T) {
	rec := newReceiver(t)
	row, other := newRow(rec, "lease-a", 1), newRow(rec, "lease-b", 1)
	release := make(chan struct{})
	rec.setRespond(func(ctx context.Context, c call, n int) int {
		if c.DeliveryID == row.DeliveryID {
			if n <= 2 {
				return http.StatusInternalServerError
			}
			rec.wait(ctx, release) // the third attempt is held until the test has looked
		}
		return http.StatusOK
	})
	set := fastSettings()
	set.Sweep = longSweep
	d := startDaemon(t, t.TempDir(), set, daemonOptions{chaos: true})
	before := time.Now()
	d.commit(row, other)
	stored, err := d.store.OutboxOf("lease-a")
	if err != nil || len(stored) != 1 {
		t.Fatalf("OutboxOf = %+v, %v", stored, err)
	}
	d.wake("lease-a")
	d.wake("lease-b")

	// Two refusals counted while the row is still queued (its third attempt hangs).
	eventually(t, "two attempts counted", func() bool { return d.debugOutbox("lease-a").Attempts[row.DeliveryID].Attempts == 2 })
	rep := d.debugOutbox("lease-a")
	a := rep.Attempts[row.DeliveryID]
	if len(rep.Attempts) != 1 || a.Lease != "lease-a" || !strings.Contains(a.LastError, "status 500") || a.LastAttemptAt.Before(before) {
		t.Fatalf("attempts = %+v", rep.Attempts)
	}
	for _, dc := range rep.Delivered {
		if dc.Lease != "lease-a" {
			t.Fatalf("the lease filter let %+v through", dc)
		}
	}
	eventually(t, "the other lease delivered", func() bool { return len(d.debugOutbox("lease-b").Delivered) == 1 })

	close(release)
	eventually(t, "the row delivered", func() bool { return len(d.debugOutbox("lease-a").Delivered) == 1 })
	rep = d.debugOutbox("lease-a")
	got := rep.Delivered[0]
	if len(rep.Attempts) != 0 || got.DeliveryID != row.DeliveryID || got.Lease != "lease-a" || got.Kind != row.Kind ||
		got.Status != messages.CallbackSuccess || got.URLPath != "/callbacks/lease-a" || !got.CreatedAt.Equal(stored[0].Row.CreatedAt) || got.CreatedAt.IsZero() ||
		got.Attempts != 3 || !strings.Contains(got.LastError, "status 500") || got.DeliveredAt.Before(got.LastAttemptAt) {
		t.Fatalf("delivered = %+v (attempts left %+v)", got, rep.Attempts)
	}
	all := d.debugOutbox("")
	if len(all.Delivered) != 2 || all.Delivered[0].Lease != "lease-b" || all.Delivered[1].Lease != "lease-a" {
		t.Fatalf("every delivery, oldest first = %+v", all.Delivered)
	}
	if b := all.Delivered[0]; b.Attempts != 1 || b.LastError != "" {
		t.Fatalf("a first-attempt delivery = %+v", b)
	}

	// The bookkeeping is the instance's: a restart of the actor forgets it.
	restarts := d.restarts()
	d.tree.Send(outboxPath, &messages.Crash{})
	eventually(t, "outbox restarted", func() bool { return d.restarts() == restarts+1 })
	if rep := d.debugOutbox(""); len(rep.Delivered) != 0 || len(rep.Attempts) != 0 {
		t.Fatalf("after a restart = %+v", rep)
	}
}
