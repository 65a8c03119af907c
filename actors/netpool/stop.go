package netpool

import (
	"context"
	"time"
)

// stopping trims the pool as it stops (berthd's shutdown, or the tree draining
// after a failure; never a supervisor's restart), within StopBudget: when no network is bound to a lease that
// may still run, it releases the networks of leases closed meanwhile and
// removes every unbound pool network. The floor is zero. A pool kept across a
// stop outlives its data dir once that is removed (throwaway daemons, test
// runs: one machine held 384 idle pool networks of 22 installations no longer
// there, and dockerd carried them on every operation), while a restart refills
// the pool in its first pass, off any provision's path. With a lease bound the
// installation is plainly coming back, and nothing is touched.
func (a *Actor) stopping() {
	// A supervisor's restart (of the pool or an ancestor) is not a stop: the
	// pool comes straight back, and a restart must stay quick.
	if a.failed || a.loop == nil || a.Settings.StopBudget <= 0 || !a.Tree.Draining() {
		return
	}
	close(a.halt) // the running pass makes nothing more
	ctx, cancel := context.WithTimeout(context.Background(), a.Settings.StopBudget)
	defer cancel()
	if a.claims.Len() > 0 {
		a.Log.Info().Int("claims", a.claims.Len()).Msg("network pool kept at stop: claims in flight")
		return
	}
	var last findings
	select {
	case last = <-a.passDone: // its creates are done: the listing below sees them
	case <-ctx.Done():
		a.Log.Warn().Msg("network pool kept at stop: its pass did not end in time")
		return
	}
	for _, b := range last.closed {
		a.closed[b.lease] = true
	}
	var gone []binding
	for n, l := range a.st.Bound {
		gone = append(gone, binding{n, l})
	}
	for l := range a.st.Bridged {
		gone = append(gone, binding{bridgedNetwork, l})
	}
	for _, b := range gone {
		if !a.closed[b.lease] {
			a.Log.Info().Int("bound", len(a.st.Bound)).Int("bridged", len(a.st.Bridged)).Msg("network pool kept at stop: networks are bound to leases")
			return
		}
	}
	var out findings
	a.settle(ctx, gone, &out)
	a.unbind(out.released, out.vanished)
	listed, err := a.Engine.PoolNetworks(ctx)
	if err != nil {
		a.Log.Warn().Err(err).Msg("network pool not trimmed at stop")
		return
	}
	var idle []string
	for _, n := range listed {
		if _, bound := a.st.Bound[n.ID]; !bound {
			idle = append(idle, n.ID)
		}
	}
	var waited time.Duration
	tried := a.remove(ctx, idle, &waited, nil)
	a.Log.Info().Int("removed", len(tried)).Int("kept_bound", len(a.st.Bound)).Msg("network pool trimmed at stop")
}

// isClosed reports whether ch is closed (a nil channel never is).
func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
