package outbox_test

import (
	"bytes"
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/berth-dev/berth/actors/outbox"
	"github.com/berth-dev/berth/messages"
	"github.com/berth-dev/berth/messages/callback"
)

func TestDefaultSettings_AreTheContractSchedule(t *testing.T) {
	s := outbox.DefaultSettings(secret, callback.Policy{})
	want := []time.Duration{0, time.Second, 5 * time.Second}
	if len(s.Delays) != len(want) {
		t.Fatalf("Delays = %v, want %v", s.Delays, want)
	}
	for i := range want {
		if s.Delays[i] != want[i] {
			t.Fatalf("Delays = %v, want %v", s.Delays, want)
		}
	}
	if s.Deadline != 2*time.Minute+15*time.Second {
		t.Errorf("Deadline = %s, want 2m15s", s.Deadline)
	}
	if s.Sweep != 30*time.Second {
		t.Errorf("Sweep = %s, want 30s", s.Sweep)
	}
	if s.Parallel != 16 {
		t.Errorf("Parallel = %d, want 16", s.Parallel)
	}
	if !bytes.Equal(s.Secret, secret) {
		t.Errorf("Secret = %q, want the callback secret", s.Secret)
	}
	if s.Client == nil || s.Client.Timeout != 0 {
		t.Errorf("Client = %+v, want a client without a client-wide timeout (the deadline is the only one)", s.Client)
	}
	if s.Now == nil {
		t.Error("Now is nil")
	}
}

func TestWake_DeliversAtOnceSignedByteIdenticalAndDeletesTheRow(t *testing.T) {
	rec := newReceiver(t)
	set := fastSettings()
	set.Sweep = longSweep // only the wake can start this delivery
	d := startDaemon(t, t.TempDir(), set, daemonOptions{})

	row := newRow(rec, "lease-a", 1)
	d.commit(row)
	if d.pending() != 1 {
		t.Fatalf("pending after commit = %d, want 1", d.pending())
	}
	start := time.Now()
	d.wake("lease-a")
	eventually(t, "the row delivered and deleted", func() bool { return d.pending() == 0 })
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("delivery took %s after the wake", took)
	}

	calls := rec.all()
	if len(calls) != 1 {
		t.Fatalf("receiver got %d verified calls, want 1: %+v", len(calls), calls)
	}
	c := calls[0]
	if rec.verified() != 1 || rec.refused() != 0 {
		t.Errorf("verifier: %d accepted, %d refused; want 1, 0", rec.verified(), rec.refused())
	}
	if !bytes.Equal(c.Body, row.Body) {
		t.Errorf("body = %s, want byte-identical %s", c.Body, row.Body)
	}
	if c.DeliveryID != row.DeliveryID {
		t.Errorf("X-Berth-Delivery-Id = %q, want %q", c.DeliveryID, row.DeliveryID)
	}
	if c.RequestURI != "/callbacks/lease-a?operation_id=op-1" {
		t.Errorf("request URI = %q, want the row URL's path and query", c.RequestURI)
	}
	if head, ok, err := d.head("lease-a"); err != nil || ok {
		t.Errorf("head after delivery = %+v, %v, %v; want none", head, ok, err)
	}
	if n, oldest, err := d.store.OutboxStats(); err != nil || n != 0 || !oldest.IsZero() {
		t.Errorf("OutboxStats = %d, %s, %v; want 0, zero", n, oldest, err)
	}
	if got := d.attempts(outbox.OutcomeDelivered); got != 1 {
		t.Errorf("delivered attempts = %v, want 1", got)
	}
}

func TestWake_EmptyLeaseRescansEveryLease(t *testing.T) {
	rec := newReceiver(t)
	set := fastSettings()
	set.Sweep = longSweep
	d := startDaemon(t, t.TempDir(), set, daemonOptions{})

	d.commit(newRow(rec, "lease-a", 1), newRow(rec, "lease-b", 1), newRow(rec, "lease-c", 1))
	d.wake("")
	eventually(t, "all three leases delivered", func() bool { return d.pending() == 0 })
	for _, l := range []string{"lease-a", "lease-b", "lease-c"} {
		if n := len(rec.accepted(l)); n != 1 {
			t.Errorf("%s accepted %d times, want 1", l, n)
		}
	}
}

func TestSignature_WrongSecretIsRefusedByTheReceiverAndTheRowKept(t *testing.T) {
	// The control for every "refused == 0" assertion: the receiver really checks.
	rec := newReceiver(t)
	set := fastSettings()
	set.Secret = []byte("not-the-receivers-secret")
	set.Sweep = longSweep
	d := startDaemon(t, t.TempDir(), set, daemonOptions{})

	d.commit(newRow(rec, "lease-a", 1))
	d.wake("lease-a")
	eventually(t, "all attempts of one send", func() bool {
		return d.attempts(outbox.OutcomeRejected) == float64(len(set.Delays))
	})
	if rec.refused() != len(set.Delays) || rec.verified() != 0 || len(rec.all()) != 0 {
		t.Errorf("verifier: %d refused, %d accepted, %d calls reached the handler; want %d, 0, 0",
			rec.refused(), rec.verified(), len(rec.all()), len(set.Delays))
	}
	if d.pending() != 1 {
		t.Errorf("pending = %d, want the refused row kept", d.pending())
	}
}

func TestFIFO_FailingHeadHoldsItsLeaseWhileOtherLeasesProceed(t *testing.T) {
	rec := newReceiver(t)
	var failA atomic.Bool
	failA.Store(true)
	rec.setRespond(func(_ context.Context, c call, _ int) int {
		if c.Lease == "lease-a" && failA.Load() {
			return http.StatusInternalServerError
		}
		return http.StatusOK
	})
	set := fastSettings() // 300 ms sweep: A's head is retried several times below
	d := startDaemon(t, t.TempDir(), set, daemonOptions{})

	rowsA := newRows(rec, "lease-a", 5)
	rowsB := newRows(rec, "lease-b", 3)
	d.commit(append(rowsA[:5:5], rowsB...)...)
	d.wake("lease-a")
	d.wake("lease-b")

	eventually(t, "lease B delivered while A's head fails, and A's head swept again", func() bool {
		return len(rec.accepted("lease-b")) == 3 && len(rec.attemptsOf(rowsA[0].DeliveryID)) >= 2*len(set.Delays)
	})
	for _, c := range rec.of("lease-a") {
		if c.DeliveryID != rowsA[0].DeliveryID {
			t.Fatalf("lease A's row %q was attempted while its head was failing", c.DeliveryID)
		}
	}
	if got := rec.accepted("lease-b"); !equal(got, ids(rowsB)) {
		t.Errorf("lease B accepted %v, want %v", got, ids(rowsB))
	}

	failA.Store(false)
	eventually(t, "lease A delivered once its receiver recovers", func() bool { return d.pending() == 0 })
	if got := collapse(rec.accepted("lease-a")); !equal(got, ids(rowsA)) {
		t.Errorf("lease A accepted %v, want commit order %v", got, ids(rowsA))
	}
	if rec.refused() != 0 {
		t.Errorf("verifier refused %d calls", rec.refused())
	}
}

func TestFIFO_WakesWhileTheHeadIsInFlightDoNotOvertakeIt(t *testing.T) {
	rec := newReceiver(t)
	rowsA := newRows(rec, "lease-a", 3)
	release := make(chan struct{})
	rec.setRespond(func(ctx context.Context, c call, _ int) int {
		if c.DeliveryID == rowsA[0].DeliveryID {
			rec.wait(ctx, release)
		}
		return http.StatusOK
	})
	set := fastSettings()
	set.Sweep = longSweep
	d := startDaemon(t, t.TempDir(), set, daemonOptions{})

	d.commit(rowsA[0])
	d.wake("lease-a")
	eventually(t, "the head hanging in the receiver", func() bool {
		active, _ := rec.activeNow()
		return active == 1
	})
	for _, r := range rowsA[1:] { // later commits of the same lease, each with its wake
		d.commit(r)
		d.wake("lease-a")
	}
	info, err := d.describe(5 * time.Second) // queued behind the wakes
	if err != nil || info.InFlight != 1 {
		t.Fatalf("describe after the wakes = %+v, %v; want the lease's one delivery in flight", info, err)
	}
	if calls := rec.of("lease-a"); len(calls) != 1 {
		t.Fatalf("lease A calls while its head hangs = %+v, want only the head", calls)
	}

	close(release)
	eventually(t, "all rows delivered", func() bool { return d.pending() == 0 })
	var order []string
	for _, c := range rec.of("lease-a") {
		order = append(order, c.DeliveryID)
	}
	if !equal(order, ids(rowsA)) {
		t.Errorf("lease A calls %v, want exactly %v in order", order, ids(rowsA))
	}
}

func TestRetry_500TwiceThen200_DeliveredInOneSendAndOnlyThatRowDeleted(t *testing.T) {
	rec := newReceiver(t)
	rowA1, rowA2 := newRow(rec, "lease-a", 1), newRow(rec, "lease-a", 2)
	release := make(chan struct{})
	defer close(release)
	rec.setRespond(func(ctx context.Context, c call, n int) int {
		switch {
		case c.DeliveryID == rowA1.DeliveryID && n <= 2:
			return http.StatusInternalServerError
		case c.DeliveryID == rowA2.DeliveryID:
			rec.wait(ctx, release) // hold the next row, so it stays pending
		}
		return http.StatusOK
	})
	set := fastSettings()
	set.Sweep = longSweep // the third attempt must come from the same Send
	d := startDaemon(t, t.TempDir(), set, daemonOptions{})

	keys := d.commit(rowA1, rowA2)
	d.wake("lease-a")
	eventually(t, "the first row delivered", func() bool { return len(rec.accepted("lease-a")) == 1 })
	eventually(t, "the first row deleted", func() bool { return d.pending() == 1 })

	attempts := rec.attemptsOf(rowA1.DeliveryID)
	if len(attempts) != 3 || attempts[0].Status != 500 || attempts[1].Status != 500 || attempts[2].Status != 200 {
		t.Fatalf("attempts of the first row = %+v, want 500, 500, 200", attempts)
	}
	head, ok, err := d.head("lease-a")
	if err != nil || !ok || head.Key != keys[1] || head.Row.DeliveryID != rowA2.DeliveryID {
		t.Fatalf("head after delivery = %+v, %v, %v; want exactly the second row (key %+v) left", head, ok, err, keys[1])
	}
	if got := d.rowIDs(); !equal(got, []string{rowA2.DeliveryID}) {
		t.Errorf("pending rows = %v, want only %s", got, rowA2.DeliveryID)
	}
	for outcome, want := range map[string]float64{
		outbox.OutcomeRejected:  2,
		outbox.OutcomeDelivered: 1,
		outbox.OutcomeTransport: 0,
		outbox.OutcomeCanceled:  0,
	} {
		if got := d.attempts(outcome); got != want {
			t.Errorf("berth_callback_attempts_total{outcome=%q} = %v, want %v", outcome, got, want)
		}
	}
}

func TestSweep_ExhaustedRowIsKeptAndDeliveredOnceTheReceiverRecovers(t *testing.T) {
	rec := newReceiver(t)
	var down atomic.Bool
	down.Store(true)
	rec.setRespond(func(context.Context, call, int) int {
		if down.Load() {
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	})
	set := fastSettings()
	set.Delays = []time.Duration{0, 50 * time.Millisecond}
	d := startDaemon(t, t.TempDir(), set, daemonOptions{})

	row := newRow(rec, "lease-a", 1)
	key := d.commit(row)[0]
	d.wake("lease-a") // the only wake: every later attempt comes from a sweep
	eventually(t, "one exhausted send and at least one sweep retry", func() bool {
		return len(rec.attemptsOf(row.DeliveryID)) > len(set.Delays)
	})
	head, ok, err := d.head("lease-a")
	if err != nil || !ok || head.Key != key {
		t.Fatalf("head while failing = %+v, %v, %v; want the row kept", head, ok, err)
	}
	if d.pending() != 1 {
		t.Fatalf("pending while failing = %d, want 1", d.pending())
	}

	down.Store(false)
	eventually(t, "the sweep delivers after recovery", func() bool { return d.pending() == 0 })
	if got := rec.accepted("lease-a"); !equal(got, []string{row.DeliveryID}) {
		t.Errorf("accepted %v, want the row exactly once", got)
	}
	if rec.refused() != 0 {
		t.Errorf("verifier refused %d calls", rec.refused())
	}
}

func TestSignature_EveryAttemptIsSignedAfresh(t *testing.T) {
	clock := &offsetClock{}
	rec := newReceiverWithClock(t, clock.Now)
	rec.setRespond(func(_ context.Context, _ call, n int) int {
		switch n {
		case 1:
			return http.StatusInternalServerError
		case 2:
			// Ten minutes pass before the sweep retries: a signature taken before
			// now would be stale (max age 5 min) and refused.
			clock.advance(10 * time.Minute)
			return http.StatusInternalServerError
		}
		return http.StatusOK
	})
	set := fastSettings()
	set.Delays = []time.Duration{0, 1100 * time.Millisecond} // > 1 s: t= must differ
	set.Now = clock.Now
	d := startDaemon(t, t.TempDir(), set, daemonOptions{})

	row := newRow(rec, "lease-a", 1)
	d.commit(row)
	d.wake("lease-a")
	eventually(t, "delivery after the clock jump", func() bool { return d.pending() == 0 })

	a := rec.attemptsOf(row.DeliveryID)
	if len(a) != 3 {
		t.Fatalf("attempts = %+v, want 3", a)
	}
	if !(a[0].SignedAt < a[1].SignedAt) {
		t.Errorf("attempts 1.1 s apart signed at t=%d and t=%d; want a fresh timestamp", a[0].SignedAt, a[1].SignedAt)
	}
	if a[2].SignedAt < a[1].SignedAt+int64((10*time.Minute).Seconds()) {
		t.Errorf("sweep retry signed at t=%d, want ≥ 10 min after t=%d", a[2].SignedAt, a[1].SignedAt)
	}
	if a[0].Signature == a[1].Signature || a[1].Signature == a[2].Signature {
		t.Error("a signature header was reused across attempts")
	}
	if rec.refused() != 0 || a[2].Status != http.StatusOK {
		t.Errorf("verifier refused %d calls; last status %d", rec.refused(), a[2].Status)
	}
}

func TestDeadline_OneDeadlineCoversAllAttemptsOfASend(t *testing.T) {
	rec := newReceiver(t)
	rec.setRespond(func(context.Context, call, int) int { return http.StatusInternalServerError })
	set := fastSettings()
	set.Delays = []time.Duration{0, 50 * time.Millisecond, 3 * time.Second}
	set.Deadline = 1500 * time.Millisecond // ends the Send while it waits for attempt 3
	set.Sweep = longSweep
	d := startDaemon(t, t.TempDir(), set, daemonOptions{})

	row := newRow(rec, "lease-a", 1)
	d.commit(row)
	d.wake("lease-a")
	// canceled == 1 with two attempts seen: the deadline ended the send while it
	// waited out the 3 s delay, so the third attempt never went out.
	eventually(t, "the send to end at its deadline", func() bool { return d.attempts(outbox.OutcomeCanceled) == 1 })
	if got := len(rec.attemptsOf(row.DeliveryID)); got != 2 {
		t.Errorf("receiver saw %d attempts, want 2 (the third falls after the deadline)", got)
	}
	if got := d.attempts(outbox.OutcomeRejected); got != 2 {
		t.Errorf("rejected attempts = %v, want 2", got)
	}
	if d.pending() != 1 {
		t.Errorf("pending = %d, want the row kept", d.pending())
	}
}

func TestDeadline_HangingReceiverIsCutOffAndTheRowKept(t *testing.T) {
	rec := newReceiver(t)
	never := make(chan struct{})
	rec.setRespond(func(ctx context.Context, _ call, _ int) int {
		rec.wait(ctx, never)
		return http.StatusOK
	})
	set := fastSettings()
	set.Deadline = 500 * time.Millisecond
	set.Sweep = longSweep
	d := startDaemon(t, t.TempDir(), set, daemonOptions{})

	row := newRow(rec, "lease-a", 1)
	d.commit(row)
	d.wake("lease-a")
	eventually(t, "the receiver to see the hanging request canceled", func() bool {
		a := rec.attemptsOf(row.DeliveryID)
		return len(a) == 1 && a[0].Canceled
	})
	eventually(t, "the send to end", func() bool {
		info, err := d.describe(time.Second)
		return err == nil && info.InFlight == 0
	})
	if d.pending() != 1 || d.attempts(outbox.OutcomeDelivered) != 0 {
		t.Errorf("pending %d, delivered %v; want the row kept, nothing delivered", d.pending(), d.attempts(outbox.OutcomeDelivered))
	}
	if n := len(rec.attemptsOf(row.DeliveryID)); n != 1 {
		t.Errorf("receiver saw %d attempts, want 1 (the deadline ends the send)", n)
	}
}

// One attempt was made and the deadline canceled it: attempts_total must count that
// one cancellation once, not again for the retry the send then waits for (the
// deadline is already gone, so that retry is never made).
func TestMetrics_AttemptCutOffByTheDeadlineCountsOnce(t *testing.T) {
	rec := newReceiver(t)
	never := make(chan struct{})
	rec.setRespond(func(ctx context.Context, _ call, _ int) int {
		rec.wait(ctx, never)
		return http.StatusOK
	})
	set := fastSettings() // three attempts; the first hangs past the deadline
	set.Deadline = 500 * time.Millisecond
	set.Sweep = longSweep
	d := startDaemon(t, t.TempDir(), set, daemonOptions{})

	row := newRow(rec, "lease-a", 1)
	d.commit(row)
	d.wake("lease-a")
	eventually(t, "the send to end", func() bool {
		info, err := d.describe(time.Second)
		return err == nil && info.InFlight == 0 && d.attempts(outbox.OutcomeCanceled) > 0
	})
	made := len(rec.attemptsOf(row.DeliveryID))
	total := 0.0
	for _, o := range []string{outbox.OutcomeDelivered, outbox.OutcomeRejected, outbox.OutcomeTransport, outbox.OutcomeCanceled} {
		total += d.attempts(o)
	}
	if made != 1 || total != 1 || d.attempts(outbox.OutcomeCanceled) != 1 {
		t.Errorf("receiver saw %d attempts; attempts_total sums to %v (canceled %v); want 1, 1, 1",
			made, total, d.attempts(outbox.OutcomeCanceled))
	}
}

func TestActorCrash_PendingRowsDeliveredAfterRestartAndDeliveredRowsNotResent(t *testing.T) {
	rec := newReceiver(t)
	var failA atomic.Bool
	failA.Store(true)
	rec.setRespond(func(_ context.Context, c call, _ int) int {
		if c.Lease == "lease-a" && failA.Load() {
			return http.StatusInternalServerError
		}
		return http.StatusOK
	})
	set := fastSettings()
	set.Sweep = longSweep // after the failure only the restart can pick lease A up again
	d := startDaemon(t, t.TempDir(), set, daemonOptions{chaos: true})

	rowsA, rowsB := newRows(rec, "lease-a", 3), newRows(rec, "lease-b", 2)
	d.commit(append(rowsA[:3:3], rowsB...)...)
	d.wake("lease-a")
	d.wake("lease-b")
	eventually(t, "B delivered (its rows deleted) and A's send exhausted", func() bool {
		return len(rec.accepted("lease-b")) == 2 && d.attempts(outbox.OutcomeRejected) == float64(len(set.Delays)) && d.pending() == 3
	})
	if d.pending() != 3 {
		t.Fatalf("pending before the crash = %d, want lease A's 3 rows", d.pending())
	}

	failA.Store(false)
	d.tree.Send(outboxPath, &messages.Crash{})
	eventually(t, "the outbox restarted", func() bool { return d.restarts() >= 1 })
	eventually(t, "lease A delivered by the restarted actor", func() bool { return d.pending() == 0 })

	if got := collapse(rec.accepted("lease-a")); !equal(got, ids(rowsA)) {
		t.Errorf("lease A accepted %v, want %v", got, ids(rowsA))
	}
	if got := rec.accepted("lease-b"); !equal(got, ids(rowsB)) {
		t.Errorf("lease B accepted %v, want each row once: %v", got, ids(rowsB))
	}
	if n := len(rec.of("lease-b")); n != 2 {
		t.Errorf("lease B was called %d times, want 2: delivered rows must not be resent after a restart", n)
	}
	if rec.refused() != 0 {
		t.Errorf("verifier refused %d calls", rec.refused())
	}
}

func TestActorCrash_InFlightAttemptIsCanceledAndTheRowDeliveredAfterRestart(t *testing.T) {
	rec := newReceiver(t)
	rowsA := newRows(rec, "lease-a", 2)
	rec.setRespond(func(ctx context.Context, c call, n int) int {
		if c.DeliveryID == rowsA[0].DeliveryID && n == 1 {
			rec.wait(ctx, nil) // hangs until the crash cancels it
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	})
	set := fastSettings()
	set.Sweep = longSweep
	d := startDaemon(t, t.TempDir(), set, daemonOptions{chaos: true})

	d.commit(rowsA...)
	d.wake("lease-a")
	eventually(t, "the head's first attempt in flight", func() bool {
		active, _ := rec.activeNow()
		return active == 1
	})
	d.tree.Send(outboxPath, &messages.Crash{})
	eventually(t, "the in-flight attempt canceled by the restart", func() bool {
		a := rec.attemptsOf(rowsA[0].DeliveryID)
		return len(a) >= 1 && a[0].Canceled
	})
	eventually(t, "both rows delivered after the restart", func() bool { return d.pending() == 0 })
	if d.restarts() < 1 {
		t.Errorf("restarts = %d, want ≥ 1", d.restarts())
	}
	if got := collapse(rec.accepted("lease-a")); !equal(got, ids(rowsA)) {
		t.Errorf("lease A accepted %v, want %v", got, ids(rowsA))
	}
	if got := d.attempts(outbox.OutcomeCanceled); got < 1 {
		t.Errorf("canceled attempts = %v, want ≥ 1", got)
	}
}

func TestProcessRestart_PendingRowsDeliveredInOrderWithTheSameDeliveryIDs(t *testing.T) {
	rec := newReceiver(t)
	var down atomic.Bool
	down.Store(true)
	rec.setRespond(func(context.Context, call, int) int {
		if down.Load() {
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	})
	dir := t.TempDir()
	set := fastSettings()
	d1 := startDaemon(t, dir, set, daemonOptions{})

	rowsA, rowsB := newRows(rec, "lease-a", 3), newRows(rec, "lease-b", 2)
	d1.commit(rowsA...)
	d1.commit(rowsB...)
	d1.wake("lease-a")
	d1.wake("lease-b")
	eventually(t, "both heads attempted before the restart", func() bool {
		return len(rec.of("lease-a")) > 0 && len(rec.of("lease-b")) > 0
	})
	d1.stop()
	before := rec.all()
	for _, c := range before {
		if c.DeliveryID != rowsA[0].DeliveryID && c.DeliveryID != rowsB[0].DeliveryID {
			t.Fatalf("a non-head row %q was attempted while its head failed", c.DeliveryID)
		}
	}

	down.Store(false)
	d2 := startDaemon(t, dir, set, daemonOptions{}) // no wake: the rows are the truth
	eventually(t, "every row delivered after the restart", func() bool { return d2.pending() == 0 })

	for _, lease := range []struct {
		name string
		rows []string
	}{{"lease-a", ids(rowsA)}, {"lease-b", ids(rowsB)}} {
		if got := collapse(rec.accepted(lease.name)); !equal(got, lease.rows) {
			t.Errorf("%s accepted %v, want %v", lease.name, got, lease.rows)
		}
	}
	// The heads attempted before the restart arrive afterwards with the same ID and
	// the same bytes.
	for _, b := range before {
		after := rec.attemptsOf(b.DeliveryID)
		last := after[len(after)-1]
		if last.Status != http.StatusOK {
			t.Errorf("delivery %s not accepted after the restart: %+v", b.DeliveryID, last)
		}
		if !bytes.Equal(last.Body, b.Body) {
			t.Errorf("delivery %s body changed across the restart: %s vs %s", b.DeliveryID, b.Body, last.Body)
		}
	}
	if rec.refused() != 0 {
		t.Errorf("verifier refused %d calls", rec.refused())
	}
}

// The issue's sequence: callbacks reach a local receiver that verifies the
// signature, in per-lease order, surviving a receiver that answers 500 twice and a
// daemon restart in between.
func TestIssue_Receiver500TwiceThenDaemonRestart_CallbacksArriveSignedInLeaseOrder(t *testing.T) {
	rec := newReceiver(t)
	var failuresLeft atomic.Int32
	failuresLeft.Store(2)
	rec.setRespond(func(_ context.Context, c call, _ int) int {
		if c.Lease == "lease-a" && failuresLeft.Add(-1) >= 0 {
			return http.StatusInternalServerError
		}
		return http.StatusOK
	})
	dir := t.TempDir()
	set := fastSettings()
	set.Delays = []time.Duration{0, 50 * time.Millisecond} // the two 500s exhaust one send
	set.Sweep = longSweep                                  // the restart, not a sweep, resumes lease A
	d1 := startDaemon(t, dir, set, daemonOptions{})

	rowsA, rowsB := newRows(rec, "lease-a", 3), newRows(rec, "lease-b", 2)
	d1.commit(rowsA...)
	d1.wake("lease-a")
	d1.commit(rowsB...)
	d1.wake("lease-b")
	// The receiver records its 200 before the sender reads it and deletes the row:
	// B is delivered once its rows are gone, else a restart resends B's last row.
	eventually(t, "A's head answered 500 twice and B delivered", func() bool {
		return d1.attempts(outbox.OutcomeRejected) == 2 && len(rec.accepted("lease-b")) == 2 && equal(d1.rowIDs(), ids(rowsA))
	})
	if a := rec.of("lease-a"); len(a) != 2 || a[0].DeliveryID != rowsA[0].DeliveryID || a[1].DeliveryID != rowsA[0].DeliveryID {
		t.Fatalf("lease A calls before the restart = %+v, want its head twice", a)
	}
	if got := d1.rowIDs(); !equal(got, ids(rowsA)) {
		t.Fatalf("pending before the restart = %v, want lease A's rows %v", got, ids(rowsA))
	}

	d1.stop() // the daemon restarts
	d2 := startDaemon(t, dir, set, daemonOptions{})
	eventually(t, "lease A delivered after the restart", func() bool { return d2.pending() == 0 })

	if got := collapse(rec.accepted("lease-a")); !equal(got, ids(rowsA)) {
		t.Errorf("lease A accepted %v, want %v", got, ids(rowsA))
	}
	if got := rec.accepted("lease-b"); !equal(got, ids(rowsB)) {
		t.Errorf("lease B accepted %v, want %v", got, ids(rowsB))
	}
	if head := rec.attemptsOf(rowsA[0].DeliveryID); len(head) < 3 || head[len(head)-1].Status != http.StatusOK {
		t.Errorf("lease A's head: %+v, want 500, 500 then 200 under the same delivery ID", head)
	}
	if total := len(rec.all()); rec.verified() != total || rec.refused() != 0 {
		t.Errorf("verifier: %d of %d calls accepted, %d refused; want all signed", rec.verified(), total, rec.refused())
	}
	if got := d2.attempts(outbox.OutcomeDelivered); got != 3 {
		t.Errorf("delivered attempts after the restart = %v, want 3", got)
	}
}

func TestMetrics_PendingAndOldestAgeGaugesReflectTheStore(t *testing.T) {
	rec := newReceiver(t)
	var acceptA, acceptB atomic.Bool
	rec.setRespond(func(_ context.Context, c call, _ int) int {
		if (c.Lease == "lease-a" && acceptA.Load()) || (c.Lease == "lease-b" && acceptB.Load()) {
			return http.StatusOK
		}
		return http.StatusInternalServerError
	})
	now := time.Now()
	set := fastSettings()
	d := startDaemon(t, t.TempDir(), set, daemonOptions{metricsNow: func() time.Time { return now }})
	gauges := func() (pending, age float64) {
		return d.metric("berth_callback_outbox_pending"), d.metric("berth_callback_outbox_oldest_age_seconds")
	}
	if p, a := gauges(); p != 0 || a != 0 {
		t.Fatalf("empty outbox: pending %v, oldest age %v; want 0, 0", p, a)
	}

	a1, a2, b1 := newRow(rec, "lease-a", 1), newRow(rec, "lease-a", 2), newRow(rec, "lease-b", 1)
	a1.CreatedAt, a2.CreatedAt, b1.CreatedAt = now.Add(-90*time.Second), now.Add(-30*time.Second), now.Add(-60*time.Second)
	d.commit(a1, a2, b1)
	d.wake("lease-a")
	d.wake("lease-b")
	if p, a := gauges(); p != 3 || a != 90 {
		t.Errorf("three rows: pending %v, oldest age %v; want 3, 90", p, a)
	}

	acceptB.Store(true)
	eventually(t, "lease B delivered", func() bool { return d.pending() == 2 })
	if p, a := gauges(); p != 2 || a != 90 {
		t.Errorf("after B: pending %v, oldest age %v; want 2, 90", p, a)
	}

	acceptA.Store(true)
	eventually(t, "lease A's head delivered", func() bool { return len(rec.accepted("lease-a")) >= 1 && d.pending() <= 1 })
	eventually(t, "the gauges to follow the store", func() bool {
		p, a := gauges()
		n := d.pending()
		return float64(n) == p && ((n == 1 && a == 30) || (n == 0 && a == 0))
	})
	eventually(t, "everything delivered", func() bool { return d.pending() == 0 })
	if p, a := gauges(); p != 0 || a != 0 {
		t.Errorf("drained: pending %v, oldest age %v; want 0, 0", p, a)
	}
}

func TestActorGoroutine_AnswersDescribeWhileADeliveryHangs(t *testing.T) {
	rec := newReceiver(t)
	release := make(chan struct{})
	rec.setRespond(func(ctx context.Context, c call, _ int) int {
		if c.Lease == "lease-a" {
			rec.wait(ctx, release)
		}
		return http.StatusOK
	})
	set := fastSettings()
	set.Sweep = longSweep
	d := startDaemon(t, t.TempDir(), set, daemonOptions{})

	rowA := newRow(rec, "lease-a", 1)
	d.commit(rowA)
	d.wake("lease-a")
	eventually(t, "lease A's delivery hanging in the receiver", func() bool {
		active, _ := rec.activeNow()
		return active == 1
	})

	info, err := d.describe(time.Second)
	if err != nil {
		t.Fatalf("Describe while a delivery hangs: %v (HTTP I/O on the actor goroutine?)", err)
	}
	if info.InFlight != 1 || info.Status != "ok" {
		t.Errorf("Describe = %+v, want 1 delivery in flight", info)
	}

	rowB := newRow(rec, "lease-b", 1)
	d.commit(rowB)
	d.wake("lease-b")
	eventually(t, "lease B delivered while A hangs", func() bool { return len(rec.accepted("lease-b")) == 1 })
	if active, _ := rec.activeNow(); active != 1 || len(rec.accepted("lease-a")) != 0 {
		t.Fatalf("lease A should still hang (active %d, accepted %v)", active, rec.accepted("lease-a"))
	}

	close(release)
	eventually(t, "lease A delivered once released", func() bool { return d.pending() == 0 })
}

func TestParallel_LeasesInFlightAreBounded(t *testing.T) {
	rec := newReceiver(t)
	release := make(chan struct{})
	rec.setRespond(func(ctx context.Context, _ call, _ int) int {
		rec.wait(ctx, release)
		return http.StatusOK
	})
	set := fastSettings()
	set.Parallel = 2
	set.Sweep = longSweep
	d := startDaemon(t, t.TempDir(), set, daemonOptions{})

	leases := []string{"lease-1", "lease-2", "lease-3", "lease-4"}
	for _, l := range leases {
		d.commit(newRow(rec, l, 1))
		d.wake(l)
	}
	// Describe is queued behind the four wakes, so it sees their outcome.
	info, err := d.describe(5 * time.Second)
	if err != nil {
		t.Fatalf("describe: %v", err)
	}
	if info.InFlight != 2 {
		t.Fatalf("in flight after four wakes = %d (%s), want the bound 2", info.InFlight, info.State)
	}
	eventually(t, "two deliveries hanging in the receiver", func() bool {
		active, _ := rec.activeNow()
		return active == 2
	})
	if n := len(rec.all()); n != 2 {
		t.Fatalf("receiver saw %d calls while two hang, want 2", n)
	}

	close(release)
	eventually(t, "all four delivered", func() bool { return d.pending() == 0 })
	if _, maxActive := rec.activeNow(); maxActive != 2 {
		t.Errorf("max concurrent deliveries = %d, want 2", maxActive)
	}
	for _, l := range leases {
		if n := len(rec.accepted(l)); n != 1 {
			t.Errorf("%s accepted %d times, want 1", l, n)
		}
	}
}

// CONTRACT.md: "Any 2xx is delivered; anything else is retried." A 3xx is not a
// 2xx, so it must be retried, not followed to whatever answers at its Location.
func TestRedirect_IsNotADeliveryAndTheRowIsKept(t *testing.T) {
	rec := newReceiver(t)
	rec.setRespond(func(context.Context, call, int) int { return http.StatusSeeOther })
	set := fastSettings() // DefaultSettings' client, as berthd uses it
	set.Sweep = longSweep
	d := startDaemon(t, t.TempDir(), set, daemonOptions{})

	d.commit(newRow(rec, "lease-a", 1))
	d.wake("lease-a")
	eventually(t, "the send to finish", func() bool {
		return d.attempts(outbox.OutcomeDelivered) > 0 || d.attempts(outbox.OutcomeRejected) == float64(len(set.Delays))
	})
	if got := d.attempts(outbox.OutcomeDelivered); got != 0 {
		t.Errorf("delivered attempts = %v: a 303 was followed and the redirect target's 200 taken as delivery", got)
	}
	if d.pending() != 1 {
		t.Errorf("pending = %d, want the row kept after a 3xx", d.pending())
	}
	if n := rec.landed.Load(); n != 0 {
		t.Errorf("the callback was followed to /landing %d times", n)
	}
}
