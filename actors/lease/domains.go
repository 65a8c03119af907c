package lease

// A gated custom domain: the lease asks the domaingate to watch each item's
// custom domain its running release does not route yet, whenever it becomes
// Ready; when the gate opens (CustomDomainReady, routed by the registry) a Ready
// lease starts the restart-shaped custom_domain maintenance whose release
// routes the domain — journaled like any maintenance, so a crash between the
// opening and the redeploy settles with one completion (the gate tells again
// after a restart until forgotten). Once the release routing it is Ready the
// gate is forgotten; a closed lease forgets all of its gates.

import (
	"maps"

	"github.com/google/uuid"

	"github.com/berth-dev/berth/messages"
)

// KindCustomDomain is the maintenance that adds a custom domain's router.
const KindCustomDomain = "custom_domain"

// gated reports whether this lease's custom domains wait for the DNS gate.
func (a *Actor) gated() bool { return a.set.Ingress != nil && !a.set.CustomDomainsUngated }

// syncDomainGate tells the gate what the lease's status asks: Ready, watch each
// custom domain not routed yet and forget each routed one; closed, forget all.
func (a *Actor) syncDomainGate() {
	if !a.gated() || a.st == nil {
		return
	}
	switch a.st.Status {
	case Closed:
		a.tell(messages.DomainGate, &messages.ForgetCustomDomain{Lease: a.id})
	case Ready:
		r := a.st.Running()
		for _, it := range a.spec.Load().Items {
			switch {
			case it.CustomDomain == "":
			case r != nil && r.Domains[it.ServiceName] == it.CustomDomain:
				a.tell(messages.DomainGate, &messages.ForgetCustomDomain{Lease: a.id, Domain: it.CustomDomain})
			default:
				a.tell(messages.DomainGate, &messages.WatchCustomDomain{Lease: a.id, Domain: it.CustomDomain})
			}
		}
	}
}

// customDomainReady starts the maintenance routing m.Domain when the lease is
// Ready and still names it; a lease busy now asks again when next Ready.
func (a *Actor) customDomainReady(m *messages.CustomDomainReady) {
	if !a.gated() || a.st == nil || a.st.Status != Ready {
		return
	}
	r := a.st.Running()
	service := ""
	for _, it := range a.spec.Load().Items {
		if it.CustomDomain == m.Domain {
			service = it.ServiceName
		}
	}
	switch {
	case service == "" || r == nil:
		a.tell(messages.DomainGate, &messages.ForgetCustomDomain{Lease: a.id, Domain: m.Domain})
		return
	case r.Domains[service] == m.Domain:
		a.syncDomainGate()
		return
	}
	target := r.clone()
	target.Domains = maps.Clone(r.Domains)
	if target.Domains == nil {
		target.Domains = map[string]string{}
	}
	target.Domains[service] = m.Domain
	// One ID per (release, domain): the same opening told twice is one maintenance.
	id := uuid.NewSHA1(uuid.NameSpaceURL, []byte("berth:custom_domain:"+a.id+":"+m.Domain+":"+r.MaintenanceID+r.OperationID)).String()
	if d := a.step(Maintain{Kind: KindCustomDomain, ID: id, AdmittedAt: a.deps.Now(), Target: &target}); d.Reply != nil {
		a.log().Info().Str("domain", m.Domain).Str("refused", messages.SafeMessage(d.Reply)).Msg("custom domain redeploy not started; asked again when ready")
	}
}
