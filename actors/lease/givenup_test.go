package lease_test

import (
	"testing"
	"time"

	"github.com/berth-dev/berth/actors/lease"
	"github.com/berth-dev/berth/messages"
)

// givenUp is a ticket whose asker already answered an error.
func givenUp() *messages.Ticket {
	tk := messages.NewTicket(time.Now().Add(time.Hour))
	tk.Drop()
	return tk
}

// TestLease_CloseGivenUpByItsAsker_NeverJournaled_RegistryTold: a Deprovision
// the facade stopped waiting for (answered 503) reaches the lease late: the
// close intent is never journaled, the lease keeps running, nothing is
// answered, and the registry hears CloseDropped so it stops treating the lease
// as closing. A close asked again afterwards closes it.
func TestLease_CloseGivenUpByItsAsker_NeverJournaled_RegistryTold(t *testing.T) {
	h := newHarness(t, nil)
	l, _ := readyLease(t, h)
	before := l.eventTypes()
	reply := make(chan error, 1)
	l.send(&messages.Deprovision{Lease: l.id, Reply: reply, Ticket: givenUp()})
	select {
	case m := <-h.givenUp:
		if m.Lease != l.id {
			t.Fatalf("CloseDropped for %s, want %s", m.Lease, l.id)
		}
	case <-time.After(unitWait):
		t.Fatal("the registry was never told the close was refused")
	}
	l.barrier()
	if got := l.eventTypes(); len(got) != len(before) {
		t.Fatalf("journal %v after a given-up close, want it unchanged %v", got, before)
	}
	if st := l.state(); st.Status != lease.Ready {
		t.Fatalf("status %s after a given-up close, want ready", st.Status)
	}
	select {
	case err := <-reply:
		t.Fatalf("a given-up close was answered (%v): its asker answered already", err)
	default:
	}
	if err := awaitReply(t, "deprovision", l.deprovision(), unitWait); err != nil {
		t.Fatalf("a close asked again: %v", err)
	}
}

// TestLease_MaintenanceGivenUpByItsAsker_NotDecided_Reported: a restart whose
// asker gave up is never decided (no intent journaled, no restart), and the
// lease reports, as the registry waits for a report after every maintenance
// it forwarded.
func TestLease_MaintenanceGivenUpByItsAsker_NotDecided_Reported(t *testing.T) {
	h := newHarness(t, nil)
	l, ctr := readyLease(t, h)
	before := l.eventTypes()
	reply := make(chan error, 1)
	l.send(&lease.MaintainCommand{Maintain: lease.Maintain{Kind: lease.KindRestart, ID: "m-1", AdmittedAt: time.Now()},
		Reply: reply, Ticket: givenUp()})
	h.awaitReport("ready, after the refused maintenance", isReady)
	if got := l.eventTypes(); len(got) != len(before) {
		t.Fatalf("journal %v after a given-up restart, want it unchanged %v", got, before)
	}
	if ctrs := l.containers(); len(ctrs) != 1 || ctrs[0].ID != ctr.ID {
		t.Fatalf("containers %+v after a given-up restart, want %s untouched", ctrs, ctr.ID)
	}
}
