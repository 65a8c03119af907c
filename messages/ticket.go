package messages

import (
	"sync/atomic"
	"time"
)

// Ticket settles, once, whether a request that changes state takes effect. The
// asker (the facade) waits for an answer until Deadline; the actor that would
// carry the request out Takes the ticket just before its first durable change,
// and the asker that stops waiting Drops it. Whichever comes first decides: a
// request whose ticket was dropped — its asker already answered an error —
// never takes effect, however late it reaches its actor (a registry restarting
// with it in its mailbox, a lease actor slow to drain); one taken is answered
// by the actor, and its asker waits for that answer. gRPC's deadline
// propagation is the model: the server checks the deadline before the work. A
// nil Ticket (a request berthd makes itself) is always taken.
type Ticket struct {
	Deadline time.Time
	state    atomic.Int32 // ticketOpen, ticketTaken or ticketDropped
}

const (
	ticketOpen int32 = iota
	ticketTaken
	ticketDropped
)

// NewTicket is an open ticket whose asker waits until deadline.
func NewTicket(deadline time.Time) *Ticket { return &Ticket{Deadline: deadline} }

// Take claims the request for its actor: true means carry it out (and answer
// it); false means its asker gave up or its deadline passed — change nothing.
// Taking twice is harmless.
func (t *Ticket) Take() bool {
	if t == nil {
		return true
	}
	if !time.Now().Before(t.Deadline) {
		t.state.CompareAndSwap(ticketOpen, ticketDropped)
	}
	t.state.CompareAndSwap(ticketOpen, ticketTaken)
	return t.state.Load() == ticketTaken
}

// Drop is the asker giving up: true means the request will never take effect;
// false means an actor took it and will answer.
func (t *Ticket) Drop() bool {
	if t == nil {
		return false
	}
	t.state.CompareAndSwap(ticketOpen, ticketDropped)
	return t.state.Load() == ticketDropped
}

// Dropped reports whether the request will never take effect (its asker gave up
// or its deadline passed): an actor refuses it before doing any work.
func (t *Ticket) Dropped() bool {
	if t == nil {
		return false
	}
	return t.state.Load() == ticketDropped || (t.state.Load() == ticketOpen && !time.Now().Before(t.Deadline))
}
