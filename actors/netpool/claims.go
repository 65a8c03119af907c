package netpool

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/berth-dev/berth/messages"
)

// pendingClaim is a network bound in memory, awaiting the batch commit.
type pendingClaim struct {
	lease, network string
	made           bool // the lease created it (the pool was empty)
	bridged        bool // a slot of the default bridge (network is bridgedNetwork)
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
	if a.st.Bridged[m.Lease] {
		a.Metrics.claims.WithLabelValues("rebound").Inc()
		a.keepFree(made)
		m.Reply <- a.bridgedClaim()
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
	if made == "" && m.Single && a.bridgeRoom() {
		a.claims.Add(m.Lease, &pendingClaim{lease: m.Lease, network: bridgedNetwork, bridged: true, waiters: []chan<- messages.NetworkClaim{m.Reply}})
		return
	}
	a.lastClaim = a.Now()
	id := made
	switch {
	case id != "":
	case len(a.free) == 0:
		a.Metrics.claims.WithLabelValues("empty").Inc()
		m.Reply <- messages.NetworkClaim{}
		if a.Settings.Size > 0 { // no pool (it only hands out the bridge): nothing to refill
			a.schedule()
		}
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

// bridgeRoom reports whether a single-container lease may take a slot of the
// default bridge: the daemon isolates it (as found at start) and the bound
// and committing slots leave room.
func (a *Actor) bridgeRoom() bool {
	if !a.Settings.Bridged {
		return false
	}
	n := len(a.st.Bridged)
	for _, p := range a.claims.Items() {
		if p.bridged {
			n++
		}
	}
	return n < a.Settings.Bridge.Capacity
}

// bridgedClaim is the answer to a lease bound to the default bridge: its ID
// as found at start (its name when unknown: the launch inspects it by name).
func (a *Actor) bridgedClaim() messages.NetworkClaim {
	return messages.NetworkClaim{ID: cmp.Or(a.Settings.Bridge.ID, bridgedNetwork), Name: bridgedNetwork, Bridged: true}
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
		evs[i] = bindEvent{Network: p.network, Lease: p.lease, typ: EvBound}
		if p.bridged {
			evs[i].typ = EvBridged
		}
	}
	if err := a.commit(evs); err != nil {
		var ids []string
		for _, p := range batch {
			if !p.bridged {
				ids = append(ids, p.network)
			}
			for _, w := range p.waiters {
				w <- messages.NetworkClaim{Err: fmt.Errorf("bind pool network: %w", err)}
			}
		}
		a.free = append(ids, a.free...)
		a.Metrics.claims.WithLabelValues("error").Add(float64(len(batch)))
		return
	}
	for _, p := range batch {
		answer, outcome := messages.NetworkClaim{ID: p.network, Name: a.names[p.network]}, "warm"
		switch {
		case p.bridged:
			answer, outcome = a.bridgedClaim(), "bridged"
		case p.made:
			outcome = "made"
		}
		for _, w := range p.waiters {
			w <- answer
		}
		a.Metrics.claims.WithLabelValues(outcome).Inc()
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
	if err := a.commit([]bindEvent{unbindEvent(binding{m.ID, m.Lease}, ReasonDropped)}); err == nil {
		a.Metrics.ops.WithLabelValues("dropped").Inc()
		a.Log.Warn().Str("lease", m.Lease).Str("network", m.ID).Msg("bound pool network unusable; binding dropped")
	}
}

// abandon takes back the network (or bridge slot) of a first attempt that
// gave up waiting for its claim: no lease ever learned its ID, so it is free
// again at once. (A claim still in the batch was committed before this
// message: it does not commute.)
func (a *Actor) abandon(lease string) {
	if a.st.Bridged[lease] {
		_ = a.commit([]bindEvent{unbindEvent(binding{bridgedNetwork, lease}, ReasonReleased)}) // kept on failure: released once the lease is gone
		return
	}
	id, ok := a.st.byLease[lease]
	if !ok {
		return
	}
	if err := a.commit([]bindEvent{unbindEvent(binding{id, lease}, ReasonReleased)}); err == nil {
		a.free = append(a.free, id)
		a.gauges()
	}
}
