package outbox

import (
	"slices"
	"time"

	"github.com/berth-dev/berth/messages"
	"github.com/berth-dev/berth/messages/callback"
	"github.com/berth-dev/berth/persistence"
)

// Why a row left the outbox without a delivery (berth_callback_<reason>_total,
// the debug ring's Dropped).
const (
	DroppedExpired   = "expired"
	DroppedCoalesced = "coalesced"
)

// dropped is a row the outbox removes undelivered, and why.
type dropped struct {
	entry  persistence.OutboxEntry
	reason string
}

// stale picks, from one lease's queue (oldest first), the rows providerd no
// longer needs (docker-backend.md, callback_max_age), so that a refused
// observation cannot hold the lease's FIFO — and the exact completions queued
// behind it — for good. Only lifecycle observations ever qualify: exact
// operation and maintenance completions are never aged nor coalesced.
//   - expired: created maxAge or more ago (0 disables ageing). A deprovisioned
//     row is an observation like a death (the seed's words); the close's own
//     authority is the journaled closed receipt, which never expires.
//   - coalesced: a death behind which a newer lifecycle row stays queued —
//     providerd needs the lease's newest state. A deprovisioned row is never
//     superseded (it is the last state of its lease); only a row that stays
//     supersedes, so an expiring newer row never takes an older one with it.
func stale(rows []persistence.OutboxEntry, now time.Time, maxAge time.Duration) []dropped {
	var out []dropped
	newer := false // a lifecycle row after this one stays queued
	for i := len(rows) - 1; i >= 0; i-- {
		e := rows[i]
		if e.Row.Kind != persistence.KindLifecycle {
			continue
		}
		switch {
		case maxAge > 0 && now.Sub(e.Row.CreatedAt) >= maxAge:
			out = append(out, dropped{entry: e, reason: DroppedExpired})
		case newer && callback.Status(e.Row.Body) != messages.CallbackDeprovisioned:
			out = append(out, dropped{entry: e, reason: DroppedCoalesced})
		default:
			newer = true
		}
	}
	slices.Reverse(out)
	return out
}

// drop records a row prune removed: logged, counted, and kept in the debug ring.
func (a *Actor) drop(d dropped) {
	row := d.entry.Row
	a.log.Warn().Str("lease_uuid", row.Lease).Str("delivery_id", row.DeliveryID).Str("reason", d.reason).
		Str("status", callback.Status(row.Body)).Time("created_at", row.CreatedAt).
		Msg("lifecycle callback removed undelivered")
	a.met.drop(row.Kind, d.reason)
	a.droppedTotal[d.reason]++
	a.remember(row, a.set.Now(), d.reason)
}
