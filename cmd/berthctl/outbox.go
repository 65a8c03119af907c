package main

import (
	"fmt"
	"strconv"

	"github.com/berth-dev/berth/messages"
)

// printOutbox is berthctl outbox: the callbacks still queued, per lease (GET
// /debug/outbox): how many, how long the oldest has waited, the attempts at the
// head of the queue and what the last one answered.
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
	_, err := fmt.Fprintf(c.out, "total queued: %d (%d leases)\n", page.TotalQueued, len(page.Leases))
	return err
}
