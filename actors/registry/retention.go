package registry

// Retention records — a closed lease's retained data — are the registry's, in its
// own stream: a retaining close creates one in the same event that releases the
// lease (lease.closed), a restore claims one in the same event that admits the
// destination (lease.admitted), so neither can be half done. The pool counts an
// active or reaping record's disk until its volumes are gone. The reaper destroys
// volumes only on the registry's exact decisions (retention.reaping); nothing is
// ever destroyed because of what it is called.

import (
	"sort"
	"strings"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/berth-dev/berth/actors/lease"
	"github.com/berth-dev/berth/dockerio"
	"github.com/berth-dev/berth/messages"
	"github.com/berth-dev/berth/messages/callback"
	"github.com/berth-dev/berth/messages/manifest"
	"github.com/berth-dev/berth/persistence"
)

// retainedKey is a record's entry in the pool (disk only, no tenant quota).
func retainedKey(leaseID string) string { return "retained:" + leaseID }

// countRetained puts an active or reaping record's footprint in the pool.
func (a *Actor) countRetained(id string, r *Retention) {
	if r.Status == RetentionRestoring {
		a.pool.Release(retainedKey(id)) // the destination lease's reservation counts it
		return
	}
	a.pool.Set(retainedKey(id), "", Resources{DiskMB: r.Record.DiskMB()})
}

// durableFootprint is the disk a lease's stateful instances hold.
func durableFootprint(spec *lease.Spec) int64 {
	var n int64
	for _, a := range spec.Allocations() {
		n += a.Profile.DiskMB
	}
	return n
}

// retainedDiskMB is every record's footprint plus closes deciding to retain now.
func (a *Actor) retainedDiskMB() int64 {
	var n int64
	for _, r := range a.st.Retentions {
		if r.Status != RetentionRestoring {
			n += r.Record.DiskMB()
		}
	}
	for _, f := range a.retaining {
		n += f
	}
	return n
}

// retainDecision is the registry's answer for a close: retain the lease's durable
// volumes when retain_on_close is set, the lease has any, and the per-provider cap
// (max_retained_disk_mb) has room — else they are destroyed.
func (a *Actor) retainDecision(spec *lease.Spec) bool {
	footprint := durableFootprint(spec)
	if !a.set.RetainOnClose || footprint == 0 {
		return false
	}
	if limit := a.set.MaxRetainedDiskMB; limit > 0 && a.retainedDiskMB()+footprint > limit {
		a.log.Warn().Str("lease_uuid", spec.Lease).Int64("footprint_mb", footprint).Int64("max_retained_disk_mb", limit).
			Msg("retained-disk cap reached: this lease's data is destroyed at close instead of retained")
		return false
	}
	return true
}

// closedEvents is lease.closed for m plus, for a new record, the evictions the
// per-tenant cap makes (the tenant's oldest active records beyond the cap).
func (a *Actor) closedEvents(m messages.LeaseClosed, now time.Time) ([]persistence.Event, bool) {
	evs := []persistence.Event{closedEvent(m, now)}
	limit := a.set.MaxRetainedPerTenant
	if m.Retention == nil || limit <= 0 {
		return evs, false
	}
	var mine []*Retention
	for id, r := range a.st.Retentions {
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
	evicted := false
	for len(mine)+1 > limit && len(mine) > 0 {
		evs = append(evs, retentionEv(EvRetentionReaping, mine[0].Record.Lease, "evicted", now))
		a.log.Info().Str("lease_uuid", mine[0].Record.Lease).Str("tenant", m.Retention.Tenant).
			Msg("per-tenant retention cap: oldest retained lease evicted")
		mine, evicted = mine[1:], true
	}
	return evs, evicted
}

// afterCommitRetentions brings the pool in line with the records after a commit.
func (a *Actor) afterCommitRetentions(touched ...string) {
	for _, id := range touched {
		if r := a.st.Retentions[id]; r != nil {
			a.countRetained(id, r)
		} else {
			a.pool.Release(retainedKey(id))
		}
	}
}

// restoreReport settles a restore from its destination's report: Ready commits it
// (the record is consumed), a failed attempt — its volumes already handed back —
// releases the record.
func (a *Actor) restoreReport(m messages.LeaseReport) {
	spec := a.st.Leases[m.Lease]
	if spec == nil || spec.Restore == nil || spec.Admission != m.Admission {
		return
	}
	rec := a.st.Retentions[spec.Restore.From]
	if rec == nil || rec.Status != RetentionRestoring || rec.Dest != m.Lease {
		return
	}
	var typ string
	switch m.Status {
	case string(lease.Ready):
		typ = EvRetentionConsumed
	case string(lease.Failed):
		typ = EvRetentionReleased
	default:
		return
	}
	if err := a.commit([]persistence.Event{retentionEv(typ, spec.Restore.From, "", a.deps.Now())}); err != nil {
		return
	}
	a.afterCommitRetentions(spec.Restore.From)
	a.log.Info().Str("lease_uuid", m.Lease).Str("from", spec.Restore.From).Str("event", typ).Msg("restore settled")
}

// restore admits a restore: validate, claim the source record and admit the
// destination in one journaled event, then spawn the destination, which adopts
// the retained volumes and redeploys the retained manifest on its exact images.
func (a *Actor) restore(c actor.Context, req messages.RestoreRequest) error {
	if !a.ready {
		return messages.Refuse(messages.ErrUnavailable, "recovering state, retry shortly")
	}
	now := a.deps.Now()
	spec, err := a.set.prepareRestore(req, a.st.Retentions[req.FromLeaseUUID], now)
	if err != nil {
		return err
	}
	if e := a.leases[spec.Lease]; e != nil && !e.closed {
		return messages.Refuse(messages.ErrAlreadyProvisioned, "lease already provisioned")
	}
	need := Need(spec)
	if err := a.pool.CheckFreeing(spec.Lease, spec.Tenant, need, retainedKey(spec.Restore.From)); err != nil {
		return err
	}
	spec.Admission = a.st.Admissions + 1
	if err := a.commit([]persistence.Event{admittedEvent(spec, now)}); err != nil {
		return messages.Refuse(messages.ErrUnavailable, "state store unavailable")
	}
	a.afterCommitRetentions(spec.Restore.From)
	a.pool.Set(spec.Lease, spec.Tenant, need)
	a.spawn(c, spec)
	a.log.Info().Str("lease_uuid", spec.Lease).Str("from", spec.Restore.From).Uint64("admission", spec.Admission).Msg("restore admitted")
	return nil
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
	lifecycle, err := s.checkCommonFields(req.Tenant, req.ProviderUUID, len(req.Items), req.CallbackURL, req.LifecycleCallbackURL)
	if err != nil {
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
	built, err := manifest.Build(rec.Record.Manifest, items, manifest.Options{AllowedRegistries: s.AllowedRegistries})
	if err != nil {
		return nil, err
	}
	spec := &lease.Spec{Lease: req.LeaseUUID, Tenant: req.Tenant, ProviderUUID: req.ProviderUUID, Items: built.Items,
		Flat: built.Flat, Manifest: rec.Record.Manifest, CallbackURL: req.CallbackURL, LifecycleURL: lifecycle,
		OperationID: callback.OperationID(req.CallbackURL), AdmittedAt: now.UTC(),
		Restore: &lease.RestoreFrom{From: req.FromLeaseUUID}}
	for _, it := range built.Items {
		prof, ok := s.resolveSKU(it.SKU)
		if !ok {
			return nil, messages.Refuse(messages.ErrUnknownSKU, "unknown sku %q", excerpt(it.SKU))
		}
		spec.Services = append(spec.Services, lease.ServiceSpec{Name: it.ServiceName, SKU: it.SKU,
			Quantity: it.Quantity, Profile: prof, Manifest: built.Services[it.ServiceName]})
	}
	sort.Slice(spec.Services, func(i, j int) bool { return spec.Services[i].Name < spec.Services[j].Name })
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
	count := func(items []messages.LeaseItem) map[string]int {
		m := map[string]int{}
		for _, it := range items {
			m[it.ServiceName] += it.Quantity
		}
		return m
	}
	ca, cb := count(a), count(b)
	if len(ca) != len(cb) {
		return false
	}
	for k, v := range ca {
		if cb[k] != v {
			return false
		}
	}
	return true
}

// sweep answers the reaper: expired active records become reaping first (journaled,
// their bytes still counted), restoring records whose destination is gone are
// released, then the lists the pass needs.
func (a *Actor) sweep(m *messages.RetentionSweep) messages.RetentionSweepReply {
	var evs []persistence.Event
	var touched []string
	for id, r := range a.st.Retentions {
		switch {
		case r.Status == RetentionActive && !r.Record.RetainedUntil.IsZero() && m.Now.After(r.Record.RetainedUntil):
			evs = append(evs, retentionEv(EvRetentionReaping, id, "expired", m.Now))
			touched = append(touched, id)
		case r.Status == RetentionRestoring && a.st.Leases[r.Dest] == nil:
			// The destination closed or was never admitted: nothing claims the data.
			evs = append(evs, retentionEv(EvRetentionReleased, id, "", m.Now))
			touched = append(touched, id)
		}
	}
	sort.Slice(evs, func(i, j int) bool { return string(evs[i].Data) < string(evs[j].Data) })
	if len(evs) > 0 {
		if err := a.commit(evs); err != nil {
			return messages.RetentionSweepReply{}
		}
		a.afterCommitRetentions(touched...)
	}
	var rep messages.RetentionSweepReply
	for _, id := range sortedRetentions(a.st.Retentions) {
		r := a.st.Retentions[id]
		switch r.Status {
		case RetentionReaping:
			rep.Reaping = append(rep.Reaping, r.Record)
		case RetentionActive:
			rep.Active = append(rep.Active, r.Record)
		}
		// A restoring record's volumes wear the destination's names (in Live).
	}
	for _, spec := range a.st.Leases {
		for _, svc := range spec.Services {
			if svc.Profile.DiskMB > 0 {
				for i := 0; i < svc.Quantity; i++ {
					rep.Live = append(rep.Live, dockerio.VolumeName(spec.Lease, svc.Name, i))
				}
			}
		}
	}
	sort.Strings(rep.Live)
	return rep
}

// reaped deletes a reaping record whose volumes are all gone.
func (a *Actor) reaped(m *messages.RetentionReaped) {
	if r := a.st.Retentions[m.Lease]; r == nil || r.Status != RetentionReaping {
		return
	}
	if err := a.commit([]persistence.Event{retentionEv(EvRetentionDeleted, m.Lease, "", a.deps.Now())}); err != nil {
		return
	}
	a.afterCommitRetentions(m.Lease)
	a.log.Info().Str("lease_uuid", m.Lease).Msg("retained data destroyed; its record is deleted")
}

// orphaned prunes an active record whose volumes vanished out of band.
func (a *Actor) orphaned(m *messages.RetentionOrphaned) {
	if r := a.st.Retentions[m.Lease]; r == nil || r.Status != RetentionActive {
		return
	}
	if err := a.commit([]persistence.Event{retentionEv(EvRetentionPruned, m.Lease, "orphan", a.deps.Now())}); err != nil {
		return
	}
	a.afterCommitRetentions(m.Lease)
	a.log.Warn().Str("lease_uuid", m.Lease).Msg("retention record pruned: its volumes vanished out of band")
}

// holdDone routes a finished held deletion to its owner.
func (a *Actor) holdDone(c actor.Context, m *messages.HoldDone) {
	kind, id, _ := strings.Cut(m.Owner, ":")
	switch kind {
	case "lease":
		if e := a.leases[id]; e != nil && e.pid != nil && !e.closed {
			c.Send(e.pid, &messages.VolumeHoldDone{Name: m.Name})
		}
	case "retention":
		a.deps.Tree.Send(a.set.ReaperPath, messages.ReapNow{})
	}
}

// listRetentions pages the records by lease UUID.
func (a *Actor) listRetentions(m *messages.ListRetentions) messages.RetentionsReply {
	out := messages.RetentionsReply{Retentions: []messages.Retention{}}
	var ids []string
	for _, id := range sortedRetentions(a.st.Retentions) {
		if id > m.Continue {
			ids = append(ids, id)
		}
	}
	if m.Limit > 0 && len(ids) > m.Limit {
		ids = ids[:m.Limit]
		out.Continue = ids[len(ids)-1]
	}
	for _, id := range ids {
		r := a.st.Retentions[id]
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

func sortedRetentions(m map[string]*Retention) []string {
	ids := make([]string, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}
