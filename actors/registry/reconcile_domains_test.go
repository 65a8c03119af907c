package registry

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/berth-dev/berth/actors/lease"
	"github.com/berth-dev/berth/messages"
	"github.com/berth-dev/berth/messages/policy"
)

// Table tests of POST /reconcile_custom_domain's routing (reconcile_domains.go):
// what the registry checks before the lease decides, the claims that keep a
// domain to one lease, and the answer coming back.

const (
	shop = "shop.example.org"
	www  = "www.example.org"
)

func withIngress(s *Settings) {
	s.CustomDomains = &policy.CustomDomains{Wildcard: "apps.example.test"}
}

// putDomain is put with its one item naming domain.
func putDomain(d *Directory, id, domain string, status Status, report lease.Status) *lease.Spec {
	req := leaseRequest(id, "docker-small", 1)
	req.Items[0].CustomDomain = domain
	spec := putRequest(d, req, status, report)
	if report != "" {
		d.entries[id].report.Info.Items = spec.Items // the report names the lease's domains
	}
	return spec
}

func reconcile(id string, items ...messages.LeaseItem) *messages.ReconcileDomains {
	if len(items) == 0 {
		items = []messages.LeaseItem{{SKU: "docker-small", Quantity: 1}}
	}
	return &messages.ReconcileDomains{Lease: id, Items: items, Reply: make(chan error, 1)}
}

func item(service, domain string) messages.LeaseItem {
	return messages.LeaseItem{SKU: "docker-small", Quantity: 1, ServiceName: service, CustomDomain: domain}
}

// renderReconcile is render with the claims and the reconcile command shown.
func renderReconcile(fx []Effect) []string {
	out := []string{}
	for _, e := range fx {
		s := renderEffect(e)
		switch e := e.(type) {
		case Claim:
			s = fmt.Sprintf("claim %s %v", e.Lease, e.Domains)
		case Unclaim:
			s = "unclaim " + e.Lease
		case Send:
			if c, ok := e.Msg.(*lease.ReconcileDomainsCommand); ok {
				s = fmt.Sprintf("send %s reconcile %v", e.Lease, c.Domains)
			}
		}
		out = append(out, short.Replace(s))
	}
	return out
}

type reconcileRow struct {
	name  string
	off   bool // ingress off
	setup func(d *Directory) any
	env   Env
	want  []string
}

func runReconcileRows(t *testing.T, rows []reconcileRow) {
	t.Helper()
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			d := dirOf(withIngress)
			if r.off {
				d = dirOf()
			}
			in := r.setup(d)
			before := fingerprint(d) + fmt.Sprint(d.claiming)
			dec := Decide(d, in, r.env)
			if after := fingerprint(d) + fmt.Sprint(d.claiming); after != before {
				t.Fatalf("Decide changed the directory:\n%s\n%s", before, after)
			}
			if len(dec.Events) > 0 {
				t.Fatalf("the registry journaled %d events; the lease journals the change", len(dec.Events))
			}
			if got := renderReconcile(dec.Effects); !slices.Equal(got, r.want) {
				t.Fatalf("decision\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(r.want, "\n  "))
			}
		})
	}
}

func TestDecide_ReconcileDomains_ChecksThenForwardsWithAClaim(t *testing.T) {
	ready := func(items ...messages.LeaseItem) func(d *Directory) any {
		return func(d *Directory) any {
			put(d, lA, "docker-small", 1, Reported, lease.Ready)
			return reconcile(lA, items...)
		}
	}
	in := func(s Status, r lease.Status) func(d *Directory) any {
		return func(d *Directory) any { put(d, lA, "docker-small", 1, s, r); return reconcile(lA, item("", shop)) }
	}
	forwarded := []string{"claim A map[app:" + shop + "]", "send A reconcile map[app:" + shop + "]"}
	nothing := []string{"answer <nil>"}
	badItem := func(msg string) []string { return []string{"answer bad request: " + msg} }
	runReconcileRows(t, []reconcileRow{
		{name: "reported ready: claimed and forwarded", setup: ready(item("", shop)), want: forwarded},
		{name: "normalised as at admission", setup: ready(item("app", "Shop.Example.ORG.")), want: forwarded},
		{name: "no custom domain: forwarded (a removal)", setup: ready(), want: []string{"claim A map[]", "send A reconcile map[]"}},
		{name: "maintaining: forwarded, the lease decides", setup: in(Maintaining, lease.Restarting), want: forwarded},
		{name: "admitted: forwarded", setup: in(Admitted, ""), want: forwarded},

		{name: "ingress off: nothing to do", off: true, setup: ready(item("", shop)), want: nothing},
		{name: "unknown lease: not provisioned", setup: func(*Directory) any { return reconcile(lA, item("", shop)) }, want: nothing},
		{name: "closing", setup: in(Closing, lease.Deprovisioning), want: nothing},
		{name: "closed", setup: in(Closed, lease.Closed), want: nothing},
		{name: "bad lease UUID", setup: func(*Directory) any { return reconcile("x", item("", shop)) },
			want: badItem("lease_uuid must be a canonical UUID")},
		{name: "recovering", setup: func(d *Directory) any { d.Ready = false; return reconcile(lA, item("", shop)) },
			want: []string{"answer lifecycle pending: recovering state, retry shortly"}},
		{name: "stopped actor: coded 503", setup: in(Stopped, lease.Ready),
			want: []string{"answer lifecycle pending: lease actor is being recovered"}},
		{name: "busy actor: coded 503", setup: in(Reported, lease.Ready), env: Env{Busy: func(*actor.PID) bool { return true }},
			want: []string{"answer lifecycle pending: lease is busy, retry later"}},

		{name: "a service the lease does not have", setup: ready(item("web", shop)),
			want: badItem(`items[0]: service_name "web" is not a service of this lease`)},
		{name: "an IP", setup: ready(item("", "203.0.113.7")),
			want: badItem(`items[0]: custom_domain: "203.0.113.7" is an IP address, not a domain name`)},
		{name: "localhost", setup: ready(item("", "app.localhost")), want: badItem(`items[0]: custom_domain: "app.localhost" is localhost`)},
		{name: "under the wildcard domain", setup: ready(item("", "x.apps.example.test")),
			want: badItem(`items[0]: custom_domain: "x.apps.example.test" is under the wildcard domain apps.example.test, whose names berth assigns`)},
		{name: "one domain for two services", setup: ready(item("app", shop), item("web", shop)),
			want: badItem("items[1]: custom_domain " + shop + " is named by two items")},
		{name: "named and unnamed mixed", setup: ready(item("app", shop), item("", www)),
			want: badItem("items: named and unnamed items cannot be mixed; every item needs a service_name")},
		{name: "no items", setup: func(d *Directory) any {
			put(d, lA, "docker-small", 1, Reported, lease.Ready)
			return &messages.ReconcileDomains{Lease: lA, Reply: make(chan error, 1)}
		}, want: badItem("items must not be empty")},
	})
}

func TestDecide_ReconcileDomains_ClaimsOfOtherLeases(t *testing.T) {
	held := []string{"answer invalid state: custom_domain " + shop + " is held by another lease on this host"}
	forwarded := []string{"claim A map[app:" + shop + "]", "send A reconcile map[app:" + shop + "]"}
	with := func(other func(d *Directory)) func(d *Directory) any {
		return func(d *Directory) any {
			put(d, lA, "docker-small", 1, Reported, lease.Ready)
			other(d)
			return reconcile(lA, item("", shop))
		}
	}
	reported := func(items []messages.LeaseItem, routed map[string]string) func(d *Directory) {
		return func(d *Directory) {
			putDomain(d, lB, shop, Reported, lease.Ready)
			d.entries[lB].report.Info.Items, d.entries[lB].report.Info.CustomDomains = items, routed
		}
	}
	queuedShop := func(d *Directory) []admission {
		req := leaseRequest(lC, "docker-small", 1)
		req.Items[0].CustomDomain = shop
		spec, _ := d.set.prepare(req, now)
		return []admission{{spec: spec}}
	}
	runReconcileRows(t, []reconcileRow{
		{name: "another lease's spec", setup: with(func(d *Directory) { putDomain(d, lB, shop, Reported, lease.Ready) }), want: held},
		{name: "another lease not reported yet: its spec", setup: with(func(d *Directory) { putDomain(d, lB, shop, Admitted, "") }), want: held},
		{name: "another lease's reconcile, reported", setup: with(func(d *Directory) {
			put(d, lB, "docker-small", 1, Reported, lease.Ready)
			d.entries[lB].report.Info.Items = []messages.LeaseItem{item("app", shop)}
		}), want: held},
		{name: "given up by another lease and no longer routed: free",
			setup: with(reported([]messages.LeaseItem{item("app", www)}, nil)), want: forwarded},
		{name: "given up, its router not gone yet: held",
			setup: with(reported([]messages.LeaseItem{item("app", www)}, map[string]string{"app": shop})), want: held},
		{name: "another lease's reconcile not answered yet", setup: with(func(d *Directory) {
			put(d, lB, "docker-small", 1, Reported, lease.Ready)
			d.claim(Claim{lB, map[string]string{"app": shop}})
		}), want: held},
		{name: "a queued admission", setup: func(d *Directory) any {
			put(d, lA, "docker-small", 1, Reported, lease.Ready)
			return reconcile(lA, item("", shop))
		}, env: Env{Queued: queuedShop(dirOf(withIngress))}, want: held},
		{name: "a closed lease's: free", setup: with(func(d *Directory) { putDomain(d, lB, shop, Closed, lease.Closed) }), want: forwarded},
		{name: "its own", setup: func(d *Directory) any {
			putDomain(d, lA, shop, Reported, lease.Ready)
			return reconcile(lA, item("", shop))
		}, want: forwarded},
	})
}

// The lease's answer ends its oldest claim and answers the request.
func TestDecide_DomainsReconciled_UnclaimsAndAnswers(t *testing.T) {
	refused := messages.Refuse(messages.ErrLifecyclePending, "lease is restarting")
	runReconcileRows(t, []reconcileRow{
		{name: "admitted", setup: func(*Directory) any { return &messages.DomainsReconciled{Lease: lA, Reply: make(chan error, 1)} },
			want: []string{"unclaim A", "answer <nil>"}},
		{name: "refused", setup: func(*Directory) any {
			return &messages.DomainsReconciled{Lease: lA, Err: refused, Reply: make(chan error, 1)}
		}, want: []string{"unclaim A", "answer lifecycle pending: lease is restarting"}},
	})
}

// A pending claim holds the domain against an admission too, until the lease
// answered; then its report rules: held while it names the domain, free once
// it gave it up.
func TestDirectory_ReconcileClaim_HoldsAgainstAdmissionUntilAnswered(t *testing.T) {
	d := dirOf(withIngress)
	put(d, lA, "docker-small", 1, Reported, lease.Ready)
	admitShop := func() []string {
		m := admit(lB, "docker-small", 1)
		m.Req.Items[0].CustomDomain = shop
		return renderReconcile(Decide(d, m, Env{Now: now}).Effects)
	}
	runOn(d, Decide(d, reconcile(lA, item("", shop)), Env{}))
	refused := []string{"answer invalid state: custom_domain " + shop + " is held by another lease on this host"}
	if got := admitShop(); !slices.Equal(got, refused) {
		t.Fatalf("admission while A's reconcile is pending: %v", got)
	}
	a := d.entries[lA]
	a.report.Info.Items = []messages.LeaseItem{item("app", shop)} // the lease's report of the change, then its answer
	runOn(d, Decide(d, &messages.DomainsReconciled{Lease: lA, Reply: make(chan error, 1)}, Env{}))
	if got := admitShop(); !slices.Equal(got, refused) {
		t.Fatalf("admission after A took it: %v", got)
	}
	a.report.Info.Items = []messages.LeaseItem{item("app", "")} // A gave it up, its router gone
	if got := admitShop(); len(got) != 2 || !strings.HasPrefix(got[0], "queue B#") {
		t.Fatalf("admission after A gave it up: %v", got)
	}
	if len(d.claiming) != 0 {
		t.Fatalf("claims left: %v", d.claiming)
	}
}
