package lease

// POST /reconcile_custom_domain at the lease. providerd names, every reconcile
// tick, the custom domain each service should have; the registry has checked
// the names (services of this lease, valid domains, claimed by no other lease)
// and hands them over. The lease compares them with the domains it should have
// (its desired domains: the last reconcile's, else its items') and with what
// its running release routes:
//
//   - the same, and routed as far as the gate allows: nothing is read or
//     journaled (a cheap no-op, the common case);
//   - a change while Ready: the new desired domains are journaled
//     (domains.desired, so a berthd restart keeps them); a removed or changed
//     domain's router goes through the restart-shaped custom_domain
//     maintenance (new containers, same data), and so does a new one with the
//     DNS gate disabled; with the gate on, a new one is watched and routed when
//     its gate opens (domains.go);
//   - restarting or updating: 503 lifecycle_pending; otherwise not Ready
//     (provisioning, failed, closing): nothing to do now, asked again next tick.
//
// The redeploy's ID is derived from the lease, the routing it sets up and the
// release it starts from: an identical call never admits a second one, and one
// that failed (rolled back) is not retried from the same release — a later
// restart or update gives the next tick a new ID to try.

import (
	"maps"
	"slices"
	"strings"

	"github.com/berth-dev/berth/messages"
	"github.com/berth-dev/berth/persistence"
)

// ReconcileDomainsCommand is a reconcile the registry checked: service →
// custom domain, validated and lower-cased; a service absent has none. The
// answer goes back through the registry (messages.DomainsReconciled).
type ReconcileDomainsCommand struct {
	Domains map[string]string
	Reply   chan<- error
}

// ReconcileDomains is the reconcile as Decide's input.
type ReconcileDomains struct{ Domains map[string]string }

func (ReconcileDomains) isInput() {}

// SyncGate tells the DNS gate what the lease's custom domains are now: Forget
// those dropped, then (Ready) watch each desired one not routed yet.
type SyncGate struct{ Forget []string }

func (SyncGate) isEffect() {}

// EvDomainsDesired journals the custom domains a reconcile gave the lease.
const EvDomainsDesired = "domains.desired"

// DomainsDesired are the custom domains the lease should have, service →
// domain, for its admission Admission: a re-provision (a new admission)
// starts again from its own items.
type DomainsDesired struct {
	Admission uint64            `json:"admission"`
	Domains   map[string]string `json:"domains"`
}

func (s *State) onDomainsDesired(e *DomainsDesired) bool {
	if e.Admission != s.Admission {
		return false
	}
	s.Desired = e
	return true
}

// desiredDomains are the custom domains the lease should have now: the last
// reconcile's of its admission, else its items'.
func desiredDomains(st *State, spec *Spec) map[string]string {
	if d := st.Desired; d != nil && d.Admission == spec.Admission {
		return d.Domains
	}
	out := map[string]string{}
	for _, it := range spec.Items {
		if it.CustomDomain != "" {
			out[it.ServiceName] = it.CustomDomain
		}
	}
	return out
}

// desiredItems are the lease's items naming the custom domains it should have
// now (GET /provisions, and the registry's claims through the report).
func desiredItems(spec *Spec, st *State) []messages.LeaseItem {
	d := st.Desired
	if d == nil || d.Admission != spec.Admission {
		return spec.Items
	}
	out := slices.Clone(spec.Items)
	for i := range out {
		out[i].CustomDomain = d.Domains[out[i].ServiceName]
	}
	return out
}

// domainPlan is what a reconcile asks of the lease: whether its desired
// domains change, and (Ready) the routing its release should have now —
// every wanted domain with the gate disabled; with it, those already routed —
// and whether that takes a redeploy, under maintenance ID id.
type domainPlan struct {
	changed  bool
	target   map[string]string
	id       string
	redeploy bool
}

func planDomains(st *State, want map[string]string, env Env) domainPlan {
	p := domainPlan{changed: !maps.Equal(want, desiredDomains(st, env.Spec))}
	r := st.Running()
	if st.Status != Ready || r == nil {
		return p
	}
	p.target = map[string]string{}
	for svc, dom := range want {
		if !env.DomainsGated || r.Domains[svc] == dom {
			p.target[svc] = dom
		}
	}
	p.id = redeployID(st, reconcileKey(env.Spec.Lease, p.target), r)
	p.redeploy = !maps.Equal(p.target, r.Domains) && p.id != ""
	return p
}

// reconcileKey names the redeploy to routing target (redeployID adds the
// source release and the attempt).
func reconcileKey(lease string, target map[string]string) string {
	var b strings.Builder
	for _, svc := range slices.Sorted(maps.Keys(target)) {
		b.WriteString(svc + "=" + target[svc] + ";")
	}
	return "berth:custom_domain_reconcile:" + lease + ":" + b.String()
}

// decideReconcileDomains: see the top of this file.
func decideReconcileDomains(st *State, in ReconcileDomains, env Env) Decision {
	p := planDomains(st, in.Domains, env)
	switch {
	case !p.changed && !p.redeploy:
		return Decision{}
	case st.Status.maintaining():
		return Decision{Reply: messages.Refuse(messages.ErrLifecyclePending,
			"lease is %s; its custom domains are reconciled once it is ready", st.Status.Wire())}
	case st.Status != Ready:
		return Decision{}
	case p.redeploy && env.Fenced:
		return Decision{Reply: messages.Refuse(messages.ErrLifecyclePending,
			"an earlier maintenance completion of this lease is still being delivered; retry shortly")}
	}
	var d Decision
	if p.changed {
		have := desiredDomains(st, env.Spec)
		d.Events = []persistence.Event{event(EvDomainsDesired, env.Now,
			DomainsDesired{Admission: env.Spec.Admission, Domains: maps.Clone(in.Domains)})}
		d.Effects = []Effect{SyncGate{Forget: dropped(have, in.Domains)}}
	}
	if !p.redeploy {
		return d
	}
	target := st.Running().clone()
	target.Domains = p.target
	m := decideMaintain(st, Maintain{Kind: KindCustomDomain, ID: p.id, AdmittedAt: env.Now, Target: &target}, env)
	if m.Reply != nil {
		return Decision{Reply: m.Reply}
	}
	d.Events = append(d.Events, m.Events...)
	d.Effects = append(d.Effects, m.Effects...)
	return d
}

// dropped are the domains of have that want names for no service, sorted.
func dropped(have, want map[string]string) []string {
	kept := map[string]bool{}
	for _, dom := range want {
		kept[dom] = true
	}
	var out []string
	for _, dom := range have {
		if !kept[dom] {
			out = append(out, dom)
		}
	}
	slices.Sort(out)
	return out
}

// needsFence reports whether Decide reads the maintenance fence for in: a
// maintenance, and a reconcile that would redeploy (a no-op reads nothing).
func needsFence(st *State, in Input, env Env) bool {
	switch in := in.(type) {
	case Maintain:
		return true
	case ReconcileDomains:
		return planDomains(st, in.Domains, env).redeploy
	}
	return false
}

// reconcileDomains decides a reconcile and answers it through the registry,
// after the report its commit sent.
func (a *Actor) reconcileDomains(m *ReconcileDomainsCommand) {
	d := a.step(ReconcileDomains{Domains: m.Domains})
	if a.c.Parent() == nil {
		m.Reply <- d.Reply
		return
	}
	a.c.Send(a.c.Parent(), &messages.DomainsReconciled{Lease: a.id, Err: d.Reply, Reply: m.Reply})
}

// syncGate runs a SyncGate effect.
func (a *Actor) syncGate(e SyncGate) {
	if !a.gated() {
		return
	}
	for _, dom := range e.Forget {
		a.tell(messages.DomainGate, &messages.ForgetCustomDomain{Lease: a.id, Domain: dom})
	}
	a.syncDomainGate()
}
