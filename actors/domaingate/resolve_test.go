package domaingate

import (
	"context"
	"strings"
	"testing"
	"time"
)

func TestNeeded_ZeroIsMajority_ClampedToResolvers(t *testing.T) {
	for _, c := range []struct{ q, n, want int }{
		{0, 1, 1}, {0, 2, 2}, {0, 3, 2}, {0, 4, 3}, {0, 5, 3},
		{1, 3, 1}, {3, 3, 3}, {5, 3, 3}, {-2, 3, 2},
	} {
		if got := Needed(c.q, c.n); got != c.want {
			t.Errorf("Needed(%d, %d) = %d, want %d", c.q, c.n, got, c.want)
		}
	}
}

// Every case asks real DNS servers run on 127.0.0.x.
func TestCheck_RealDNSServers(t *testing.T) {
	cases := []struct {
		name     string
		res      func(t *testing.T) Resolvers
		seen     int
		open     bool
		saying   string
		maxTaken time.Duration
	}{
		{"quorum met: all three see the host", func(t *testing.T) Resolvers {
			return resolvers(0, honest(t, "127.0.0.2"), honest(t, "127.0.0.3"), honest(t, "127.0.0.4"))
		}, 3, true, "at " + hostIP, 0},
		{"quorum not met: one of three", func(t *testing.T) Resolvers {
			return resolvers(0, honest(t, "127.0.0.2"), lying(t, "127.0.0.3"), lying(t, "127.0.0.4"))
		}, 1, false, "points elsewhere: " + otherIP, 0},
		{"one resolver lying, majority still met", func(t *testing.T) Resolvers {
			return resolvers(0, honest(t, "127.0.0.2"), honest(t, "127.0.0.3"), lying(t, "127.0.0.4"))
		}, 2, true, "points elsewhere", 0},
		{"one resolver lying, quorum of all three not met", func(t *testing.T) Resolvers {
			return resolvers(3, honest(t, "127.0.0.2"), honest(t, "127.0.0.3"), lying(t, "127.0.0.4"))
		}, 2, false, "points elsewhere", 0},
		{"two resolvers time out", func(t *testing.T) Resolvers {
			return resolvers(0, honest(t, "127.0.0.2"), silentServer(t, "127.0.0.3"), silentServer(t, "127.0.0.4"))
		}, 1, false, "timed out", 2 * time.Second},
		{"one resolver times out, the majority answers", func(t *testing.T) Resolvers {
			return resolvers(0, honest(t, "127.0.0.2"), honest(t, "127.0.0.3"), silentServer(t, "127.0.0.4"))
		}, 2, true, "timed out", 2 * time.Second},
		{"the domain points elsewhere everywhere", func(t *testing.T) Resolvers {
			return resolvers(0, lying(t, "127.0.0.2"), lying(t, "127.0.0.3"), lying(t, "127.0.0.4"))
		}, 0, false, "points elsewhere", 0},
		{"one address here, one elsewhere: not ours alone", func(t *testing.T) Resolvers {
			z := startZone(t, "127.0.0.2", true, domain+". 60 IN A "+hostIP, domain+". 60 IN A "+otherIP)
			return resolvers(1, z.Addr)
		}, 0, false, "points elsewhere", 0},
		{"the domain does not exist", func(t *testing.T) Resolvers {
			return resolvers(1, startZone(t, "127.0.0.2", true, "other.example.org. 60 IN A "+hostIP).Addr)
		}, 0, false, "no address", 0},
		{"CNAME chain answered whole", func(t *testing.T) Resolvers {
			return resolvers(1, startZone(t, "127.0.0.2", true, chain...).Addr)
		}, 1, true, "at " + hostIP, 0},
		{"CNAME chain followed hop by hop", func(t *testing.T) Resolvers {
			return resolvers(1, startZone(t, "127.0.0.2", false, chain...).Addr)
		}, 1, true, "at " + hostIP, 0},
		{"CNAME chain ending elsewhere", func(t *testing.T) Resolvers {
			return resolvers(1, startZone(t, "127.0.0.2", false, domain+". 60 IN CNAME a.cdn.example.", "a.cdn.example. 60 IN A "+otherIP).Addr)
		}, 0, false, "points elsewhere", 0},
		{"CNAME loop", func(t *testing.T) Resolvers {
			return resolvers(1, startZone(t, "127.0.0.2", false, domain+". 60 IN CNAME a.example.", "a.example. 60 IN CNAME "+domain+".").Addr)
		}, 0, false, "loops", 0},
		{"AAAA at the host's IPv6", func(t *testing.T) Resolvers {
			r := resolvers(1, startZone(t, "127.0.0.2", true, domain+". 60 IN AAAA 2001:db8::7").Addr)
			r.Host = "2001:db8::7"
			return r
		}, 1, true, "at 2001:db8::7", 0},
		{"an AAAA elsewhere says nothing about an IPv4 host", func(t *testing.T) Resolvers {
			return resolvers(1, startZone(t, "127.0.0.2", true, domain+". 60 IN A "+hostIP, domain+". 60 IN AAAA 2001:db8::9").Addr)
		}, 1, true, "at " + hostIP, 0},
		{"host given by name: CNAME to it", func(t *testing.T) Resolvers {
			r := resolvers(1, startZone(t, "127.0.0.2", false, domain+". 60 IN CNAME edge.provider.example.",
				"edge.provider.example. 60 IN A "+hostIP).Addr)
			r.Host = "Edge.Provider.example"
			return r
		}, 1, true, "CNAME to edge.provider.example.", 0},
		{"host given by name: same address", func(t *testing.T) Resolvers {
			r := resolvers(1, startZone(t, "127.0.0.2", true, domain+". 60 IN A "+hostIP, "edge.provider.example. 60 IN A "+hostIP).Addr)
			r.Host = "edge.provider.example"
			return r
		}, 1, true, "at " + hostIP, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := c.res(t)
			began := time.Now()
			v := r.Check(context.Background(), domain)
			if v.Seen != c.seen || v.Open() != c.open || !strings.Contains(v.Detail, c.saying) {
				t.Fatalf("verdict %+v (open %v), want %d seen, open %v, saying %q", v, v.Open(), c.seen, c.open, c.saying)
			}
			if c.maxTaken > 0 && time.Since(began) > c.maxTaken {
				t.Fatalf("check took %v with silent resolvers, want under %v", time.Since(began), c.maxTaken)
			}
		})
	}
}

var chain = []string{
	domain + ". 60 IN CNAME shop.cdn.example.",
	"shop.cdn.example. 60 IN CNAME edge-7.cdn.example.",
	"edge-7.cdn.example. 60 IN CNAME lb.provider.example.",
	"lb.provider.example. 60 IN A " + hostIP,
}
