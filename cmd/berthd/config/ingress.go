package config

import (
	"net"
	"net/netip"
	"strconv"
	"strings"

	"github.com/berth-dev/berth/messages/policy"
)

// validateIngress checks the ingress.* keys when ingress is enabled. With it
// off they configure nothing and are accepted as they are, so a Fred
// configuration with ingress switched off loads unchanged.
func validateIngress(c *Config, ps *problemSet) {
	in := &c.Ingress
	if !in.Enabled {
		return
	}
	if !c.NetworkIsolation {
		ps.add("ingress.enabled", "requires network_isolation: Traefik reaches each lease's containers on the lease's own network")
	}
	if in.WildcardDomain == "" {
		ps.add("ingress.wildcard_domain", "is required when ingress is enabled (e.g. apps.example.com)")
	} else if err := policy.ValidateWildcardDomain(in.WildcardDomain); err != nil {
		ps.add("ingress.wildcard_domain", "%q: %v", in.WildcardDomain, err)
	}
	switch {
	case in.Entrypoint == "":
		ps.add("ingress.entrypoint", "is required when ingress is enabled (the Traefik entrypoint name, e.g. websecure)")
	case strings.ContainsAny(in.Entrypoint, ", \t\n`"):
		ps.add("ingress.entrypoint", "%q: one Traefik entrypoint name, without commas, spaces or backquotes", in.Entrypoint)
	}
	for i, m := range in.CustomDomainMiddlewares {
		if m == "" || strings.ContainsAny(m, ", \t\n`") {
			ps.add("ingress.custom_domain_middlewares", "entry %d %q: a Traefik middleware reference such as security-headers@file", i, m)
		}
	}
	validateDNSGate(in, ps)
}

// validateDNSGate checks the custom-domain readiness gate's resolvers: IP
// literals with a port (naming a resolver by name would need DNS to find DNS).
func validateDNSGate(in *Ingress, ps *problemSet) {
	if in.CustomDomainDNSCheckDisabled {
		return
	}
	if len(in.CustomDomainDNSResolvers) == 0 {
		ps.add("ingress.custom_domain_dns_resolvers", "needs at least one resolver (host:port), or custom_domain_dns_check_disabled: true")
	}
	for i, r := range in.CustomDomainDNSResolvers {
		host, port, err := net.SplitHostPort(r)
		n, perr := strconv.Atoi(port)
		if _, aerr := netip.ParseAddr(host); err != nil || perr != nil || n < 1 || n > 65535 || aerr != nil {
			ps.add("ingress.custom_domain_dns_resolvers", "entry %d %q: must be ip:port, such as 1.1.1.1:53 or [2606:4700:4700::1111]:53", i, r)
		}
	}
	if in.CustomDomainDNSQuorum < 0 {
		ps.add("ingress.custom_domain_dns_quorum", "must not be negative (0 is a majority), got %d", in.CustomDomainDNSQuorum)
	}
}
