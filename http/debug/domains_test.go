package debug_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/berth-dev/berth/http/debug"
	"github.com/berth-dev/berth/messages"
)

func TestDomains_TheGatesOfEveryLeaseOrOne_OffWithoutAGate_BadLeaseRefused(t *testing.T) {
	f := newFixture(t, nil)
	a, b := uuid.NewString(), uuid.NewString()
	checked, next := now.Add(-time.Minute), now.Add(2*time.Minute)
	f.set(func(w *world) {
		w.gates = []messages.DomainGateView{
			{LeaseUUID: a, Domain: "shop.example.org", State: messages.GateWaiting, Since: now.Add(-time.Hour), Attempts: 3,
				LastResult: "0 of 2 resolvers (need 2): points elsewhere", LastCheckAt: &checked, NextCheckAt: &next},
			{LeaseUUID: b, Domain: "blog.example.org", State: messages.GateOpen, Since: now.Add(-time.Hour), Attempts: 1, LastCheckAt: &checked},
		}
	})
	var out messages.DomainsSummary
	body := f.getJSON("/debug/domains", &out)
	if !out.Enabled || len(out.Gates) != 2 {
		t.Fatalf("GET /debug/domains: %s", body)
	}
	for _, key := range []string{`"enabled":true`, `"lease_uuid":"` + a + `"`, `"domain":"shop.example.org"`, `"state":"waiting"`,
		`"attempts":3`, `"last_result":"0 of 2 resolvers (need 2): points elsewhere"`, `"last_check_at":"2030-06-01T11:59:00Z"`,
		`"next_check_at":"2030-06-01T12:02:00Z"`, `"state":"open"`} {
		if !strings.Contains(body, key) {
			t.Errorf("body lacks %s:\n%s", key, body)
		}
	}
	if strings.Count(body, `"next_check_at"`) != 1 {
		t.Errorf("an open gate says when it is checked next: %s", body)
	}
	body = f.getJSON("/debug/domains?lease="+b, &out)
	if len(out.Gates) != 1 || out.Gates[0].LeaseUUID != b {
		t.Fatalf("GET /debug/domains?lease=%s: %s", b, body)
	}
	if status, body := f.get("/debug/domains?lease=NOT-A-UUID"); status != http.StatusBadRequest || !strings.Contains(body, `"error"`) {
		t.Errorf("a bad lease: %d %s, want a JSON 400", status, body)
	}

	off := newFixture(t, func(o *debug.Options) { o.DomainGatePath = "" })
	if body := off.getJSON("/debug/domains", &out); out.Enabled || !strings.Contains(body, `"gates":[]`) {
		t.Errorf("without a gate: %s, want enabled false and no gates", body)
	}
	mute := newFixture(t, func(o *debug.Options) { o.DomainGatePath = "root/mute"; o.AskTimeout = 200 * time.Millisecond })
	if status, body := mute.get("/debug/domains"); status != http.StatusServiceUnavailable || !strings.Contains(body, `"error"`) {
		t.Errorf("a gate that does not answer: %d %s, want a JSON 503", status, body)
	}
}

// A lease's history carries its ingress: each service's instance names, the
// custom domain its item asks for and the one its release routes, and that
// domain's gate — the domaingate's while it holds one, else forgotten (routed)
// or not watched. A lease without names or custom domains has no ingress.
func TestLeaseHistory_IngressNamesEveryInstanceAndEachCustomDomainsGate(t *testing.T) {
	f := newFixture(t, nil)
	id, plain := uuid.NewString(), uuid.NewString()
	hex := strings.ReplaceAll(id, "-", "")
	next := now.Add(30 * time.Second)
	f.set(func(w *world) {
		w.rows = []messages.LeaseRow{row(id, now.Add(-time.Hour), ""), row(plain, now.Add(-time.Hour), "")}
		w.provisions[id] = messages.ProvisionInfo{LeaseUUID: id, Status: messages.StatusReady,
			Items: []messages.LeaseItem{{SKU: "s", Quantity: 2, ServiceName: "app", CustomDomain: "shop.example.org"},
				{SKU: "s", Quantity: 1, ServiceName: "api", CustomDomain: "api.example.org"},
				{SKU: "s", Quantity: 1, ServiceName: "db", CustomDomain: "db.example.org"},
				{SKU: "s", Quantity: 1, ServiceName: "worker"}},
			FQDNs: map[string][]string{"app": {"app-0-" + hex + ".apps.example.test", "app-1-" + hex + ".apps.example.test"},
				"api": {"api-0-" + hex + ".apps.example.test"}, "db": {"db-0-" + hex + ".apps.example.test"}},
			CustomDomains: map[string]string{"api": "api.example.org"}}
		w.provisions[plain] = messages.ProvisionInfo{LeaseUUID: plain, Status: messages.StatusReady,
			Items: []messages.LeaseItem{{SKU: "s", Quantity: 1, ServiceName: "app"}}}
		w.gates = []messages.DomainGateView{{LeaseUUID: id, Domain: "shop.example.org", State: messages.GateWaiting, Attempts: 2, NextCheckAt: &next},
			{LeaseUUID: plain, Domain: "other.example.org", State: messages.GateOpen}}
	})
	var h struct {
		Lease   messages.LeaseRow      `json:"lease"`
		Ingress *messages.LeaseIngress `json:"ingress"`
	}
	body := f.getJSON("/debug/leases/"+id, &h)
	if h.Lease.LeaseUUID != id || h.Ingress == nil || len(h.Ingress.Services) != 3 || h.Ingress.GatesError != "" {
		t.Fatalf("history with ingress: %s", body)
	}
	api, app, db := h.Ingress.Services[0], h.Ingress.Services[1], h.Ingress.Services[2]
	if app.Name != "app" || len(app.FQDNs) != 2 || app.FQDNs[1] != "app-1-"+hex+".apps.example.test" || app.CustomDomain != "shop.example.org" ||
		app.RoutedDomain != "" || app.Gate == nil || app.Gate.State != messages.GateWaiting || app.Gate.Attempts != 2 ||
		app.Gate.NextCheckAt == nil || !app.Gate.NextCheckAt.Equal(next) {
		t.Errorf("a waiting custom domain: %+v (gate %+v)", app, app.Gate)
	}
	if api.Name != "api" || api.RoutedDomain != "api.example.org" || api.Gate == nil || api.Gate.State != messages.GateForgotten ||
		api.Gate.LeaseUUID != id || api.Gate.Domain != "api.example.org" {
		t.Errorf("a routed custom domain: %+v (gate %+v)", api, api.Gate)
	}
	if db.Name != "db" || db.RoutedDomain != "" || db.Gate == nil || db.Gate.State != messages.GateNotWatched {
		t.Errorf("a custom domain neither watched nor routed: %+v (gate %+v)", db, db.Gate)
	}
	for _, key := range []string{`"ingress":{"services":[{"name":"api","fqdns":["api-0-` + hex + `.apps.example.test"],` +
		`"custom_domain":"api.example.org","routed_domain":"api.example.org","gate":{"lease_uuid":"` + id + `","domain":"api.example.org","state":"forgotten","attempts":0}}`} {
		if !strings.Contains(body, key) {
			t.Errorf("body lacks %s:\n%s", key, body)
		}
	}

	if body := f.getJSON("/debug/leases/"+plain, &h); strings.Contains(body, `"ingress"`) {
		t.Errorf("a lease without names or custom domains has an ingress: %s", body)
	}
	// The gate not answering leaves the names and says why.
	mute := newFixture(t, func(o *debug.Options) { o.DomainGatePath = "root/mute"; o.AskTimeout = 200 * time.Millisecond })
	mute.set(func(w *world) {
		w.rows = f.w.rows
		w.provisions = f.w.provisions
	})
	h.Ingress = nil // a fresh decode
	body = mute.getJSON("/debug/leases/"+id, &h)
	if h.Ingress == nil || !strings.Contains(h.Ingress.GatesError, "domain gate") || h.Ingress.Services[1].Gate != nil ||
		len(h.Ingress.Services[1].FQDNs) != 2 {
		t.Errorf("with a mute gate: %s", body)
	}
}
