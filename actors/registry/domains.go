package registry

// Tenants' custom domains at admission: each a valid FQDN outside the wildcard
// domain (400), one per service, and held by no other live lease of this host
// (409). With ingress off an item's custom_domain routes nothing and is kept
// as sent.

import (
	"slices"

	"github.com/berth-dev/berth/actors/lease"
	"github.com/berth-dev/berth/messages"
)

// checkCustomDomains validates and normalises (lower case, no root dot) every
// item's custom domain; a domain two items name is refused.
func (s *Settings) checkCustomDomains(items []messages.LeaseItem) ([]messages.LeaseItem, error) {
	if s.CustomDomains == nil {
		return items, nil
	}
	out := slices.Clone(items)
	seen := map[string]bool{}
	for i, it := range out {
		if it.CustomDomain == "" {
			continue
		}
		d, err := s.CustomDomains.Check(it.CustomDomain)
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
	var want []string
	for _, it := range spec.Items {
		if it.CustomDomain != "" {
			want = append(want, it.CustomDomain)
		}
	}
	return d.claimedElsewhere(spec.Lease, want, queued)
}

// claimedElsewhere refuses domains when a lease other than id — live, or queued
// for admission — holds one of them (409).
func (d *Directory) claimedElsewhere(id string, domains []string, queued []admission) error {
	if len(domains) == 0 {
		return nil
	}
	var taken string
	check := func(dom string) bool {
		if slices.Contains(domains, dom) {
			taken = dom
		}
		return taken == ""
	}
	for _, q := range queued {
		if q.spec.Lease != id {
			itemDomains(q.spec.Items, check)
		}
	}
	for other, spec := range d.St.Leases {
		if _, live := d.live(other); live && other != id && taken == "" {
			d.held(other, spec, check)
		}
	}
	if taken != "" {
		return messages.Refuse(messages.ErrInvalidState, "custom_domain %s is held by another lease on this host", taken)
	}
	return nil
}

// held calls yield with each custom domain lease id holds until it says
// stop: those its last report of its admission names — desired and routed, so
// a domain it gave up stays held until its router is gone — else its spec's;
// and those of reconciles its actor has not answered yet (reconcile_domains.go).
func (d *Directory) held(id string, spec *lease.Spec, yield func(string) bool) {
	items := spec.Items
	if e := d.entries[id]; e != nil && e.report.Admission == spec.Admission && len(e.report.Info.Items) > 0 {
		items = e.report.Info.Items
		for _, dom := range e.report.Info.CustomDomains {
			if !yield(dom) {
				return
			}
		}
	}
	if !itemDomains(items, yield) {
		return
	}
	for _, c := range d.claiming[id] {
		for _, dom := range c {
			if !yield(dom) {
				return
			}
		}
	}
}

// itemDomains calls yield with each item's custom domain until it says stop;
// false when it did.
func itemDomains(items []messages.LeaseItem, yield func(string) bool) bool {
	for _, it := range items {
		if it.CustomDomain != "" && !yield(it.CustomDomain) {
			return false
		}
	}
	return true
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
