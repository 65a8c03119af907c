package refresh

import (
	"maps"
	"slices"

	"github.com/berth-dev/berth/dockerio"
	"github.com/berth-dev/berth/messages"
)

// Classify reads the inventory from the live leases (ready: the Ready ones)
// and this installation's containers. A Ready lease is stale when one of its
// running containers was created under an older contract, unless one was
// created under a newer one: a newer berthd's container is never recreated by
// an older one. Shared are the leases with a container, in any state, on a
// network a container of another lease is on.
func Classify(live, ready map[string]bool, containers []messages.Container) Inventory {
	inv := Inventory{Live: live, Stale: map[string][]string{}, Current: map[string]bool{}, Shared: []string{}}
	newer := map[string]bool{}
	onNetwork := map[string]map[string]bool{}
	for _, c := range containers {
		if c.Lease == "" {
			continue
		}
		for _, n := range c.Networks {
			if onNetwork[n] == nil {
				onNetwork[n] = map[string]bool{}
			}
			onNetwork[n][c.Lease] = true
		}
		switch {
		case !ready[c.Lease] || c.State != "running":
		case c.Contract > dockerio.RuntimeContract:
			newer[c.Lease] = true
		case c.Contract < dockerio.RuntimeContract:
			inv.Stale[c.Lease] = append(inv.Stale[c.Lease], c.ID)
		}
	}
	for l := range ready {
		if newer[l] || inv.Stale[l] == nil {
			delete(inv.Stale, l)
			inv.Current[l] = true
		}
	}
	shared := map[string]bool{}
	for _, leases := range onNetwork {
		if len(leases) > 1 {
			maps.Copy(shared, leases)
		}
	}
	inv.Shared = append(inv.Shared, slices.Sorted(maps.Keys(shared))...)
	return inv
}

// Status is GET /runtime_refresh: the inventory, every live lease's durable
// outcome, and the skipped leases of the current or most recent run.
func Status(st *State, inv Inventory) *messages.RuntimeRefreshStatus {
	out := &messages.RuntimeRefreshStatus{Contract: dockerio.RuntimeContract, Active: st.Active(),
		StaleLeases: append([]string{}, slices.Sorted(maps.Keys(inv.Stale))...), InFlight: st.count(InFlight),
		SharedNetworkLeases: inv.Shared, Leases: []messages.RefreshRow{}}
	out.Stale = len(out.StaleLeases)
	if out.SharedNetworkLeases == nil {
		out.SharedNetworkLeases = []string{}
	}
	rows := map[string]messages.RefreshRow{}
	if st.Run != nil {
		for id, l := range st.Run.Leases {
			if l.Phase == Dropped || (l.Phase == Pending && st.Run.Ended) {
				rows[id] = messages.RefreshRow{LeaseUUID: id, Outcome: messages.RefreshSkipped}
			}
		}
	}
	for id, o := range st.Outcomes {
		rows[id] = messages.RefreshRow{LeaseUUID: id, MaintenanceID: o.MaintenanceID, Outcome: o.Outcome, Restored: o.Restored}
	}
	for _, id := range slices.Sorted(maps.Keys(rows)) {
		r := rows[id]
		if !inv.Live[id] {
			continue
		}
		out.Leases = append(out.Leases, r)
		switch r.Outcome {
		case messages.RefreshRefreshed:
			out.Refreshed++
		case messages.RefreshFailed:
			out.Failed++
		default:
			out.Skipped++
		}
		if r.Restored != nil {
			out.Restored++
		}
	}
	return out
}
