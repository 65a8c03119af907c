package config

import (
	"reflect"
	"testing"
)

const ingressOn = "ingress:\n  enabled: true\n  wildcard_domain: apps.example.com\n  entrypoint: websecure\n"

func TestIngress_EnabledWithRequiredKeys_LoadsWithSeedDefaults(t *testing.T) {
	c := mustLoad(t, ingressOn)
	want := Ingress{Enabled: true, WildcardDomain: "apps.example.com", Entrypoint: "websecure",
		CustomDomainCertResolver: "http01", CustomDomainMiddlewares: []string{"security-headers@file"},
		CustomDomainDNSResolvers: []string{"1.1.1.1:53", "8.8.8.8:53", "9.9.9.9:53"}}
	if !reflect.DeepEqual(c.Ingress, want) {
		t.Fatalf("ingress %+v, want %+v", c.Ingress, want)
	}
	c = mustLoad(t, "", "BERTH_INGRESS__ENABLED=true", "BERTH_INGRESS__WILDCARD_DOMAIN=apps.example.com", "BERTH_INGRESS__ENTRYPOINT=websecure")
	if !c.Ingress.Enabled || c.Ingress.Entrypoint != "websecure" {
		t.Fatalf("from the environment: %+v", c.Ingress)
	}
}

func TestIngress_Rules(t *testing.T) {
	runRuleCases(t, []ruleCase{
		{"custom settings accepted", ingressOn + "  custom_domain_cert_resolver: le\n  custom_domain_middlewares: [a@file, b@docker]\n" +
			"  custom_domain_dns_resolvers: [\"127.0.0.53:53\", \"[2606:4700:4700::1111]:53\"]\n  custom_domain_dns_quorum: 5", nil, ""},
		{"check disabled needs no resolvers", ingressOn + "  custom_domain_dns_check_disabled: true\n  custom_domain_dns_resolvers: []", nil, ""},
		{"network isolation off refused with the reason", ingressOn + "network_isolation: false", nil,
			"ingress.enabled: requires network_isolation|lease's own network"},
		{"wildcard domain missing", "ingress:\n  enabled: true\n  entrypoint: websecure", nil, "ingress.wildcard_domain: is required"},
		{"entrypoint missing", "ingress:\n  enabled: true\n  wildcard_domain: apps.example.com", nil, "ingress.entrypoint: is required"},
		{"wildcard domain a single label", "ingress:\n  enabled: true\n  entrypoint: websecure\n  wildcard_domain: localhost", nil, "ingress.wildcard_domain:|at least two labels"},
		{"wildcard domain with a star", "ingress:\n  enabled: true\n  entrypoint: websecure\n  wildcard_domain: \"*.apps.example.com\"", nil, "ingress.wildcard_domain:|only ASCII"},
		{"wildcard domain an IP", "ingress:\n  enabled: true\n  entrypoint: websecure\n  wildcard_domain: 203.0.113.7", nil, "ingress.wildcard_domain:|IP address"},
		{"two entrypoints", "ingress:\n  enabled: true\n  wildcard_domain: apps.example.com\n  entrypoint: web,websecure", nil, "ingress.entrypoint:|one Traefik entrypoint"},
		{"empty middleware", ingressOn + "  custom_domain_middlewares: [\"\"]", nil, "ingress.custom_domain_middlewares: entry 0"},
		{"resolver without a port", ingressOn + "  custom_domain_dns_resolvers: [1.1.1.1]", nil, "ingress.custom_domain_dns_resolvers: entry 0|ip:port"},
		{"resolver by name", ingressOn + "  custom_domain_dns_resolvers: [\"dns.google:53\"]", nil, "ingress.custom_domain_dns_resolvers: entry 0"},
		{"no resolvers", ingressOn + "  custom_domain_dns_resolvers: []", nil, "ingress.custom_domain_dns_resolvers: needs at least one"},
		{"negative quorum", ingressOn + "  custom_domain_dns_quorum: -1", nil, "ingress.custom_domain_dns_quorum: must not be negative"},
		{"off: anything goes", "ingress:\n  enabled: false\n  wildcard_domain: x\n  custom_domain_dns_resolvers: [bad]", nil, ""},
	})
}

// Enabled with its required keys loads, from the file or the environment, and
// is never reported as an unknown key or an unsupported feature.
func TestIngress_EnabledLoads_FromFileAndEnvironment(t *testing.T) {
	runRuleCases(t, []ruleCase{
		{"ingress.enabled file", ingressOn, nil, ""},
		{"ingress.enabled env", "", []string{"BERTH_INGRESS__ENABLED=true", "BERTH_INGRESS__WILDCARD_DOMAIN=apps.example.com",
			"BERTH_INGRESS__ENTRYPOINT=websecure"}, ""},
	})
	if list := problemsOf(t, "ingress:\n  enabled: true"); findProblem(list, "unknown key") != "" || findProblem(list, "not supported") != "" {
		t.Fatalf("enabled without its keys: %q, want only the missing keys", list)
	}
}
