package registry

// Tenants' custom domains at admission: each a valid FQDN outside the wildcard
// domain (400), one per service, and held by no other live lease of this host
// (409). With ingress off an item's custom_domain routes nothing and is kept
// as sent.

import (
	"slices"

	"github.com/berth-dev/berth/actors/lease"
	"github.com/berth-dev/berth/dockerio/ingress"
	"github.com/berth-dev/berth/messages"
)

// checkCustomDomains validates and normalises (lower case, no root dot) every
// item's custom domain; a domain two items name is refused.
func (s *Settings) checkCustomDomains(items []messages.LeaseItem) ([]messages.LeaseItem, error) {
	if s.Ingress == nil {
		return items, nil
	}
	out := slices.Clone(items)
	seen := map[string]bool{}
	for i, it := range out {
		if it.CustomDomain == "" {
			continue
		}
		d, err := ingress.ValidateCustomDomain(it.CustomDomain, s.Ingress.WildcardDomain)
		if err != nil {
			return nil, messages.Refuse(messages.ErrBadRequest, "items[%d]: %v", i, err)
		}
		if seen[d] {
			return nil, messages.Refuse(messages.ErrBadRequest, "items[%d]: custom_domain %s is named by two items", i, d)
		}
		seen[d] = true
		out[i].CustomDomain = d
	}
	return out, nil
}

// domainClaimed refuses spec when another live (or queued) lease holds one of
// its custom domains. A failed lease being replaced holds its own.
func (d *Directory) domainClaimed(spec *lease.Spec, queued []admission) error {
	want := map[string]bool{}
	for _, it := range spec.Items {
		if it.CustomDomain != "" {
			want[it.CustomDomain] = true
		}
	}
	if len(want) == 0 {
		return nil
	}
	holds := func(other *lease.Spec) error {
		for _, it := range other.Items {
			if other.Lease != spec.Lease && want[it.CustomDomain] {
				return messages.Refuse(messages.ErrInvalidState, "custom_domain %s is held by another lease on this host", it.CustomDomain)
			}
		}
		return nil
	}
	for _, q := range queued {
		if err := holds(q.spec); err != nil {
			return err
		}
	}
	for id, other := range d.St.Leases {
		if _, live := d.live(id); live {
			if err := holds(other); err != nil {
				return err
			}
		}
	}
	return nil
}

// customDomainReady hands a custom domain's opened DNS gate to its lease, which
// adds the router and then forgets the gate; a lease no longer live has the
// gate forgotten here.
func (a *Actor) customDomainReady(m *messages.CustomDomainReady) {
	if e, ok := a.dir.live(m.Lease); ok && e.pid != nil {
		a.c.Send(e.pid, m)
		return
	}
	a.deps.Tree.Send(messages.DomainGate, &messages.ForgetCustomDomain{Lease: m.Lease})
}
