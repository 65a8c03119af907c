package domaingate

import (
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// zoneServer is a real DNS server (miekg/dns) on a 127.0.0.x address, answering
// from a zone the test may change while it runs. With chained set it answers a
// CNAME together with the rest of the chain, as a recursive resolver does;
// without it, only the CNAME, so the client must ask for the target itself.
type zoneServer struct {
	Addr    string
	mu      sync.Mutex
	records map[string][]dns.RR // lower-case FQDN → its records
	chained bool
}

func startZone(t *testing.T, ip string, chained bool, rrs ...string) *zoneServer {
	t.Helper()
	pc, err := net.ListenPacket("udp", ip+":0")
	if err != nil {
		t.Fatalf("listen on %s: %v", ip, err)
	}
	z := &zoneServer{Addr: pc.LocalAddr().String(), chained: chained}
	z.Set(t, rrs...)
	started := make(chan struct{})
	srv := &dns.Server{PacketConn: pc, Handler: z, NotifyStartedFunc: func() { close(started) }}
	go func() { _ = srv.ActivateAndServe() }()
	<-started
	t.Cleanup(func() { _ = srv.Shutdown() })
	return z
}

// Set replaces the zone with rrs (presentation form).
func (z *zoneServer) Set(t *testing.T, rrs ...string) {
	t.Helper()
	records := map[string][]dns.RR{}
	for _, s := range rrs {
		rr, err := dns.NewRR(s)
		if err != nil {
			t.Fatalf("record %q: %v", s, err)
		}
		n := strings.ToLower(rr.Header().Name)
		records[n] = append(records[n], rr)
	}
	z.mu.Lock()
	z.records = records
	z.mu.Unlock()
}

func (z *zoneServer) ServeDNS(w dns.ResponseWriter, r *dns.Msg) {
	z.mu.Lock()
	defer z.mu.Unlock()
	m := new(dns.Msg)
	m.SetReply(r)
	m.RecursionAvailable = true
	q := r.Question[0]
	name := strings.ToLower(q.Name)
	if _, ok := z.records[name]; !ok {
		m.Rcode = dns.RcodeNameError
	}
	for hop := 0; hop < 16; hop++ {
		next := ""
		for _, rr := range z.records[name] {
			if rr.Header().Rrtype == q.Qtype {
				m.Answer = append(m.Answer, rr)
			}
			if c, ok := rr.(*dns.CNAME); ok {
				m.Answer = append(m.Answer, rr)
				next = strings.ToLower(c.Target)
			}
		}
		if next == "" || !z.chained {
			break
		}
		name = next
	}
	_ = w.WriteMsg(m)
}

// silentServer takes queries on a 127.0.0.x address and never answers.
func silentServer(t *testing.T, ip string) string {
	t.Helper()
	pc, err := net.ListenPacket("udp", ip+":0")
	if err != nil {
		t.Fatalf("listen on %s: %v", ip, err)
	}
	t.Cleanup(func() { _ = pc.Close() })
	return pc.LocalAddr().String()
}

const (
	hostIP  = "203.0.113.7"
	otherIP = "198.51.100.9"
	domain  = "shop.example.org"
)

func honest(t *testing.T, ip string) string {
	return startZone(t, ip, true, domain+". 60 IN A "+hostIP).Addr
}

func lying(t *testing.T, ip string) string {
	return startZone(t, ip, true, domain+". 60 IN A "+otherIP).Addr
}

func resolvers(quorum int, servers ...string) Resolvers {
	return Resolvers{Servers: servers, Quorum: quorum, Host: hostIP, Timeout: 300 * time.Millisecond}
}
