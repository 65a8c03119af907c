package lease_test

import (
	"slices"
	"testing"
	"time"

	"github.com/berth-dev/berth/actors/lease"
	"github.com/berth-dev/berth/messages"
)

// A closed lease's journal is compacted to one snapshot of its receipt once
// closed before compactBefore, and its stream deleted once closed before
// forgetBefore; a live lease, and one keep holds, are never touched; max
// bounds the changes of one call.
func TestClosedStreams_CompactedThenForgotten_LiveAndKeptUntouched(t *testing.T) {
	h := newHarness(t, nil)
	live := h.start(newSpec(1))
	h.awaitReport("ready", isReady)
	closing := h.start(newSpec(2))
	h.awaitReport("ready", func(r messages.LeaseReport) bool { return r.Lease == closing.id && isReady(r) })
	kept := h.start(newSpec(3))
	h.awaitReport("ready", func(r messages.LeaseReport) bool { return r.Lease == kept.id && isReady(r) })
	for _, l := range []*leaseUnderTest{closing, kept} {
		if err := awaitReply(t, "deprovision", l.deprovision(), unitWait); err != nil {
			t.Fatal(err)
		}
		l.waitEvent(lease.EvClosed)
	}
	settle := lease.ClosedStreams(h.store)
	keep := func(id string) bool { return id == kept.id }
	past, future := time.Now().Add(-time.Hour), time.Now().Add(time.Hour)

	// Closed an hour from now is not yet: nothing changes.
	if c, f, err := settle(past, past, keep, 10); err != nil || c+f != 0 {
		t.Fatalf("before their time: %d compacted, %d forgotten, %v", c, f, err)
	}
	// Compacted: one snapshot, no events, the same closed receipt.
	if c, f, err := settle(future, past, keep, 10); err != nil || c != 1 || f != 0 {
		t.Fatalf("compaction: %d compacted, %d forgotten, %v", c, f, err)
	}
	loaded, err := h.store.Load(lease.Stream(closing.id))
	if err != nil || loaded.Snapshot == nil || len(loaded.Events) != 0 {
		t.Fatalf("the compacted stream: %+v %v", loaded, err)
	}
	if ok, err := lease.ClosedReceipt(h.store)(closing.id); !ok || err != nil {
		t.Fatalf("the compacted stream's receipt: %v %v", ok, err)
	}
	if c, _, _ := settle(future, past, keep, 10); c != 0 {
		t.Fatalf("compacted again: %d", c)
	}
	// Forgotten, within max: the closed one; the live and the kept one stay.
	if c, f, err := settle(future, future, keep, 0); err != nil || c+f != 0 {
		t.Fatalf("max 0: %d compacted, %d forgotten, %v", c, f, err)
	}
	if _, f, err := settle(future, future, keep, 10); err != nil || f != 1 {
		t.Fatalf("forgetting: %d forgotten, %v", f, err)
	}
	streams, _ := h.store.Streams("lease/")
	if want := []string{lease.Stream(kept.id), lease.Stream(live.id)}; !slices.Equal(streams, slices.Sorted(slices.Values(want))) {
		t.Fatalf("streams left %v, want the live and the kept lease's", streams)
	}
	if live.state().Status != lease.Ready || len(live.events()) == 0 {
		t.Fatalf("the live lease was touched: %+v", live.state())
	}
}
