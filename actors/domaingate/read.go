package domaingate

import (
	"cmp"
	"slices"
	"time"

	"github.com/berth-dev/berth/messages"
)

// Views are the gates for the operator's debug API, of lease when set, ordered
// by lease then domain: the journaled state with what only the actor knows —
// which gates a check is running for and when each waiting one is checked next.
func Views(st *State, lease string, checking map[string]bool, next map[string]time.Time) []messages.DomainGateView {
	out := []messages.DomainGateView{}
	for k, g := range st.Gates {
		if lease != "" && g.Lease != lease {
			continue
		}
		v := messages.DomainGateView{LeaseUUID: g.Lease, Domain: g.Domain, State: messages.GateWaiting, Since: g.Since,
			Attempts: g.Checks, LastResult: g.Last, Checking: checking[k]}
		if at := g.CheckedAt; !at.IsZero() {
			v.LastCheckAt = &at
		}
		if g.Open {
			v.State = messages.GateOpen
		} else if at, ok := next[k]; ok {
			v.NextCheckAt = &at
		}
		out = append(out, v)
	}
	slices.SortFunc(out, func(a, b messages.DomainGateView) int {
		return cmp.Or(cmp.Compare(a.LeaseUUID, b.LeaseUUID), cmp.Compare(a.Domain, b.Domain))
	})
	return out
}
