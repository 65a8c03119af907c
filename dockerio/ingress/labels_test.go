package ingress

import (
	"maps"
	"strings"
	"testing"
)

var cfg = Config{WildcardDomain: "apps.example.com", Entrypoint: "websecure", CertResolver: "http01",
	Middlewares: []string{"security-headers@file", "ratelimit@file"}}

func TestLabels_PrimaryRouter_ExactSet(t *testing.T) {
	got, err := Labels(cfg, Container{Lease: leaseA, Service: "web", Index: 1,
		Ports: []Port{{8080, "tcp"}, {9090, "tcp"}}, Network: "berth-pool-abc123"})
	if err != nil {
		t.Fatal(err)
	}
	r := "fred-web-1-0123abcd45674890abcdef0123456789"
	fqdn := "web-1-0123abcd45674890abcdef0123456789.apps.example.com"
	want := map[string]string{
		"traefik.enable":                                           "true",
		"traefik.docker.network":                                   "berth-pool-abc123",
		"traefik.http.routers." + r + ".rule":                      "Host(`" + fqdn + "`)",
		"traefik.http.routers." + r + ".entrypoints":               "websecure",
		"traefik.http.routers." + r + ".tls":                       "true",
		"traefik.http.routers." + r + ".service":                   r,
		"traefik.http.services." + r + ".loadbalancer.server.port": "8080",
		"fred.fqdn": fqdn,
	}
	if !maps.Equal(got, want) {
		t.Fatalf("labels\n got %v\nwant %v", got, want)
	}
	for k := range got {
		if strings.Contains(k, "certresolver") {
			t.Fatalf("the primary router has a cert resolver: %s", k)
		}
	}
}

func TestLabels_CustomDomain_SecondRouterSharedByInstances(t *testing.T) {
	var sets []map[string]string
	for i := range 2 {
		l, err := Labels(cfg, Container{Lease: leaseA, Service: "web", Index: i, Ports: []Port{{80, "tcp"}, {3000, "tcp"}},
			Hint: 3000, Network: "fred-" + leaseA, CustomDomain: "Shop.Example.ORG."})
		if err != nil {
			t.Fatal(err)
		}
		sets = append(sets, l)
	}
	c := "fred-0123abcd45674890abcdef0123456789-web-custom"
	want := map[string]string{
		"traefik.http.routers." + c + ".rule":                      "Host(`shop.example.org`)",
		"traefik.http.routers." + c + ".entrypoints":               "websecure",
		"traefik.http.routers." + c + ".tls":                       "true",
		"traefik.http.routers." + c + ".tls.certresolver":          "http01",
		"traefik.http.routers." + c + ".middlewares":               "security-headers@file,ratelimit@file",
		"traefik.http.routers." + c + ".service":                   c,
		"traefik.http.services." + c + ".loadbalancer.server.port": "3000",
		"fred.custom_domain":                                       "shop.example.org",
	}
	for i, l := range sets {
		for k, v := range want {
			if l[k] != v {
				t.Fatalf("instance %d: %s = %q, want %q", i, k, l[k], v)
			}
		}
		primary := "fred-web-" + string(rune('0'+i)) + "-0123abcd45674890abcdef0123456789"
		if l["traefik.http.services."+primary+".loadbalancer.server.port"] != "3000" {
			t.Fatalf("instance %d: the primary service does not route to the hint: %v", i, l)
		}
		if n := len(l); n != 8+len(want) {
			t.Fatalf("instance %d: %d labels, want %d: %v", i, n, 8+len(want), l)
		}
	}
}

func TestLabels_NoRoutablePort_NoLabels(t *testing.T) {
	l, err := Labels(cfg, Container{Lease: leaseA, Service: "dns", Ports: []Port{{53, "udp"}}, Network: "n"})
	if err != nil || l != nil {
		t.Fatalf("labels %v err %v, want none", l, err)
	}
}

func TestLabels_BadInput_Errors(t *testing.T) {
	for name, c := range map[string]Container{
		"no network":        {Lease: leaseA, Service: "web", Ports: []Port{{80, "tcp"}}},
		"bad lease":         {Lease: "x", Service: "web", Ports: []Port{{80, "tcp"}}, Network: "n"},
		"bad custom domain": {Lease: leaseA, Service: "web", Ports: []Port{{80, "tcp"}}, Network: "n", CustomDomain: "x.apps.example.com"},
	} {
		if l, err := Labels(cfg, c); err == nil {
			t.Errorf("%s: labels %v, want an error", name, l)
		}
	}
}

// A pinned name (a lease taken over from fred v0.13) is routed and labelled as is.
func TestLabels_PinnedFQDN_RoutedAsIs(t *testing.T) {
	pinned := "web-7c1d2e3.apps.example.com"
	got, err := Labels(cfg, Container{Lease: leaseA, Service: "web", Index: 0, Ports: []Port{{8080, "tcp"}}, Network: "n", FQDN: pinned})
	if err != nil {
		t.Fatal(err)
	}
	if got["fred.fqdn"] != pinned || got["traefik.http.routers.fred-web-0-0123abcd45674890abcdef0123456789.rule"] != "Host(`"+pinned+"`)" {
		t.Fatalf("labels %v", got)
	}
}
