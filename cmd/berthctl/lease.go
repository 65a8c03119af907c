package main

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/berth-dev/berth/messages"
)

// lease shows one lease: its status block, then its journal, releases,
// callbacks, diagnostics and containers, then (ingress on) its instances' names
// and its custom domains with their DNS gates. Everything but the containers comes
// from the debug read model (GET /debug/leases/{lease}); the containers come
// from the API's GET /info/{lease}, which answers only while the lease is ready
// — otherwise they are the read model's view of them.
func (c *client) lease(args []string) error {
	rest, asJSON, err := parseView(flag.NewFlagSet("lease", flag.ContinueOnError), args, 1, "usage: berthctl lease <uuid> [-o table|json]")
	if err != nil {
		return err
	}
	id := rest[0]
	if !messages.ValidLeaseID(id) {
		return fmt.Errorf("lease %q is not a canonical UUID", id)
	}
	uri := "/debug/leases/" + id
	raw, err := c.getDebug(uri)
	if err != nil {
		return err
	}
	var detail leaseHistory
	if err := decode(uri, raw, &detail); err != nil {
		return err
	}
	var info *messages.LeaseInfo
	rawInfo := []byte("null")
	if detail.Lease.Status == messages.StatusReady {
		rawInfo, info, err = c.leaseInfo(id)
		if err != nil {
			return err
		}
	}
	if asJSON {
		merged, err := withField(raw, "info", rawInfo)
		if err != nil {
			return fmt.Errorf("GET %s: %w", uri, err)
		}
		return writeRawJSON(c.out, merged)
	}
	return printLease(c.out, detail, info)
}

// leaseInfo reads GET /info/{lease}. A 404 is no error: the lease left ready
// between the two requests, and the read model's containers are shown instead.
func (c *client) leaseInfo(id string) ([]byte, *messages.LeaseInfo, error) {
	uri := "/info/" + id
	raw, err := c.getAPI(uri)
	var refused *answerError
	if errors.As(err, &refused) && strings.HasPrefix(refused.status, "404") {
		return []byte("null"), nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	var info messages.LeaseInfo
	if err := decode(uri, raw, &info); err != nil {
		return nil, nil, err
	}
	return raw, &info, nil
}

// withField appends "key": value to the JSON object obj, keeping obj's own
// bytes and field order.
func withField(obj []byte, key string, value []byte) ([]byte, error) {
	obj = bytes.TrimSpace(obj)
	if len(obj) < 2 || obj[0] != '{' || obj[len(obj)-1] != '}' {
		return nil, errors.New("the answer is not a JSON object")
	}
	k, _ := json.Marshal(key)
	var b bytes.Buffer
	b.Write(obj[:len(obj)-1])
	if len(bytes.TrimSpace(obj[1:len(obj)-1])) > 0 {
		b.WriteByte(',')
	}
	b.Write(k)
	b.WriteByte(':')
	b.Write(value)
	b.WriteByte('}')
	return b.Bytes(), nil
}

func printLease(out io.Writer, d leaseHistory, info *messages.LeaseInfo) error {
	l := d.Lease
	created := timestamp(l.CreatedAt)
	if !l.CreatedAt.IsZero() {
		created += " (" + ageSeconds(l.AgeSeconds) + " ago)"
	}
	block := newTable(out)
	block.row("lease", l.LeaseUUID)
	block.row("tenant", l.Tenant)
	block.row("provider", l.ProviderUUID)
	block.row("status", l.Status)
	block.row("created", created)
	block.row("fail_count", strconv.Itoa(l.FailCount))
	block.row("budget", budget(l.TerminalBudget))
	block.row("items", itemsWithSKU(l.Items))
	block.row("reason", l.Reason)
	block.row("message", l.Message)
	block.row("retained_until", optionalTime(l.RetainedUntil))
	if err := block.flush(); err != nil {
		return err
	}

	heading := "events"
	if d.CompactedBeforeSeq > 0 {
		heading = fmt.Sprintf("events (journal compacted before seq %d)", d.CompactedBeforeSeq)
	}
	if err := section(out, heading, len(d.Events), func(t *table) {
		t.row("SEQ", "TIME", "TYPE", "SUMMARY")
		for _, e := range d.Events {
			// The read model's summaries may repeat the type the column already shows.
			t.row(strconv.FormatUint(e.Seq, 10), timestampMilli(e.At), e.Type, strings.TrimPrefix(e.Summary, e.Type+": "))
		}
	}); err != nil {
		return err
	}

	releases := "releases"
	if d.ReleasesError != "" {
		releases = "releases (unavailable: " + d.ReleasesError + ")"
	}
	if err := section(out, releases, len(d.Releases), func(t *table) {
		t.row("VERSION", "STATUS", "CREATED", "OPERATION", "REASON")
		for _, r := range d.Releases {
			t.row("v"+strconv.Itoa(r.Version), r.Status, timestamp(r.CreatedAt), releaseOperation(r), r.Reason)
		}
	}); err != nil {
		return err
	}

	if err := section(out, "callbacks", len(d.Callbacks), func(t *table) {
		t.row("CREATED", "KIND", "STATUS", "STATE", "ATTEMPTS", "LAST ERROR")
		for _, cb := range d.Callbacks {
			t.row(timestamp(cb.CreatedAt), cb.Kind, cb.Status, cb.State, strconv.Itoa(cb.Attempts), cb.LastError)
		}
	}); err != nil {
		return err
	}

	if err := section(out, "diagnostics", len(d.Diagnostics), func(t *table) {
		t.row("KIND", "INSTANCE", "AT", "SIZE", "STATE", "REASON")
		for _, dg := range d.Diagnostics {
			t.row(dg.Kind, dg.Service+"/"+strconv.Itoa(dg.Index), timestamp(dg.At), byteSize(int64(dg.Bytes)), dg.State, dg.Reason)
		}
	}); err != nil {
		return err
	}

	if err := printContainers(out, l, info); err != nil {
		return err
	}
	return printIngress(out, d)
}

func printContainers(out io.Writer, l messages.LeaseRow, info *messages.LeaseInfo) error {
	containers, source := leaseContainers(l, info)
	return section(out, "containers"+source, len(containers), func(t *table) {
		t.row("SERVICE", "INDEX", "CONTAINER", "STATUS", "PORTS")
		for _, ct := range containers {
			t.row(ct.service, strconv.Itoa(ct.index), shortID(ct.id), ct.status, portsSummary(ct.ports))
		}
	})
}

// section prints a blank line and a heading, then the table fill writes, or
// "<heading>: none" when there are no rows.
func section(out io.Writer, heading string, rows int, fill func(*table)) error {
	if rows == 0 {
		_, err := fmt.Fprintf(out, "\n%s: none\n", heading)
		return err
	}
	if _, err := fmt.Fprintf(out, "\n%s:\n", heading); err != nil {
		return err
	}
	t := newTable(out)
	fill(t)
	return t.flush()
}

// releaseOperation names what made a release: a maintenance (restart/update)
// or the operation (provision/restore) that deployed it.
func releaseOperation(r releaseRow) string {
	switch {
	case r.MaintenanceID != "":
		return "maintenance " + r.MaintenanceID
	case r.OperationID != "":
		return "operation " + r.OperationID
	}
	return ""
}

// itemsWithSKU is a lease's items as "app×2 docker-small, db×1 docker-large".
func itemsWithSKU(items []messages.DebugItem) string {
	parts := make([]string, 0, len(items))
	for _, it := range items {
		parts = append(parts, itemsSummary([]messages.DebugItem{it})+" "+it.SKU)
	}
	return strings.Join(parts, ", ")
}

type containerRow struct {
	service string
	index   int
	id      string
	status  string
	ports   map[string]messages.PortBinding
}

// leaseContainers is the lease's containers by service and index: from
// GET /info when the lease is ready, else the read model's instances (a failed
// or provisioning lease has none in /info); source says which, when not /info.
func leaseContainers(l messages.LeaseRow, info *messages.LeaseInfo) ([]containerRow, string) {
	var rows []containerRow
	source := ""
	if info != nil {
		for name, svc := range info.Services {
			for _, in := range svc.Instances {
				rows = append(rows, containerRow{service: name, index: in.InstanceIndex, id: in.ContainerID, status: in.Status, ports: in.Ports})
			}
		}
	} else {
		source = " (the read model's; GET /info answers only while ready)"
		if l.InstancesError != "" {
			source = " (unavailable: " + l.InstancesError + ")"
		}
		for _, svc := range l.Services {
			for _, in := range svc.Instances {
				rows = append(rows, containerRow{service: svc.Name, index: in.Index, id: in.ContainerID, status: in.State, ports: in.Ports})
			}
		}
	}
	slices.SortFunc(rows, func(a, b containerRow) int {
		return cmp.Or(cmp.Compare(a.service, b.service), cmp.Compare(a.index, b.index))
	})
	return rows, source
}
