package registry

import (
	"slices"

	"github.com/berth-dev/berth/actors/lease"
	"github.com/berth-dev/berth/messages"
)

// imagePins are the images the registry's durable state pins: every live
// lease's release history (what its actor last reported from its journal) and
// every retention record's images (a restore, or a claimed record's
// destination, runs exactly those). Nothing is stored for them: each pin is
// derived from the journaled state that needs it, so pins cannot drift from it.
// A live lease whose actor has not reported since this registry started (or
// since its admission), or reported its journal unreadable, is counted
// Unknown: its pins are not known.
func (d *Directory) imagePins() messages.ImagePins {
	out := messages.ImagePins{IDs: map[string]struct{}{}, Ready: d.Ready}
	for id, spec := range d.St.Leases {
		for _, si := range spec.Images {
			out.Add(si.ID)
		}
		e := d.entries[id]
		if e == nil || e.report.Lease == "" || e.report.Info.Status == messages.StatusUnknown {
			// Not reported yet, or its journal could not be read: what it
			// pins is not known, and nothing may be collected meanwhile.
			out.Unknown++
			continue
		}
		for _, img := range e.report.Images {
			out.Add(img)
		}
	}
	for _, r := range d.St.Retentions {
		for _, si := range r.Record.Images {
			out.Add(si.ID)
		}
	}
	return out
}

// Image pin budgets (the seed's "at most 100,000 total and 10,000 per verified
// durable tenant"), zero: unlimited.
const (
	DefaultImagePins       = 100_000
	DefaultTenantImagePins = 10_000
)

// checkImagePins refuses an admission (or an update) whose images would take
// its tenant past TenantImagePins, or the provider past ImagePins, distinct
// pinned images. Budgets count image references, known before anything is
// resolved: those of live leases' specs, of admissions queued in the batch and
// of retention records (except the lease's own, which this admission
// replaces). An image the tenant (or the provider) already pins is reused
// above the ceilings. A refusal changes nothing and deletes nothing.
func (d *Directory) checkImagePins(leaseID, tenant string, refs []string, queued []admission) error {
	tenantMax, totalMax := d.set.TenantImagePins, d.set.ImagePins
	if tenantMax <= 0 && totalMax <= 0 {
		return nil
	}
	// Counting first: fewer references than a budget cannot hold more
	// distinct images than it. The State's count is kept until it changes, so
	// a burst of admissions counts once.
	if d.pinRefs == nil {
		c := &refCounts{byTenant: map[string]int{}}
		d.eachPinnedRef("", nil, func(t, _ string) { c.all++; c.byTenant[t]++ })
		d.pinRefs = c
	}
	all, mine := d.pinRefs.all+len(refs), d.pinRefs.byTenant[tenant]+len(refs)
	for _, q := range queued {
		n := len(q.spec.Services)
		all += n
		if q.spec.Tenant == tenant {
			mine += n
		}
	}
	if tenantMax > 0 && mine > tenantMax {
		pinned := map[string]bool{}
		d.eachPinnedRef(leaseID, queued, func(t, ref string) {
			if t == tenant {
				pinned[ref] = true
			}
		})
		if n, added := len(pinned), newRefs(refs, pinned); added > 0 && n+added > tenantMax {
			return messages.Refuse(messages.ErrInsufficientResources,
				"image pin budget exceeded: tenant %s pins %d distinct images and this request adds %d (at most %d per tenant); close leases or let retained data expire",
				tenant, n, added, tenantMax)
		}
	}
	if totalMax > 0 && all > totalMax {
		pinned := map[string]bool{}
		d.eachPinnedRef(leaseID, queued, func(_, ref string) { pinned[ref] = true })
		if n, added := len(pinned), newRefs(refs, pinned); added > 0 && n+added > totalMax {
			return messages.Refuse(messages.ErrInsufficientResources,
				"image pin budget exceeded: the provider pins %d distinct images and this request adds %d (at most %d)",
				n, added, totalMax)
		}
	}
	return nil
}

// newRefs counts the distinct refs not pinned yet.
func newRefs(refs []string, pinned map[string]bool) int {
	n := 0
	for i, ref := range refs {
		if !pinned[ref] && !slices.Contains(refs[:i], ref) {
			n++
		}
	}
	return n
}

// refCounts count the image references of the State's pins (with repeats).
type refCounts struct {
	all      int
	byTenant map[string]int
}

// eachPinnedRef calls f with the tenant and image reference of every pin the
// directory holds, the lease leaseID's own spec aside.
func (d *Directory) eachPinnedRef(leaseID string, queued []admission, f func(tenant, ref string)) {
	for id, spec := range d.St.Leases {
		if id != leaseID {
			specRefs(spec, func(ref string) { f(spec.Tenant, ref) })
		}
	}
	for _, q := range queued {
		if q.spec.Lease != leaseID {
			specRefs(q.spec, func(ref string) { f(q.spec.Tenant, ref) })
		}
	}
	for _, r := range d.St.Retentions {
		for _, si := range r.Record.Images {
			f(r.Record.Tenant, si.Ref)
		}
	}
}

func specRefs(spec *lease.Spec, f func(ref string)) {
	for _, svc := range spec.Services {
		if svc.Manifest != nil {
			f(svc.Manifest.Image)
		}
	}
}

// imageRefs are the distinct image references of services.
func imageRefs(services []lease.ServiceSpec) []string {
	var out []string
	for _, svc := range services {
		if svc.Manifest != nil && !slices.Contains(out, svc.Manifest.Image) {
			out = append(out, svc.Manifest.Image)
		}
	}
	return out
}
