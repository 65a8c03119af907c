package registry

// The registry's reads: pure functions of the directory (and, for a lease no
// actor runs any more, its stored failure capture), or forwarded to the lease's
// actor. None changes anything.

import (
	"fmt"
	"sort"

	"github.com/berth-dev/berth/actors/lease"
	"github.com/berth-dev/berth/messages"
)

// read answers msg when it is a read (false: it is not one).
func (a *Actor) read(msg any) bool {
	d := a.dir
	switch m := msg.(type) {
	case *messages.GetProvision:
		m.Reply <- a.getProvision(m.Lease)
	case *messages.ListProvisions:
		m.Reply <- d.list(m)
	case *messages.DebugLeases:
		m.Reply <- d.debugLeases(m)
	case *messages.DebugTransitions:
		m.Reply <- a.transitions().Since(m.Since, m.Limit)
	case *messages.GetStats:
		m.Reply <- d.stats()
	case *messages.GetHealth:
		m.Reply <- a.health()
	case *messages.ListLeases:
		m.Reply <- messages.LeasesReply{Leases: d.St.Sorted()}
	case *messages.GetImagePins:
		m.Reply <- d.imagePins()
	case *messages.ListRetentions:
		m.Reply <- d.listRetentions(m)
	case *messages.GetReleases:
		a.forward(m.Lease, m, func(err error) { m.Reply <- messages.ReleasesReply{Err: err} })
	case *messages.GetInfo:
		a.forward(m.Lease, m, func(err error) { m.Reply <- messages.InfoReply{Err: err} })
	case *messages.GetLogs:
		if _, ok := d.live(m.Lease); ok {
			a.forward(m.Lease, m, func(err error) { m.Reply <- messages.LogsReply{Err: err} })
		} else {
			m.Reply <- a.storedLogs(m.Lease)
		}
	case *messages.Deliver:
		a.forward(m.Lease, m.Msg, func(error) {
			if m.Dropped != nil {
				m.Dropped()
			}
		})
	default:
		return false
	}
	return true
}

// storedLogs are a closed or unknown lease's logs from its stored failure capture.
func (a *Actor) storedLogs(id string) messages.LogsReply {
	capt, err := lease.LatestCapture(a.deps.Diag, id)
	if err != nil || capt == nil {
		return messages.LogsReply{Err: messages.Refuse(messages.ErrNotFound, "lease not found")}
	}
	logs := map[string]string{}
	for _, cc := range capt.Containers {
		logs[fmt.Sprintf("%s/%d", cc.Service, cc.Index)] = cc.Logs
	}
	return messages.LogsReply{Logs: logs}
}

func (a *Actor) getProvision(id string) messages.ProvisionReply {
	if e, ok := a.dir.live(id); ok {
		info := a.dir.view(id, e)
		return messages.ProvisionReply{Info: &info}
	}
	if r := a.dir.St.Retentions[id]; r != nil {
		info := retainedView(r)
		return messages.ProvisionReply{Info: &info}
	}
	capt, err := lease.LatestCapture(a.deps.Diag, id)
	if err != nil || capt == nil {
		return messages.ProvisionReply{Err: messages.Refuse(messages.ErrNotFound, "lease not found")}
	}
	// The diagnostics fallback: the stored failure, without a terminal budget.
	return messages.ProvisionReply{Info: &messages.ProvisionInfo{
		LeaseUUID: id, ProviderUUID: capt.ProviderUUID, Status: messages.StatusFailed, CreatedAt: capt.At, FailCount: capt.FailCount,
		Reason: capt.Reason, Message: capt.Message, LifecycleGeneration: capt.Generation,
	}}
}

// view is a live lease's record as last reported on its admission, or what the
// spec alone says.
func (d *Directory) view(id string, e *entry) messages.ProvisionInfo {
	spec := d.St.Leases[id]
	var info messages.ProvisionInfo
	if e.report.Admission == spec.Admission {
		info = e.report.Info
	} else {
		info = messages.ProvisionInfo{LeaseUUID: spec.Lease, ProviderUUID: spec.ProviderUUID,
			Status: messages.StatusProvisioning, CreatedAt: spec.AdmittedAt, Tenant: spec.Tenant,
			Quantity: spec.Instances(), Items: spec.Items, ServiceImages: spec.ServiceImages(),
			FailCount: e.report.Info.FailCount, TerminalBudget: e.report.Info.TerminalBudget}
		if info.TerminalBudget == nil {
			info.TerminalBudget = &messages.TerminalBudget{Verdict: "retry"}
		}
	}
	if e.status == Stopped {
		info.Status = messages.StatusUnknown
	}
	return info
}

func (d *Directory) list(m *messages.ListProvisions) messages.ProvisionsReply {
	out := messages.ProvisionsReply{Provisions: []messages.ProvisionInfo{}}
	if len(m.Leases) > 0 {
		for _, id := range m.Leases {
			if e, ok := d.live(id); ok {
				out.Provisions = append(out.Provisions, d.view(id, e))
			}
		}
		return out
	}
	ids := make([]string, 0, len(d.entries))
	for id := range d.entries {
		if _, ok := d.live(id); ok && id > m.Continue {
			ids = append(ids, id)
		}
	}
	ids, out.Continue = page(ids, m.Limit)
	for _, id := range ids {
		out.Provisions = append(out.Provisions, d.view(id, d.entries[id]))
	}
	return out
}

// page sorts ids and keeps the first limit (0: all), with the continue token.
func page(ids []string, limit int) ([]string, string) {
	sort.Strings(ids)
	if limit > 0 && len(ids) > limit {
		return ids[:limit], ids[limit-1]
	}
	return ids, ""
}

// stats renders the pool for GET /stats; until recovery has joined journals
// with Docker the ledger is not whole, and stats are refused.
func (d *Directory) stats() messages.StatsReply {
	if !d.Ready {
		return messages.StatsReply{Err: messages.Refuse(messages.ErrUnavailable, "accounting is being recovered")}
	}
	running := 0
	for _, e := range d.entries {
		if e.status != Closed {
			running += e.report.Running
		}
	}
	stats := d.Pool.Stats(running)
	stats.RetainedDiskMB = d.retainedMB()
	var held Resources
	for _, id := range d.lingeringLeases() {
		held = held.add(d.Pool.byLease[lingeringKey(id)].use)
	}
	stats.LingeringCPUCores, stats.LingeringMemoryMB, stats.LingeringDiskMB = float64(held.CPUMilli)/1000, held.MemoryMB, held.DiskMB
	stats.DiskQuotaEnforced = d.set.QuotaEnforced
	return messages.StatsReply{Stats: stats}
}
