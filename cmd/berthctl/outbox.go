package main

import (
	"fmt"
	"strconv"
	"time"

	"github.com/berth-dev/berth/messages"
)

// printOutbox is berthctl outbox: the callbacks still queued, per lease (GET
// /debug/outbox): how many, how long the oldest has waited, the attempts at the
// head of the queue and what the last one answered; then the lifecycle
// callbacks removed undelivered (callback_max_age, coalescing), which providerd
// will never see.
func (c *client) printOutbox(page messages.OutboxSummary) error {
	if len(page.Leases) > 0 {
		// The last error is free text of any length: it goes last so the
		// columns before it stay readable.
		t := newTable(c.out, "LEASE", "QUEUED", "OLDEST", "ATTEMPTS", "KINDS", "LAST ERROR")
		for _, l := range page.Leases {
			t.row(l.LeaseUUID, strconv.Itoa(l.Queued), ageSeconds(l.OldestAgeSeconds), strconv.Itoa(l.Attempts),
				countsSummary(l.Kinds), l.LastError)
		}
		if err := t.flush(); err != nil {
			return err
		}
	}
	if _, err := fmt.Fprintf(c.out, "total queued: %d (%d leases)\n", page.TotalQueued, len(page.Leases)); err != nil {
		return err
	}
	return c.printDropped(page)
}

// printDropped lists the recent lifecycle rows removed undelivered and counts
// them all since the outbox actor started; nothing when none was.
func (c *client) printDropped(page messages.OutboxSummary) error {
	if page.Expired+page.Coalesced == 0 {
		return nil
	}
	if _, err := fmt.Fprintf(c.out, "\nremoved undelivered: %d expired, %d coalesced\n", page.Expired, page.Coalesced); err != nil {
		return err
	}
	t := newTable(c.out, "LEASE", "STATUS", "REASON", "CREATED", "REMOVED", "ATTEMPTS", "LAST ERROR")
	for _, d := range page.Dropped {
		t.row(d.LeaseUUID, d.Status, d.Reason, d.CreatedAt.UTC().Format(time.RFC3339), d.DroppedAt.UTC().Format(time.RFC3339),
			strconv.Itoa(d.Attempts), d.LastError)
	}
	return t.flush()
}
