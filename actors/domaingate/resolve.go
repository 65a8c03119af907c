package domaingate

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"
)

// maxHops bounds a CNAME chain (a loop, or a chain no resolver would follow).
const maxHops = 8

// Resolvers asks public DNS servers whether a domain resolves to this host.
type Resolvers struct {
	Servers []string // host:port
	Quorum  int      // resolvers that must agree; 0 is a majority
	Host    string   // host_address: an IP, or a name whose addresses count
	Timeout time.Duration
}

// Verdict is one check of a domain: how many resolvers saw it at this host,
// how many had to, and what each said.
type Verdict struct {
	Seen, Needed, Of int
	Detail           string
}

// Open reports whether the quorum saw the domain at this host.
func (v Verdict) Open() bool { return v.Needed > 0 && v.Seen >= v.Needed }

// Needed is the quorum of n resolvers: q, where 0 is a majority, clamped to [1, n].
func Needed(q, n int) int {
	if q <= 0 {
		q = n/2 + 1
	}
	return max(1, min(q, n))
}

// Check asks every server at once and counts those that see domain at the host.
func (r Resolvers) Check(ctx context.Context, domain string) Verdict {
	said := make([]string, len(r.Servers))
	seen := make([]bool, len(r.Servers))
	var wg sync.WaitGroup
	for i, s := range r.Servers {
		wg.Go(func() {
			ok, why := r.sees(ctx, s, domain)
			seen[i], said[i] = ok, s+": "+why
		})
	}
	wg.Wait()
	v := Verdict{Needed: Needed(r.Quorum, len(r.Servers)), Of: len(r.Servers), Detail: strings.Join(said, "; ")}
	for _, ok := range seen {
		if ok {
			v.Seen++
		}
	}
	return v
}

// sees asks one server: every address it gives for domain (of the host's
// family, following CNAMEs) must be the host's, and there must be one. A host
// given by name also counts when the domain's chain passes through that name.
func (r Resolvers) sees(ctx context.Context, server, domain string) (bool, string) {
	want, byName, err := r.hostAddrs(ctx, server)
	if err != nil {
		return false, "host: " + err.Error()
	}
	var got []netip.Addr
	for _, qt := range []uint16{dns.TypeA, dns.TypeAAAA} {
		chain, addrs, err := r.follow(ctx, server, domain, qt)
		if err != nil {
			return false, err.Error()
		}
		if byName != "" && len(chain) > 1 && containsFold(chain[1:], byName) {
			return true, "CNAME to " + byName
		}
		got = append(got, addrs...)
	}
	var mine, elsewhere []string
	for _, a := range got {
		switch {
		case want[a]:
			mine = append(mine, a.String())
		case byName != "" || familyOf(want, a):
			elsewhere = append(elsewhere, a.String())
		}
	}
	switch {
	case len(elsewhere) > 0:
		return false, "points elsewhere: " + strings.Join(elsewhere, ",")
	case len(mine) == 0:
		return false, "no address"
	}
	return true, "at " + strings.Join(mine, ",")
}

// hostAddrs is the set the domain must resolve into: the host IP itself, or
// the addresses server gives for the host name (then also returned).
func (r Resolvers) hostAddrs(ctx context.Context, server string) (map[netip.Addr]bool, string, error) {
	if ip, err := netip.ParseAddr(r.Host); err == nil {
		return map[netip.Addr]bool{ip.Unmap(): true}, "", nil
	}
	name := dns.Fqdn(strings.ToLower(r.Host))
	want := map[netip.Addr]bool{}
	for _, qt := range []uint16{dns.TypeA, dns.TypeAAAA} {
		_, addrs, err := r.follow(ctx, server, name, qt)
		if err != nil {
			return nil, "", err
		}
		for _, a := range addrs {
			want[a] = true
		}
	}
	return want, name, nil
}

// familyOf reports whether a is of a family the host has an address in: a
// host given as an IPv4 address says nothing about the domain's AAAA records.
func familyOf(want map[netip.Addr]bool, a netip.Addr) bool {
	for w := range want {
		if w.Is4() == a.Is4() {
			return true
		}
	}
	return false
}

// follow resolves name's records of type qt through server, following CNAMEs
// within an answer and, when an answer stops at a CNAME, by asking for its
// target. It returns the chain of names (name first) and the addresses of the
// last; NXDOMAIN and an empty answer are no addresses, not an error.
func (r Resolvers) follow(ctx context.Context, server, name string, qt uint16) ([]string, []netip.Addr, error) {
	cur := dns.Fqdn(strings.ToLower(name))
	chain := []string{cur}
	for range maxHops {
		in, err := r.exchange(ctx, server, cur, qt)
		if err != nil {
			return chain, nil, err
		}
		if in.Rcode == dns.RcodeNameError {
			return chain, nil, nil
		}
		if in.Rcode != dns.RcodeSuccess {
			return chain, nil, fmt.Errorf("%s %s: %s", cur, dns.TypeToString[qt], dns.RcodeToString[in.Rcode])
		}
		asked := cur
		for next := cnameOf(in.Answer, cur); next != ""; next = cnameOf(in.Answer, cur) {
			if len(chain) > maxHops || containsFold(chain, next) {
				return chain, nil, fmt.Errorf("%s: CNAME chain loops or exceeds %d", name, maxHops)
			}
			cur, chain = next, append(chain, next)
		}
		addrs := addrsOf(in.Answer, cur)
		if len(addrs) > 0 || cur == asked {
			return chain, addrs, nil
		}
	}
	return chain, nil, fmt.Errorf("%s: CNAME chain exceeds %d", name, maxHops)
}

// exchange asks one question, recursion desired, over UDP, then TCP when the
// answer came truncated.
func (r Resolvers) exchange(ctx context.Context, server, name string, qt uint16) (*dns.Msg, error) {
	m := new(dns.Msg)
	m.SetQuestion(name, qt)
	m.RecursionDesired = true
	c := &dns.Client{Net: "udp", Timeout: r.Timeout}
	in, _, err := c.ExchangeContext(ctx, m, server)
	if err == nil && in.Truncated {
		c.Net = "tcp"
		in, _, err = c.ExchangeContext(ctx, m, server)
	}
	var nerr interface{ Timeout() bool }
	if errors.As(err, &nerr) && nerr.Timeout() {
		return nil, errors.New("timed out")
	}
	return in, err
}

func cnameOf(rrs []dns.RR, owner string) string {
	for _, rr := range rrs {
		if c, ok := rr.(*dns.CNAME); ok && strings.EqualFold(c.Hdr.Name, owner) {
			return strings.ToLower(c.Target)
		}
	}
	return ""
}

func addrsOf(rrs []dns.RR, owner string) []netip.Addr {
	var out []netip.Addr
	add := func(ip []byte) {
		if addr, ok := netip.AddrFromSlice(ip); ok {
			out = append(out, addr.Unmap())
		}
	}
	for _, rr := range rrs {
		if a, ok := rr.(*dns.A); ok && strings.EqualFold(a.Hdr.Name, owner) {
			add(a.A)
		} else if aaaa, ok := rr.(*dns.AAAA); ok && strings.EqualFold(aaaa.Hdr.Name, owner) {
			add(aaaa.AAAA)
		}
	}
	return out
}

func containsFold(list []string, s string) bool {
	for _, x := range list {
		if strings.EqualFold(x, s) {
			return true
		}
	}
	return false
}

// summary is the verdict in one line, for the journal and the console.
func (v Verdict) summary() string {
	s := fmt.Sprintf("%d of %d resolvers (need %d): %s", v.Seen, v.Of, v.Needed, v.Detail)
	if len(s) > maxSummary {
		s = s[:maxSummary-3] + "..."
	}
	return s
}

// maxSummary bounds a journaled verdict (resolvers quote what servers said).
const maxSummary = 1024
