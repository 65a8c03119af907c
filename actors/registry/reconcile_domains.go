package registry

// POST /reconcile_custom_domain, routed. The registry checks providerd's items
// against the lease's spec (each names a service of the lease, each custom
// domain passes the admission rules: 400) and against every other lease's
// claims (409), then hands the wanted domains to the lease's actor, which
// decides the drift (actors/lease/reconcile_domains.go) and answers back here.
// Until it has, the wanted domains are claimed for it (a pending claim), so two
// leases never take one domain; its report, which reaches the registry before
// its answer, names its desired and routed domains from then on (domains.go).
// With ingress off, or for a lease not provisioned here, there is nothing to do.

import (
	"errors"
	"maps"
	"slices"

	"github.com/berth-dev/berth/actors/lease"
	"github.com/berth-dev/berth/messages"
	"github.com/berth-dev/berth/messages/manifest"
)

// Directory changes of a reconcile: Claim holds Domains for Lease while its
// actor decides; Unclaim ends its oldest claim once the actor answered.
type (
	Claim struct {
		Lease   string
		Domains map[string]string
	}
	Unclaim struct{ Lease string }
)

// reconcileDomains checks a reconcile and forwards it to the lease's actor.
func (d *Directory) reconcileDomains(m *messages.ReconcileDomains, env Env) Decision {
	switch {
	case !messages.ValidLeaseID(m.Lease):
		return answer(m.Reply, messages.Refuse(messages.ErrBadRequest, "lease_uuid must be a canonical UUID"))
	case d.set.CustomDomains == nil:
		return answer(m.Reply, nil) // ingress off: a custom domain routes nothing
	case !d.Ready:
		return answer(m.Reply, messages.Refuse(messages.ErrLifecyclePending, "recovering state, retry shortly"))
	}
	e, live := d.live(m.Lease)
	if !live || e.status == Closing {
		return answer(m.Reply, nil) // not provisioned, or being closed
	}
	want, err := d.set.wantedDomains(d.St.Leases[m.Lease], m.Items)
	if err == nil {
		err = d.claimedElsewhere(m.Lease, slices.Collect(maps.Values(want)), env.Queued)
	}
	if err != nil {
		return answer(m.Reply, err)
	}
	fx := d.forward(e, m.Lease, &lease.ReconcileDomainsCommand{Domains: want, Reply: m.Reply}, m.Reply, env)
	if _, sent := fx.(Send); sent {
		return Decision{Effects: []Effect{Claim{m.Lease, want}, fx}}
	}
	if a, ok := fx.(Answer); ok && !errors.Is(a.Err, messages.ErrNotFound) {
		// A lease actor recovering or over its backlog: the contract's 503 is coded.
		a.Err = messages.Refuse(messages.ErrLifecyclePending, "%s", messages.SafeMessage(a.Err))
		fx = a
	}
	return Decision{Effects: []Effect{fx}}
}

// domainsReconciled ends the lease's pending claim and answers the request.
func (d *Directory) domainsReconciled(m *messages.DomainsReconciled) Decision {
	return Decision{Effects: []Effect{Unclaim{m.Lease}, Answer{m.Reply, m.Err}}}
}

// wantedDomains reads items as service → custom domain: the items' rules of
// a provision (a lone unnamed item is service app), each service one of the
// lease's, each domain valid, lower-cased and named once.
func (s *Settings) wantedDomains(spec *lease.Spec, items []messages.LeaseItem) (map[string]string, error) {
	norm, err := manifest.NormalizeItems(items)
	if err == nil {
		norm, err = s.checkCustomDomains(norm)
	}
	if err != nil {
		return nil, err
	}
	want := map[string]string{}
	for i, it := range norm {
		if !slices.ContainsFunc(spec.Services, func(svc lease.ServiceSpec) bool { return svc.Name == it.ServiceName }) {
			return nil, messages.Refuse(messages.ErrBadRequest, "items[%d]: service_name %q is not a service of this lease", i, it.ServiceName)
		}
		if it.CustomDomain != "" {
			want[it.ServiceName] = it.CustomDomain
		}
	}
	return want, nil
}

// claim and unclaim run Claim and Unclaim (a lease's actor answers its
// reconciles in order). A lease closed before its actor answered holds
// nothing: its claims are dropped at the next claim.
func (d *Directory) claim(c Claim) {
	if d.claiming == nil {
		d.claiming = map[string][]map[string]string{}
	}
	for id := range d.claiming {
		if _, live := d.live(id); !live {
			delete(d.claiming, id)
		}
	}
	d.claiming[c.Lease] = append(d.claiming[c.Lease], c.Domains)
}

func (d *Directory) unclaim(u Unclaim) {
	if q := d.claiming[u.Lease]; len(q) > 1 {
		d.claiming[u.Lease] = q[1:]
	} else {
		delete(d.claiming, u.Lease)
	}
}
