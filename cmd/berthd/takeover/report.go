package takeover

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/berth-dev/berth/messages"
)

// ReadyLine is the preflight's last line when nothing is refused — exactly the
// seed's, so an operator's runbook can test for it.
const ReadyLine = "ready_for_v0_13_storage_identity_adoption"

// Print writes the report for an operator: one line per lease (verdict, status,
// items, reasons), then the host's refusals and the notes, then ReadyLine when
// nothing is refused.
func (r *Report) Print(w io.Writer) {
	refused := 0
	for _, l := range r.Leases {
		verdict := "adopt"
		switch {
		case len(l.Refusals) > 0:
			verdict, refused = "refuse", refused+1
		case len(l.Warnings) > 0:
			verdict = "adopt-with-warning"
		}
		line := fmt.Sprintf("lease %s  %-18s %s", l.Lease, verdict, l.Status)
		if l.FailCount > 0 {
			line += fmt.Sprintf(" fail_count=%d", l.FailCount)
		}
		if len(l.Items) > 0 {
			line += "  items " + describeItems(l.Items)
		}
		fmt.Fprintln(w, line)
		for _, f := range l.Refusals {
			fmt.Fprintf(w, "    refused  %s: %s\n", f.Code, f.Detail)
		}
		for _, f := range l.Warnings {
			fmt.Fprintf(w, "    warning  %s: %s\n", f.Code, f.Detail)
		}
	}
	for _, f := range r.Host {
		fmt.Fprintf(w, "host refused  %s: %s\n", f.Code, f.Detail)
	}
	for _, f := range r.Notes {
		fmt.Fprintf(w, "note  %s: %s\n", f.Code, f.Detail)
	}
	fmt.Fprintf(w, "fred v0.13 backend %q: %d leases, %d refused, %d host refusals\n", r.Backend, len(r.Leases), refused, len(r.Host))
	if r.Ready() {
		fmt.Fprintln(w, ReadyLine)
	}
}

// PrintJSON writes the report as one indented JSON object, then ReadyLine
// when nothing is refused.
func (r *Report) PrintJSON(w io.Writer) {
	out, _ := json.MarshalIndent(struct {
		*Report
		Ready bool `json:"ready"`
	}{r, r.Ready()}, "", "  ")
	fmt.Fprintln(w, string(out))
	if r.Ready() {
		fmt.Fprintln(w, ReadyLine)
	}
}

// describeItems is "web: 2× docker-micro, cache: 1× docker-micro" — derived from
// the containers: compare it with the chain (fred kept no desired quantity).
func describeItems(items []messages.LeaseItem) string {
	var parts []string
	for _, it := range items {
		parts = append(parts, fmt.Sprintf("%s: %d× %s", it.ServiceName, it.Quantity, it.SKU))
	}
	return strings.Join(parts, ", ")
}
