package registry

// Retention records — a closed lease's retained data — are the registry's, in its
// own stream: a retaining close creates one in the same event that releases the
// lease (lease.closed), a restore claims one in the same event that admits the
// destination (lease.admitted), so neither can be half done. The pool counts an
// active or reaping record's disk until its volumes are gone. The reaper destroys
// volumes only on the registry's exact decisions (retention.reaping); nothing is
// ever destroyed because of what it is called.

import (
	"encoding/base64"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"time"

	"github.com/rs/zerolog"

	"github.com/berth-dev/berth/actors/lease"
	"github.com/berth-dev/berth/messages"
	"github.com/berth-dev/berth/messages/manifest"
	"github.com/berth-dev/berth/persistence"
)

// durableFootprint is the disk a lease's stateful instances hold.
func durableFootprint(spec *lease.Spec) int64 {
	var n int64
	for _, a := range spec.Allocations() {
		n += a.Profile.DiskMB
	}
	return n
}

// retainedMB is every active or reaping record's footprint.
func (d *Directory) retainedMB() (n int64) {
	for _, r := range d.St.Retentions {
		if r.Status != RetentionRestoring {
			n += r.Record.DiskMB()
		}
	}
	return n
}

// retainDecision is the registry's answer for a close: retain the lease's durable
// volumes when retain_on_close is set, the lease has any, and the per-provider cap
// (max_retained_disk_mb) has room — else they are destroyed.
func (d *Directory) retainDecision(spec *lease.Spec) (bool, []Effect) {
	footprint := durableFootprint(spec)
	if !d.set.RetainOnClose || footprint == 0 {
		return false, nil
	}
	held := d.retainedMB() + footprint // and the closes deciding to retain now
	for _, f := range d.Retaining {
		held += f
	}
	if limit := d.set.MaxRetainedDiskMB; limit > 0 && held > limit {
		return false, []Effect{Log{spec.Lease, zerolog.WarnLevel, fmt.Sprintf("retained-disk cap reached (max_retained_disk_mb %d, "+
			"footprint %d MB): this lease's data is destroyed at close instead of retained", limit, footprint)}}
	}
	return true, nil
}

// closedEvents is lease.closed for m plus, for a new record, the evictions the
// per-tenant cap makes (the tenant's oldest active records beyond the cap); the
// reaper is asked for a pass when any was evicted.
func (d *Directory) closedEvents(m messages.LeaseClosed, now time.Time) Decision {
	out := Decision{Events: []persistence.Event{ClosedEvent(m, now)}}
	limit := d.set.MaxRetainedPerTenant
	if m.Retention == nil || limit <= 0 {
		return out
	}
	var mine []*Retention
	for id, r := range d.St.Retentions {
		if r.Status == RetentionActive && r.Record.Tenant == m.Retention.Tenant && id != m.Lease {
			mine = append(mine, r)
		}
	}
	sort.Slice(mine, func(i, j int) bool {
		if !mine[i].Record.RetainedAt.Equal(mine[j].Record.RetainedAt) {
			return mine[i].Record.RetainedAt.Before(mine[j].Record.RetainedAt)
		}
		return mine[i].Record.Lease < mine[j].Record.Lease
	})
	for ; len(mine)+1 > limit && len(mine) > 0; mine = mine[1:] {
		out.Events = append(out.Events, retentionEv(EvRetentionReaping, mine[0].Record.Lease, "evicted", now))
		out.Effects = append(out.Effects, Log{mine[0].Record.Lease, zerolog.InfoLevel, "per-tenant retention cap: oldest retained lease evicted"})
	}
	if len(out.Events) > 1 {
		out.Effects = append(out.Effects, Tell{d.set.ReaperPath, messages.ReapNow{}})
	}
	return out
}

// settleRestore settles a restore from its destination's report: Ready commits
// it (the record is consumed), a failed attempt — its volumes already handed
// back — releases the record.
func (d *Directory) settleRestore(m messages.LeaseReport, spec *lease.Spec, now time.Time) Decision {
	if spec == nil || spec.Restore == nil || spec.Admission != m.Admission {
		return Decision{}
	}
	rec := d.St.Retentions[spec.Restore.From]
	if rec == nil || rec.Status != RetentionRestoring || rec.Dest != m.Lease {
		return Decision{}
	}
	typ := EvRetentionConsumed
	switch m.Status {
	case string(lease.Ready):
	case string(lease.Failed):
		typ = EvRetentionReleased
	default:
		return Decision{}
	}
	return Decision{Events: []persistence.Event{retentionEv(typ, spec.Restore.From, "", now)},
		Effects: []Effect{Log{m.Lease, zerolog.InfoLevel, "restore settled: " + typ + " of " + spec.Restore.From}}}
}

// restore admits a restore: validate, claim the source record and admit the
// destination in one journaled event, then spawn the destination, which adopts
// the retained volumes and redeploys the retained manifest on its exact images.
func (d *Directory) restore(m *messages.Restore, env Env) Decision {
	if !d.Ready {
		return answer(m.Reply, errRecovering)
	}
	spec, err := d.set.prepareRestore(m.Req, d.St.Retentions[m.Req.FromLeaseUUID], env.Now)
	if errors.Is(err, messages.ErrDemoteExceedsTier) {
		return Decision{Effects: []Effect{DemoteRefused{}, Answer{m.Reply, err}}}
	}
	if err != nil {
		return answer(m.Reply, err)
	}
	if d.St.Leases[spec.Lease] != nil {
		return answer(m.Reply, messages.Refuse(messages.ErrAlreadyProvisioned, "lease already provisioned"))
	}
	if err := d.fenced(spec.Lease, env); err != nil {
		return answer(m.Reply, err)
	}
	if err := d.domainClaimed(spec, env.Queued); err != nil {
		return answer(m.Reply, err)
	}
	if err := d.Pool.Check(spec.Lease, spec.Tenant, Need(spec), retainedKey(spec.Restore.From)); err != nil {
		return answer(m.Reply, err)
	}
	spec.Admission = d.St.Admissions + 1 + uint64(len(env.Queued))
	return Decision{Events: []persistence.Event{AdmittedEvent(spec, env.Now)},
		Effects: []Effect{Spawn{Spec: spec}, Log{spec.Lease, zerolog.InfoLevel, fmt.Sprintf("restore admitted from %s (admission %d)",
			spec.Restore.From, spec.Admission)}, Answer{m.Reply, nil}},
		Failed: []Effect{Answer{m.Reply, errStoreUnavailable}}}
}

// prepareRestore validates a restore request against its source record and builds
// the destination's frozen spec. Pure: nothing is reserved or written.
func (s *Settings) prepareRestore(req messages.RestoreRequest, rec *Retention, now time.Time) (*lease.Spec, error) {
	if !messages.ValidLeaseID(req.LeaseUUID) || !messages.ValidLeaseID(req.FromLeaseUUID) {
		return nil, messages.Refuse(messages.ErrBadRequest, "lease_uuid and from_lease_uuid must be canonical UUIDs")
	}
	if req.LeaseUUID == req.FromLeaseUUID {
		return nil, messages.Refuse(messages.ErrBadRequest, "a lease cannot be restored into itself")
	}
	if _, err := s.checkCommonFields(req.Tenant, req.ProviderUUID, len(req.Items), req.CallbackURL, req.LifecycleCallbackURL); err != nil {
		return nil, err
	}
	// Nothing retained that this tenant may claim: a bare 422, whatever the reason
	// (never retained, another tenant's, reaped, past its grace).
	if rec == nil || rec.Record.Tenant != req.Tenant || rec.Status == RetentionReaping ||
		(!rec.Record.RetainedUntil.IsZero() && now.After(rec.Record.RetainedUntil)) {
		return nil, messages.Refuse(messages.ErrNotRetained, "nothing retained")
	}
	if rec.Status != RetentionActive {
		return nil, messages.Refuse(messages.ErrInvalidState, "the retained data is being restored")
	}
	items, err := manifest.NormalizeItems(req.Items)
	if err != nil {
		return nil, err
	}
	if !sameShape(items, rec.Record.Items) {
		return nil, messages.Refuse(messages.ErrInvalidManifest, "a restore keeps the retained lease's service names and quantities")
	}
	// The retained manifest is provisioned again under the provision rules.
	spec, err := s.prepare(messages.ProvisionRequest{LeaseUUID: req.LeaseUUID, Tenant: req.Tenant, ProviderUUID: req.ProviderUUID,
		Items: req.Items, CallbackURL: req.CallbackURL, LifecycleCallbackURL: req.LifecycleCallbackURL,
		Payload: base64.StdEncoding.EncodeToString(rec.Record.Manifest)}, now)
	if err != nil {
		return nil, err
	}
	spec.Restore = &lease.RestoreFrom{From: req.FromLeaseUUID, FredLayout: rec.Record.FredLayout}
	profiles := map[string]lease.Profile{}
	for _, svc := range spec.Services {
		profiles[svc.Name] = svc.Profile
	}
	// Promote freely (the pool decides); demote only when the measured data fits.
	for _, v := range rec.Record.Volumes {
		p := profiles[v.Service]
		if p.DiskMB == 0 {
			return nil, messages.Refuse(messages.ErrDemoteExceedsTier, "durable data cannot be restored into a diskless tier")
		}
		if v.UsedBytes > p.DiskMB<<20 {
			return nil, messages.Refuse(messages.ErrDemoteExceedsTier, "the retained data of %s does not fit the requested tier", v.Service)
		}
		spec.Restore.Volumes = append(spec.Restore.Volumes, lease.RestoreVolume{Service: v.Service, Index: v.Index,
			Retained: v.Name, SourceQuotaMB: v.QuotaMB})
	}
	for _, pin := range rec.Record.Images {
		spec.Images = append(spec.Images, lease.ServiceImage{Service: pin.Service, ImagePin: pin.ImagePin})
	}
	return spec, nil
}

// sameShape reports whether two normalized item lists have the same services and
// quantities (SKUs may differ: a restore may change tier).
func sameShape(a, b []messages.LeaseItem) bool {
	count := map[string]int{}
	for _, it := range a {
		count[it.ServiceName] += it.Quantity
	}
	for _, it := range b {
		count[it.ServiceName] -= it.Quantity
	}
	for _, n := range count {
		if n != 0 {
			return false
		}
	}
	return true
}

// sweep answers the reaper: expired active records become reaping first
// (journaled, their bytes still counted), restoring records whose destination is
// gone are released; the actor then answers with the lists (sweepReply).
func (d *Directory) sweep(now time.Time) Decision {
	var out Decision
	for id, r := range d.St.Retentions {
		switch {
		case r.Status == RetentionActive && !r.Record.RetainedUntil.IsZero() && now.After(r.Record.RetainedUntil):
			out.Events = append(out.Events, retentionEv(EvRetentionReaping, id, "expired", now))
		case r.Status == RetentionRestoring && d.St.Leases[r.Dest] == nil:
			// The destination closed or was never admitted: nothing claims the data.
			out.Events = append(out.Events, retentionEv(EvRetentionReleased, id, "", now))
		}
	}
	sort.Slice(out.Events, func(i, j int) bool { return string(out.Events[i].Data) < string(out.Events[j].Data) })
	return out
}

// sweepReply is what a sweep tells the reaper: the records to reap, the active
// ones, and the volume names live leases hold.
func (d *Directory) sweepReply() messages.RetentionSweepReply {
	var rep messages.RetentionSweepReply
	for _, id := range slices.Sorted(maps.Keys(d.St.Retentions)) {
		r := d.St.Retentions[id]
		switch r.Status {
		case RetentionReaping:
			rep.Reaping = append(rep.Reaping, r.Record)
		case RetentionActive:
			rep.Active = append(rep.Active, r.Record)
		}
		// A restoring record's volumes wear the destination's names (in Live).
	}
	for _, spec := range d.St.Leases {
		for _, svc := range spec.Services {
			for i := range svc.Quantity {
				rep.Live = append(rep.Live, messages.VolumeName(spec.Lease, svc.Name, i))
				if svc.Profile.DiskMB <= 0 {
					// A diskless instance's seeded writable paths (a fred v0.13
					// one adopted keeps them under the canonical name above).
					rep.Live = append(rep.Live, messages.ScratchVolumeName(spec.Lease, svc.Name, i))
				}
			}
		}
	}
	sort.Strings(rep.Live)
	return rep
}

// retentionGone deletes a record in status want: a reaping one whose volumes are
// all destroyed, an active one whose volumes vanished out of band.
func (d *Directory) retentionGone(id, want, typ string, now time.Time) Decision {
	if r := d.St.Retentions[id]; r == nil || r.Status != want {
		return Decision{}
	}
	reason, level, msg := "", zerolog.InfoLevel, "retained data destroyed; its record is deleted"
	if typ == EvRetentionPruned {
		reason, level, msg = "orphan", zerolog.WarnLevel, "retention record pruned: its volumes vanished out of band"
	}
	return Decision{Events: []persistence.Event{retentionEv(typ, id, reason, now)}, Effects: []Effect{Log{id, level, msg}}}
}

// listRetentions pages the records by lease UUID.
func (d *Directory) listRetentions(m *messages.ListRetentions) messages.RetentionsReply {
	out := messages.RetentionsReply{Retentions: []messages.Retention{}}
	var ids []string
	for id := range d.St.Retentions {
		if id > m.Continue {
			ids = append(ids, id)
		}
	}
	ids, out.Continue = page(ids, m.Limit)
	for _, id := range ids {
		r := d.St.Retentions[id]
		out.Retentions = append(out.Retentions, messages.Retention{LeaseUUID: id, Tenant: r.Record.Tenant,
			ProviderUUID: r.Record.ProviderUUID, Status: r.Status, RetainedAt: r.Record.RetainedAt,
			RetainedUntil: r.Record.RetainedUntil, DiskMB: r.Record.DiskMB(), UsedBytes: r.Record.UsedBytes()})
	}
	return out
}

// retainedView is GET /provisions/{lease} of a retained record.
func retainedView(r *Retention) messages.ProvisionInfo {
	q := 0
	for _, it := range r.Record.Items {
		q += it.Quantity
	}
	return messages.ProvisionInfo{LeaseUUID: r.Record.Lease, ProviderUUID: r.Record.ProviderUUID,
		Status: messages.StatusRetained, CreatedAt: r.Record.RetainedAt, RetainedUntil: r.Record.RetainedUntil,
		Tenant: r.Record.Tenant, Quantity: q, Items: r.Record.Items}
}
