package registry

import (
	"math"

	"github.com/berth-dev/berth/actors/lease"
	"github.com/berth-dev/berth/messages"
)

// Resources is an amount of pool capacity. CPU is kept in milli-cores so sums and
// differences are exact.
type Resources struct {
	CPUMilli int64
	MemoryMB int64
	DiskMB   int64
}

// CPU converts cores to milli-cores.
func CPU(cores float64) int64 { return int64(math.Round(cores * 1000)) }

func (r Resources) add(o Resources) Resources {
	return Resources{r.CPUMilli + o.CPUMilli, r.MemoryMB + o.MemoryMB, r.DiskMB + o.DiskMB}
}

func (r Resources) sub(o Resources) Resources {
	return Resources{r.CPUMilli - o.CPUMilli, r.MemoryMB - o.MemoryMB, r.DiskMB - o.DiskMB}
}

// within reports whether r fits in limit; a zero limit dimension is unlimited when
// zeroUnlimited is set (tenant quotas), never for pool totals.
func (r Resources) within(limit Resources, zeroUnlimited bool) bool {
	ok := func(v, l int64) bool { return (zeroUnlimited && l == 0) || v <= l }
	return ok(r.CPUMilli, limit.CPUMilli) && ok(r.MemoryMB, limit.MemoryMB) && ok(r.DiskMB, limit.DiskMB)
}

// Need is what a lease's instances take from the pool: each instance's frozen
// profile, a diskless one pinning its scratch allowance.
func Need(spec *lease.Spec) Resources {
	var r Resources
	for _, a := range spec.Allocations() {
		r = r.add(Resources{CPU(a.Profile.CPUCores), a.Profile.MemoryMB, a.Profile.EffectiveDiskMB()})
	}
	return r
}

// Pool is the resource pool: the sum of the frozen profiles of every live lease.
// It is derived state — rebuilt from the registry's journal, never journaled itself.
type Pool struct {
	Total     Resources
	Quota     Resources // per tenant; zero dimension = unlimited
	allocated Resources
	byLease   map[string]leaseUse
	byTenant  map[string]Resources
}

type leaseUse struct {
	tenant string
	use    Resources
}

// NewPool is an empty pool.
func NewPool(total, quota Resources) *Pool {
	return &Pool{Total: total, Quota: quota, byLease: map[string]leaseUse{}, byTenant: map[string]Resources{}}
}

// Check reports whether lease (owned by tenant) can hold need, counting its current
// reservation (if any) as freed — a re-admission swaps allocations atomically —
// and those of freed too (a restore takes over its source record's footprint).
func (p *Pool) Check(leaseID, tenant string, need Resources, freed ...string) error {
	total, t := p.allocated.add(need), p.byTenant[tenant].add(need)
	for _, id := range append([]string{leaseID}, freed...) {
		u := p.byLease[id]
		total = total.sub(u.use)
		if u.tenant == tenant {
			t = t.sub(u.use)
		}
	}
	if !total.within(p.Total, false) {
		return messages.Refuse(messages.ErrInsufficientResources, "insufficient resources in the provider's pool")
	}
	if !t.within(p.Quota, true) {
		return messages.Refuse(messages.ErrInsufficientResources, "tenant quota exceeded")
	}
	return nil
}

// Set records lease's reservation, replacing any previous one.
func (p *Pool) Set(leaseID, tenant string, need Resources) {
	p.Release(leaseID)
	p.byLease[leaseID] = leaseUse{tenant: tenant, use: need}
	p.allocated = p.allocated.add(need)
	p.byTenant[tenant] = p.byTenant[tenant].add(need)
}

// Release frees lease's reservation; releasing nothing is a no-op.
func (p *Pool) Release(leaseID string) {
	cur, ok := p.byLease[leaseID]
	if !ok {
		return
	}
	delete(p.byLease, leaseID)
	p.allocated = p.allocated.sub(cur.use)
	t := p.byTenant[cur.tenant].sub(cur.use)
	if t == (Resources{}) {
		delete(p.byTenant, cur.tenant)
	} else {
		p.byTenant[cur.tenant] = t
	}
}

// Allocated is the sum of live reservations.
func (p *Pool) Allocated() Resources { return p.allocated }

// Stats renders the pool for GET /stats.
func (p *Pool) Stats(activeContainers int) messages.Stats {
	a, t := p.allocated, p.Total
	return messages.Stats{
		TotalCPUCores:     float64(t.CPUMilli) / 1000,
		TotalMemoryMB:     t.MemoryMB,
		TotalDiskMB:       t.DiskMB,
		AllocatedCPUCores: float64(a.CPUMilli) / 1000,
		AllocatedMemoryMB: a.MemoryMB,
		AllocatedDiskMB:   a.DiskMB,
		AvailableCPUCores: float64(t.CPUMilli-a.CPUMilli) / 1000,
		AvailableMemoryMB: t.MemoryMB - a.MemoryMB,
		AvailableDiskMB:   t.DiskMB - a.DiskMB,
		ActiveContainers:  activeContainers,
	}
}
