package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"net/url"
	"strconv"

	"github.com/berth-dev/berth/messages"
)

// retentionsPageSize is how many entries berthctl asks for per page of
// GET /retentions; the daemon clamps anything above 5000.
const retentionsPageSize = 500

// retentions lists the closed leases whose data is retained (signed
// GET /retentions), following every page.
func (c *client) retentions(args []string) error {
	_, asJSON, err := parseView(flag.NewFlagSet("retentions", flag.ContinueOnError), args, 0, "usage: berthctl retentions [-o table|json]")
	if err != nil {
		return err
	}
	entries, err := c.allRetentions()
	if err != nil {
		return err
	}
	if asJSON {
		return writeJSON(c.out, struct {
			Retentions []json.RawMessage `json:"retentions"`
		}{entries})
	}
	t := newTable(c.out, "LEASE", "TENANT", "STATUS", "RETAINED AT", "RETAINED UNTIL", "DISK MB", "USED")
	for _, raw := range entries {
		var r messages.Retention
		if err := json.Unmarshal(raw, &r); err != nil {
			return fmt.Errorf("GET /retentions: unexpected entry %s: %w", raw, err)
		}
		until := timestamp(r.RetainedUntil)
		if r.RetainedUntil.IsZero() {
			until = "until evicted"
		}
		t.row(r.LeaseUUID, r.Tenant, r.Status, timestamp(r.RetainedAt), until, strconv.FormatInt(r.DiskMB, 10), byteSize(r.UsedBytes))
	}
	return t.flush()
}

// allRetentions follows GET /retentions page by page (keyset paging on
// lease_uuid, CONTRACT.md) and returns every entry as the daemon sent it
// (never nil, so -o json prints [] for none).
func (c *client) allRetentions() ([]json.RawMessage, error) {
	entries := []json.RawMessage{}
	cont := ""
	for {
		q := url.Values{"limit": {strconv.Itoa(retentionsPageSize)}}
		if cont != "" {
			q.Set("continue", cont)
		}
		uri := "/retentions?" + q.Encode()
		var page struct {
			Retentions []json.RawMessage `json:"retentions"`
			Continue   string            `json:"continue"`
		}
		if err := c.getAPIJSON(uri, &page); err != nil {
			return nil, err
		}
		entries = append(entries, page.Retentions...)
		if page.Continue == "" {
			return entries, nil
		}
		// Keyset paging moves strictly forward; a daemon that answers the same
		// cursor again would keep berthctl here forever.
		if page.Continue <= cont {
			return nil, fmt.Errorf("GET %s: continue %q does not move past %q", uri, page.Continue, cont)
		}
		cont = page.Continue
	}
}
