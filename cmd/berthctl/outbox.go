package main

import (
	"errors"
	"flag"
	"fmt"
	"strconv"

	"github.com/berth-dev/berth/messages"
)

// outbox shows the callbacks still queued, per lease (GET /debug/outbox): how
// many, how long the oldest has waited, the attempts at the head of the queue
// and what the last one answered.
func (c *client) outbox(args []string) error {
	fs := flag.NewFlagSet("outbox", flag.ContinueOnError)
	output := outputFlag(fs)
	rest, err := parseWithArgs(fs, args)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return errors.New("usage: berthctl outbox [-o table|json]")
	}
	if err := checkOutput(*output); err != nil {
		return err
	}
	const uri = "/debug/outbox"
	body, err := c.getDebug(uri)
	if err != nil {
		return err
	}
	if *output == outputJSON {
		return writeRawJSON(c.out, body)
	}
	var page messages.OutboxSummary
	if err := decode(uri, body, &page); err != nil {
		return err
	}
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
	_, err = fmt.Fprintf(c.out, "total queued: %d (%d leases)\n", page.TotalQueued, len(page.Leases))
	return err
}
