package registry

import (
	"github.com/berth-dev/berth/actors/lease"
	"github.com/berth-dev/berth/messages"
)

// The registry's part of the operator's debug API: lease rows from its read
// model, and the ring of recent transitions.

func (a *Actor) transitions() *Transitions {
	if a.deps.Transitions == nil {
		a.deps.Transitions = NewTransitions(messages.TransitionsKept)
	}
	return a.deps.Transitions
}

// debugLeases builds the rows DebugLeases asks for: live leases (a stopped one
// as unknown), then retained ones no live lease shadows.
func (d *Directory) debugLeases(m *messages.DebugLeases) messages.DebugLeasesReply {
	var out messages.DebugLeasesReply
	keep := func(r messages.LeaseRow) {
		if m.Status != "" && r.Status != m.Status && r.LeaseStatus != m.Status {
			return
		}
		if m.Tenant != "" && r.Tenant != m.Tenant {
			return
		}
		out.Rows = append(out.Rows, r)
	}
	for id := range d.entries {
		e, ok := d.live(id)
		if !ok || m.Lease != "" && id != m.Lease {
			continue
		}
		spec := d.St.Leases[id]
		row := leaseRow(d.view(id, e), spec)
		row.LeaseStatus = string(lease.Reserved)
		if e.report.Admission == spec.Admission {
			row.LeaseStatus = e.report.Status
		}
		switch {
		case e.status == Stopped:
			row.LeaseStatus = messages.StatusUnknown
		case e.pid != nil:
			row.Actor = e.pid.Id
		}
		keep(row)
	}
	for id, r := range d.St.Retentions {
		if m.Lease != "" && id != m.Lease {
			continue
		}
		if _, ok := d.live(id); ok {
			continue
		}
		row := leaseRow(retainedView(r), nil)
		row.LeaseStatus = messages.StatusRetained
		row.Message = "retention record " + r.Status
		keep(row)
	}
	return out
}

// leaseRow is a lease's read model as a debug row; services carry the spec's
// names only (the lease actor adds its instances).
func leaseRow(info messages.ProvisionInfo, spec *lease.Spec) messages.LeaseRow {
	row := messages.LeaseRow{
		LeaseUUID: info.LeaseUUID, Tenant: info.Tenant, ProviderUUID: info.ProviderUUID, Status: info.Status,
		CreatedAt: info.CreatedAt, FailCount: info.FailCount, Reason: info.Reason, Message: info.Message,
		TerminalBudget: messages.TerminalBudget{Verdict: "retry"},
		Items:          make([]messages.DebugItem, 0, len(info.Items)),
		Services:       []messages.DebugService{},
	}
	if info.TerminalBudget != nil {
		row.TerminalBudget = *info.TerminalBudget
	}
	for _, it := range info.Items {
		row.Items = append(row.Items, messages.DebugItem{SKU: it.SKU, Quantity: it.Quantity, ServiceName: it.ServiceName})
	}
	if !info.RetainedUntil.IsZero() {
		until := info.RetainedUntil
		row.RetainedUntil = &until
	}
	if spec != nil {
		for _, svc := range spec.Services {
			row.Services = append(row.Services, messages.DebugService{Name: svc.Name, Instances: []messages.DebugInstance{}})
		}
	}
	return row
}
