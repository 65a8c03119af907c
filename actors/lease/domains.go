package lease

// A gated custom domain: the lease asks the domaingate to watch each desired
// custom domain (its items', or a reconcile's: reconcile_domains.go) its
// running release does not route yet, whenever it becomes Ready; when the
// gate opens (CustomDomainReady, routed by the registry) a Ready lease starts
// the restart-shaped custom_domain maintenance whose release routes the
// domain — journaled like any maintenance, so a crash between the opening and
// the redeploy settles with one completion (the gate tells again after a
// restart until forgotten). Once the release routing it is Ready the
// gate is forgotten; a closed lease forgets all of its gates.

import (
	"strconv"
	"time"

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
		for svc, dom := range desiredDomains(a.st, a.spec.Load()) {
			if r != nil && r.Domains[svc] == dom {
				a.tell(messages.DomainGate, &messages.ForgetCustomDomain{Lease: a.id, Domain: dom})
			} else {
				a.tell(messages.DomainGate, &messages.WatchCustomDomain{Lease: a.id, Domain: dom})
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
	desired := desiredDomains(a.st, a.spec.Load())
	service := ""
	for svc, dom := range desired {
		if dom == m.Domain {
			service = svc
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
	// The release keeps the routes still desired (a reconcile may have dropped one).
	target := r.clone()
	target.Domains = map[string]string{}
	for svc, dom := range r.Domains {
		if desired[svc] == dom {
			target.Domains[svc] = dom
		}
	}
	target.Domains[service] = m.Domain
	// IDs per (release, domain): the same opening told twice is one maintenance.
	id := redeployID(a.st, "berth:custom_domain:"+a.id+":"+m.Domain, r)
	if id == "" {
		a.log().Warn().Str("domain", m.Domain).Int("attempts", customDomainAttempts).
			Msg("custom domain redeploys from this release all failed; routed after the next restart or update")
		return
	}
	if d := a.step(Maintain{Kind: KindCustomDomain, ID: id, AdmittedAt: a.now(), Target: &target}); d.Reply != nil {
		a.log().Info().Str("domain", m.Domain).Str("refused", messages.SafeMessage(d.Reply)).Msg("custom domain redeploy not started; asked again when ready")
		if n, err := a.deps.Store.OutboxPending(a.id, RowMaintenance); err == nil && n > 0 {
			// The fence: an earlier completion (a failed redeploy's, say) is being
			// delivered, and the lease stays Ready meanwhile: ask again once it is.
			a.tasked().After("custom-domain-fence", customDomainFenceRetry, m)
		}
	}
}

// customDomainAttempts is how many redeploys routing one domain may start from
// one release: one that failed (berthd killed before its target existed, a
// start refused) rolls back to that release and is tried again under the next
// ID; after the last, the domain waits for the release to change.
const customDomainAttempts = 3

// customDomainFenceRetry is how soon a redeploy refused by the maintenance
// fence is asked again.
const customDomainFenceRetry = 5 * time.Second

// redeployID names the next attempt of the redeploy key from release r: the
// first of customDomainAttempts IDs no release of st carries; "" when one of
// them is still in flight (the same redeploy asked again) or all were tried.
func redeployID(st *State, key string, r *Release) string {
	for k := range customDomainAttempts {
		name := key + ":" + r.MaintenanceID + r.OperationID
		if k > 0 {
			name += ":" + strconv.Itoa(k)
		}
		id := uuid.NewSHA1(uuid.NameSpaceURL, []byte(name)).String()
		if m := st.Maintenance; m != nil && m.ID == id {
			return ""
		}
		if !st.hasMaintenance(id) {
			return id
		}
	}
	return ""
}
