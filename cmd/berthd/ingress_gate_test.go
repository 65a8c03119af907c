package main

// The custom-domain DNS gate through a real berthd: two real DNS servers
// (miekg/dns) on 127.0.0.x are the resolvers. While they show the domain
// elsewhere the lease runs with its primary router alone; once both show it at
// host_address the gate opens and a custom_domain maintenance recreates the
// containers with the custom-domain router, one completion, and /info reports
// the domain as the service's fqdn. Operators see it all the way: the debug
// API, berthctl and the console show each instance's name and the gate waiting
// with its checks, then the domain routed and the gate forgotten.

import (
	"fmt"
	"net"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/berth-dev/berth/messages"
)

// testZone is a real DNS server answering one A record the test may change.
type testZone struct {
	addr string
	mu   sync.Mutex
	a    string // the address the domain resolves to
}

func startTestZone(t *testing.T, ip, a string) *testZone {
	t.Helper()
	pc, err := net.ListenPacket("udp", ip+":0")
	if err != nil {
		t.Fatalf("listen on %s: %v", ip, err)
	}
	z := &testZone{addr: pc.LocalAddr().String(), a: a}
	started := make(chan struct{})
	srv := &dns.Server{PacketConn: pc, Handler: z, NotifyStartedFunc: func() { close(started) }}
	go func() { _ = srv.ActivateAndServe() }()
	<-started
	t.Cleanup(func() { _ = srv.Shutdown() })
	return z
}

func (z *testZone) point(a string) {
	z.mu.Lock()
	z.a = a
	z.mu.Unlock()
}

func (z *testZone) ServeDNS(w dns.ResponseWriter, r *dns.Msg) {
	z.mu.Lock()
	defer z.mu.Unlock()
	m := new(dns.Msg)
	m.SetReply(r)
	if q := r.Question[0]; q.Qtype == dns.TypeA {
		rr, _ := dns.NewRR(q.Name + " 60 IN A " + z.a)
		m.Answer = append(m.Answer, rr)
	}
	_ = w.WriteMsg(m)
}

// gatedIngressConfig is ingress on with the DNS gate asking resolvers.
func gatedIngressConfig(resolvers ...string) string {
	return "ingress:\n  enabled: true\n  wildcard_domain: apps.example.test\n  entrypoint: websecure\n" +
		"  custom_domain_dns_resolvers: [\"" + strings.Join(resolvers, "\", \"") + "\"]"
}

func TestIngress_GatedCustomDomain_NoRouterBeforeQuorum_AddedByOneMaintenanceAfter(t *testing.T) {
	t.Parallel()
	dc := dockerClient(t)
	cb := newCallbackReceiver(t)
	z1, z2 := startTestZone(t, "127.0.0.2", "198.51.100.9"), startTestZone(t, "127.0.0.3", "198.51.100.9")
	d := newDaemonDir(t, gatedIngressConfig(z1.addr, z2.addr)).startInProcess()
	views := newGateViews(t, d)
	lease := provisionReady(t, d, cb, flatManifest(map[string]any{"args": []string{"serve"}}),
		messages.LeaseItem{SKU: "docker-micro", Quantity: 2, CustomDomain: "shop.example.org"})

	// Both resolvers see it elsewhere: nothing of the domain is emitted.
	time.Sleep(2 * time.Second)
	for key, l := range ingressLabels(t, dc, lease) {
		for k := range l {
			if strings.Contains(k, "-custom") || k == "fred.custom_domain" {
				t.Fatalf("%s carries %s before the gate opened", key, k)
			}
		}
	}
	var info messages.LeaseInfo
	d.get("/info/"+lease).json(t, &info)
	if info.Services["app"].FQDN != "" {
		t.Fatalf("service fqdn %q before the gate opened", info.Services["app"].FQDN)
	}
	views.check(lease, "shop.example.org", messages.GateWaiting, ingressLabels(t, dc, lease))

	// One resolver alone is not the quorum (2 of 2)...
	z1.point("127.0.0.1")
	time.Sleep(time.Second)
	// ...both are: the next check opens the gate, and one maintenance adds the router.
	z2.point("127.0.0.1")
	got := cb.waitFor(lease, 2, 3*time.Minute)
	if got[1].Body.Status != messages.CallbackSuccess {
		t.Fatalf("custom domain redeploy: %+v", got[1].Body)
	}
	d.waitStatus(lease, messages.StatusReady, time.Minute)
	for key, l := range ingressLabels(t, dc, lease) {
		if l["fred.custom_domain"] != "shop.example.org" || l["fred.fqdn"] == "" {
			t.Fatalf("%s after the gate opened: %v", key, l)
		}
	}
	d.get("/info/"+lease).json(t, &info)
	if info.Services["app"].FQDN != "shop.example.org" {
		t.Fatalf("service fqdn %q after the gate opened", info.Services["app"].FQDN)
	}
	views.check(lease, "shop.example.org", messages.GateForgotten, ingressLabels(t, dc, lease))
	time.Sleep(2 * time.Second)
	if n := len(cb.forLease(lease)); n != 2 {
		t.Fatalf("%d callbacks, want the provision's and the one redeploy's", n)
	}
	d.closeAll(dc, lease)
}

// gateViews checks what operators see of a lease's names and its custom
// domain's DNS gate: GET /debug/leases/{lease}'s ingress and GET /debug/domains,
// berthctl lease and domains, and the console in headless Chromium.
type gateViews struct {
	t        *testing.T
	d        *daemonProc
	berthctl string // the berthctl binary
	chromium string
}

func newGateViews(t *testing.T, d *daemonProc) *gateViews {
	t.Helper()
	return &gateViews{t: t, d: d, berthctl: buildBerthctl(t, t.TempDir()), chromium: chromiumBinary(t)}
}

// ingress is the lease's ingress in GET /debug/leases/{lease}.
func (v *gateViews) ingress(lease string) (*messages.LeaseIngress, string) {
	var h struct {
		Ingress      *messages.LeaseIngress `json:"ingress"`
		IngressError string                 `json:"ingress_error"`
	}
	v.d.debugJSON("/debug/leases/"+lease, &h)
	return h.Ingress, h.IngressError
}

// check checks that every view shows the app service's instances under the
// names their fred.fqdn labels say, and its custom domain with the gate in
// state (waiting: checked at least once, its next check scheduled; forgotten:
// the domain routed, the gate holding nothing).
func (v *gateViews) check(lease, domain, state string, labels map[string]map[string]string) {
	t := v.t
	t.Helper()
	names := []string{labels["app/0"]["fred.fqdn"], labels["app/1"]["fred.fqdn"]}
	if names[0] == "" || names[1] == "" || len(labels) != 2 {
		t.Fatalf("labels %v: want two named app instances", labels)
	}
	routed := state == messages.GateForgotten
	eventually(t, 30*time.Second, func() string {
		in, why := v.ingress(lease)
		if in == nil || len(in.Services) != 1 {
			return fmt.Sprintf("ingress %+v (%s)", in, why)
		}
		s := in.Services[0]
		switch g := s.Gate; {
		case s.Name != "app" || strings.Join(s.FQDNs, " ") != strings.Join(names, " ") || s.CustomDomain != domain:
			return fmt.Sprintf("service %+v, want fqdns %v", s, names)
		case g == nil || g.State != state || g.Domain != domain || g.LeaseUUID != lease:
			return fmt.Sprintf("gate %+v, want %s", g, state)
		case routed && (s.RoutedDomain != domain || g.Attempts != 0):
			return fmt.Sprintf("routed service %+v", s)
		case !routed && (s.RoutedDomain != "" || g.Attempts < 1 || g.LastCheckAt == nil || g.NextCheckAt == nil ||
			!strings.Contains(g.LastResult, "resolvers")):
			return fmt.Sprintf("waiting gate %+v of %+v", g, s)
		}
		return v.domainsSay(lease, domain, state)
	})
	v.berthctlSays(lease, domain, state, names)
	v.consoleSays(lease, domain, state, names)
}

// domainsSay is why GET /debug/domains?lease= is not what state means ("": it is).
func (v *gateViews) domainsSay(lease, domain, state string) string {
	var all messages.DomainsSummary
	v.d.debugJSON("/debug/domains?lease="+lease, &all)
	switch {
	case !all.Enabled:
		return "GET /debug/domains: the gate is off"
	case state == messages.GateForgotten && len(all.Gates) != 0:
		return fmt.Sprintf("GET /debug/domains still holds %+v", all.Gates)
	case state != messages.GateForgotten && (len(all.Gates) != 1 || all.Gates[0].Domain != domain || all.Gates[0].State != state):
		return fmt.Sprintf("GET /debug/domains: %+v, want %s %s", all.Gates, domain, state)
	}
	return ""
}

func (v *gateViews) berthctlSays(lease, domain, state string, names []string) {
	t := v.t
	t.Helper()
	out := berthctlOK(t, v.berthctl, v.d, "lease", lease)
	routed := "no"
	if state == messages.GateForgotten {
		routed = "yes"
	}
	want := []string{`(?m)^fqdns:$`, `(?m)^app\s+0\s+` + regexp.QuoteMeta(names[0]) + `$`, `(?m)^app\s+1\s+` + regexp.QuoteMeta(names[1]) + `$`,
		`(?m)^app\s+` + regexp.QuoteMeta(domain) + `\s+` + routed + `\s+` + state + `\s+\d+\s`}
	for _, re := range want {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Fatalf("berthctl lease %s lacks %s:\n%s", lease, re, out)
		}
	}
	domains := berthctlOK(t, v.berthctl, v.d, "domains")
	held := regexp.MustCompile(`(?m)^` + lease + `\s+` + regexp.QuoteMeta(domain) + `\s+` + state + `\b`).MatchString(domains)
	if held != (state != messages.GateForgotten) {
		t.Fatalf("berthctl domains, gate %s:\n%s", state, domains)
	}
}

func (v *gateViews) consoleSays(lease, domain, state string, names []string) {
	t := v.t
	t.Helper()
	dom := dumpDOM(t, v.chromium, "http://"+v.d.debug+"/?token="+testDebugToken+"#lease="+lease, 5000)
	want := []string{`data-detail-lease="` + lease + `"`, `data-ingress-service="app" data-gate="` + state + `"`,
		`data-custom-domain="` + domain + `"`, `data-fqdn="` + names[0] + `"`, `data-fqdn="` + names[1] + `"`}
	if state != messages.GateForgotten {
		want = append(want, `data-gate-lease="`+lease+`" data-gate-domain="`+domain+`" data-gate="`+state+`"`)
	}
	for _, w := range want {
		if !strings.Contains(dom, w) {
			t.Fatalf("the console lacks %s:\n%s", w, dom)
		}
	}
	if state == messages.GateForgotten && strings.Contains(dom, `data-gate-lease="`+lease+`"`) {
		t.Fatalf("the console's gates panel still lists %s", lease)
	}
}
