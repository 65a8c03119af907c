package ingress

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/berth-dev/berth/messages/policy"
)

// Labels berth writes besides Traefik's own.
const (
	LabelFQDN         = "fred.fqdn"          // the container's name under wildcard_domain
	LabelCustomDomain = "fred.custom_domain" // the tenant's custom domain, once its gate opened
)

// Config is what the labels need of the ingress.* keys.
type Config struct {
	WildcardDomain string
	Entrypoint     string
	CertResolver   string   // custom_domain_cert_resolver
	Middlewares    []string // custom_domain_middlewares
}

// Container is one instance as the labels see it.
type Container struct {
	Lease   string
	Service string
	Index   int
	Ports   []Port
	Hint    int // the manifest's ingress port, 0 when none is marked
	// Network is the name of the network the container is really on (a warm
	// pool network is not called fred-<lease>): Traefik reaches it there, so
	// the operator's Traefik must be connected to it — every lease and pool
	// network carries fred.managed=true and fred.network_scope, to select by.
	Network string
	// CustomDomain is the service's custom domain, set only once its DNS gate
	// opened (or the gate is disabled); "" gives the primary router alone.
	CustomDomain string
	// FQDN is the instance's pinned name ("": FQDN's, under the wildcard).
	FQDN string
}

// Labels is the Traefik label set of one container, with fred.fqdn (and
// fred.custom_domain): nil when the container has no routable TCP port.
//
// The primary router is per container (its own name, its own FQDN) with
// tls=true and no cert resolver: the wildcard certificate is Traefik's. The
// custom-domain router and service are per lease and service, named alike on
// every instance, so Traefik's Docker provider merges the instances into one
// load balancer behind the one domain; they carry the cert resolver (HTTP-01)
// and the configured middlewares.
func Labels(cfg Config, c Container) (map[string]string, error) {
	port, ok := SelectPort(c.Ports, c.Hint)
	if !ok {
		return nil, nil
	}
	if c.Network == "" {
		return nil, fmt.Errorf("ingress: %s/%d: no network named for Traefik", c.Service, c.Index)
	}
	label, err := Label(c.Lease, c.Service, c.Index)
	if err != nil {
		return nil, err
	}
	fqdn := c.FQDN
	if fqdn == "" {
		if fqdn, err = FQDN(c.Lease, c.Service, c.Index, cfg.WildcardDomain); err != nil {
			return nil, err
		}
	}
	l := map[string]string{
		"traefik.enable":         "true",
		"traefik.docker.network": c.Network,
		LabelFQDN:                fqdn,
	}
	name := "fred-" + label
	router(l, name, fqdn, cfg.Entrypoint, port)
	if c.CustomDomain == "" {
		return l, nil
	}
	domain, err := policy.ValidateCustomDomain(c.CustomDomain, cfg.WildcardDomain)
	if err != nil {
		return nil, err
	}
	custom := "fred-" + strings.ReplaceAll(c.Lease, "-", "") + "-" + c.Service + "-custom"
	router(l, custom, domain, cfg.Entrypoint, port)
	if cfg.CertResolver != "" {
		l["traefik.http.routers."+custom+".tls.certresolver"] = cfg.CertResolver
	}
	if len(cfg.Middlewares) > 0 {
		l["traefik.http.routers."+custom+".middlewares"] = strings.Join(cfg.Middlewares, ",")
	}
	l[LabelCustomDomain] = domain
	return l, nil
}

// router writes one router bound explicitly to its own service on port: an
// implicit binding would be ambiguous once a container has two services.
func router(l map[string]string, name, host, entrypoint string, port int) {
	r := "traefik.http.routers." + name
	l[r+".rule"] = "Host(`" + host + "`)"
	l[r+".entrypoints"] = entrypoint
	l[r+".tls"] = "true"
	l[r+".service"] = name
	l["traefik.http.services."+name+".loadbalancer.server.port"] = strconv.Itoa(port)
}
