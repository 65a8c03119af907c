package main

// The custom-domain DNS gate through a real berthd: two real DNS servers
// (miekg/dns) on 127.0.0.x are the resolvers. While they show the domain
// elsewhere the lease runs with its primary router alone; once both show it at
// host_address the gate opens and a custom_domain maintenance recreates the
// containers with the custom-domain router, one completion, and /info reports
// the domain as the service's fqdn.

import (
	"net"
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

func TestIngress_GatedCustomDomain_NoRouterBeforeQuorum_AddedByOneMaintenanceAfter(t *testing.T) {
	dc := dockerClient(t)
	cb := newCallbackReceiver(t)
	z1, z2 := startTestZone(t, "127.0.0.2", "198.51.100.9"), startTestZone(t, "127.0.0.3", "198.51.100.9")
	d := newDaemonDir(t, "ingress:\n  enabled: true\n  wildcard_domain: apps.example.test\n  entrypoint: websecure\n"+
		"  custom_domain_dns_resolvers: [\""+z1.addr+"\", \""+z2.addr+"\"]").startInProcess()
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
	time.Sleep(2 * time.Second)
	if n := len(cb.forLease(lease)); n != 2 {
		t.Fatalf("%d callbacks, want the provision's and the one redeploy's", n)
	}
	d.closeAll(dc, lease)
}
