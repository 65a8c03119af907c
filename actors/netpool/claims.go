package netpool

import (
	"fmt"
	"slices"

	"github.com/berth-dev/berth/messages"
)

// pendingClaim is a network bound in memory, awaiting the batch commit.
type pendingClaim struct {
	lease, network string
	made           bool // the lease created it (the pool was empty)
	waiters        []chan<- messages.NetworkClaim
}

// claimCommutes: a claim may pass a pending batch (it sees the batch as the
// batch's own claims do); anything else commits the batch first.
func claimCommutes(msg any) bool {
	_, ok := msg.(*messages.ClaimNetwork)
	return ok
}

// claim answers with the lease's bound network, or binds a free one (answered
// once the batch commit lands), or answers empty when none is free.
func (a *Actor) claim(m *messages.ClaimNetwork) {
	delete(a.closed, m.Lease) // it claims, so it is live (a closed UUID provisioned again)
	made := a.takeMade(m)
	if id, ok := a.st.byLease[m.Lease]; ok {
		a.Metrics.claims.WithLabelValues("rebound").Inc()
		a.keepFree(made)
		m.Reply <- messages.NetworkClaim{ID: id, Name: a.names[id]}
		return
	}
	for _, p := range a.claims.Items() {
		if p.lease == m.Lease {
			p.waiters = append(p.waiters, m.Reply)
			a.keepFree(made)
			return
		}
	}
	if !m.Bind {
		m.Reply <- messages.NetworkClaim{}
		return
	}
	a.lastClaim = a.Now()
	id := made
	switch {
	case id != "":
	case len(a.free) == 0:
		a.Metrics.claims.WithLabelValues("empty").Inc()
		m.Reply <- messages.NetworkClaim{}
		a.schedule()
		return
	default:
		id = a.free[0]
		a.free = a.free[1:]
	}
	// Claims already in the mailbox join this commit.
	a.claims.Add(m.Lease, &pendingClaim{lease: m.Lease, network: id, made: made != "", waiters: []chan<- messages.NetworkClaim{m.Reply}})
	if len(a.free) < a.Settings.Size {
		a.schedule()
	}
}

// takeMade returns the network a claim made itself when the pool may bind it:
// not bound, not being bound, and taken off the free list and the trim if a
// pass adopted it between its create and this claim. "": none, or it went to
// another lease meanwhile (the claim is then an ordinary one).
func (a *Actor) takeMade(m *messages.ClaimNetwork) string {
	id := m.Made
	if id == "" {
		return ""
	}
	if _, bound := a.st.Bound[id]; bound {
		return ""
	}
	for _, p := range a.claims.Items() {
		if p.network == id {
			return ""
		}
	}
	a.names[id] = m.MadeName
	a.free = slices.DeleteFunc(a.free, func(f string) bool { return f == id })
	a.trim = slices.DeleteFunc(a.trim, func(f string) bool { return f == id })
	return id
}

// keepFree puts a network a lease made but does not need on the free list.
// Marked made: a pass listing from before its create must not forget it.
func (a *Actor) keepFree(id string) {
	if id != "" {
		a.made[id] = struct{}{}
		a.free = append(a.free, id)
		a.gauges()
	}
}

// commitClaims journals a batch of claims in one commit, then answers them. A
// failed commit binds nothing: every waiter gets the error and the networks go
// back to the head of the free list.
func (a *Actor) commitClaims(batch []*pendingClaim) {
	evs := make([]bindEvent, len(batch))
	for i, p := range batch {
		evs[i] = bindEvent{Network: p.network, Lease: p.lease}
	}
	if err := a.commit(EvBound, evs); err != nil {
		ids := make([]string, len(batch))
		for i, p := range batch {
			ids[i] = p.network
			for _, w := range p.waiters {
				w <- messages.NetworkClaim{Err: fmt.Errorf("bind pool network: %w", err)}
			}
		}
		a.free = append(ids, a.free...)
		a.Metrics.claims.WithLabelValues("error").Add(float64(len(batch)))
		return
	}
	for _, p := range batch {
		for _, w := range p.waiters {
			w <- messages.NetworkClaim{ID: p.network, Name: a.names[p.network]}
		}
		if p.made {
			a.Metrics.claims.WithLabelValues("made").Inc()
		} else {
			a.Metrics.claims.WithLabelValues("warm").Inc()
		}
	}
}

// abandonClaims answers claims a stopping pool will not commit: their leases
// create their own networks; the networks stay in Docker, adopted next start.
func (a *Actor) abandonClaims(batch []*pendingClaim) {
	for _, p := range batch {
		for _, w := range p.waiters {
			w <- messages.NetworkClaim{}
		}
	}
}

// drop forgets a binding its lease found unusable; the network is never handed
// out again (a pass finds it gone, or adopts it back only if Docker still lists
// it unbound — then it is ours and empty).
func (a *Actor) drop(m *messages.DropNetwork) {
	if m.ID == "" {
		a.abandon(m.Lease)
		return
	}
	if a.st.Bound[m.ID] != m.Lease {
		return
	}
	if err := a.commit(EvUnbound, []bindEvent{{Network: m.ID, Lease: m.Lease, Reason: ReasonDropped}}); err == nil {
		a.Metrics.ops.WithLabelValues("dropped").Inc()
		a.Log.Warn().Str("lease", m.Lease).Str("network", m.ID).Msg("bound pool network unusable; binding dropped")
	}
}

// abandon takes back the network of a first attempt that gave up waiting for
// its claim: no lease ever learned its ID, so it is free again at once. (A
// claim still in the batch was committed before this message: it does not
// commute.)
func (a *Actor) abandon(lease string) {
	id, ok := a.st.byLease[lease]
	if !ok {
		return
	}
	if err := a.commit(EvUnbound, []bindEvent{{Network: id, Lease: lease, Reason: ReasonReleased}}); err == nil {
		a.free = append(a.free, id)
		a.gauges()
	}
}
