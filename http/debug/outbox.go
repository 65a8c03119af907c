package debug

import (
	"cmp"
	"net/http"
	"slices"
	"time"

	"github.com/berth-dev/berth/messages"
)

// outbox is GET /debug/outbox: the queued callback rows by lease, the lease with
// the oldest row first, each with its head row's attempts as the outbox actor
// counted them. The rows are read from the store; the attempts are the actor's
// memory (reset by its restart), and when it cannot answer the rows still show.
func (s *server) outbox(w http.ResponseWriter, r *http.Request) {
	if s.opts.Reads == nil {
		writeError(w, messages.Refuse(messages.ErrUnavailable, "no state store to read"))
		return
	}
	rows, err := s.opts.Reads.Outbox("")
	if err != nil {
		writeError(w, err)
		return
	}
	book, askErr := ask(s, r.Context(), s.opts.OutboxPath, func(c chan<- messages.DebugOutboxReply) any {
		return &messages.DebugOutbox{Reply: c}
	})
	out := summarizeOutbox(rows, book, s.opts.Now())
	type page struct {
		messages.OutboxSummary
		// AttemptsError says why attempts are missing (the outbox actor did not answer).
		AttemptsError string `json:"attempts_error,omitempty"`
	}
	p := page{OutboxSummary: out}
	if askErr != nil {
		p.AttemptsError = askErr.Error()
	}
	writeJSON(w, http.StatusOK, p)
}

// summarizeOutbox groups rows (in creation order, as Reads.Outbox returns them) by
// lease: count, kinds, the head row (the oldest: only it is ever attempted) and
// its attempts. Leases are sorted by their oldest row, oldest first. The rows the
// outbox removed undelivered (expired, coalesced) come from its ring.
func summarizeOutbox(rows []QueuedCallback, book messages.DebugOutboxReply, now time.Time) messages.OutboxSummary {
	out := messages.OutboxSummary{TotalQueued: len(rows), Leases: []messages.OutboxLease{},
		Expired: book.Expired, Coalesced: book.Coalesced, Dropped: []messages.OutboxDropped{}}
	for _, d := range book.Delivered {
		if d.Dropped != "" {
			out.Dropped = append(out.Dropped, messages.OutboxDropped{LeaseUUID: d.Lease, DeliveryID: d.DeliveryID, Kind: d.Kind,
				Status: d.Status, Reason: d.Dropped, CreatedAt: d.CreatedAt, DroppedAt: d.DeliveredAt, Attempts: d.Attempts, LastError: d.LastError})
		}
	}
	byLease := map[string]int{}
	for _, e := range rows {
		i, ok := byLease[e.Lease]
		if !ok {
			i = len(out.Leases)
			byLease[e.Lease] = i
			l := messages.OutboxLease{LeaseUUID: e.Lease, OldestAt: e.CreatedAt, Kinds: map[string]int{}}
			if t, ok := book.Attempts[e.DeliveryID]; ok {
				l.Attempts, l.LastError, l.LastAttemptAt = t.Attempts, t.LastError, timePtr(t.LastAttemptAt)
			}
			out.Leases = append(out.Leases, l)
		}
		l := &out.Leases[i]
		l.Queued++
		l.Kinds[e.Kind]++
		if e.CreatedAt.Before(l.OldestAt) {
			l.OldestAt = e.CreatedAt
		}
	}
	for i := range out.Leases {
		out.Leases[i].OldestAgeSeconds = seconds(now.Sub(out.Leases[i].OldestAt))
	}
	slices.SortStableFunc(out.Leases, func(a, b messages.OutboxLease) int {
		return cmp.Or(a.OldestAt.Compare(b.OldestAt), cmp.Compare(a.LeaseUUID, b.LeaseUUID))
	})
	return out
}
