// Package ingress is what berth writes for Traefik (the seed's "Ingress (Traefik
// Integration)"): each container's name under ingress.wildcard_domain, the port
// Traefik routes to, the router/service labels; a tenant's custom domain is
// checked against messages/policy. Pure Go: no Docker, no DNS; the engine and
// the lease call it.
package ingress

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/berth-dev/berth/messages/policy"
)

// MaxLabel and MaxName bound the names berth assigns (messages/policy).
const (
	MaxLabel = policy.MaxLabel
	MaxName  = policy.MaxName
)

// maxIndex bounds an instance index: a lease has at most 1024 instances.
const maxIndex = 99999

var (
	leasePattern   = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)
	servicePattern = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]*[a-z0-9])?$`)
)

// Label is one container's DNS label: "<service>-<index>-<lease hex>". The lease
// UUID is kept whole (32 hex digits) and fixed-length at the end, so two leases
// never share a name; within a lease (service, index) is distinct. A service
// name too long to fit is cut and given the first 6 hex digits of its SHA-256,
// so two long names with a common prefix still differ (LeaseFQDNs checks a
// lease's names are unique all the same).
func Label(lease, service string, index int) (string, error) {
	if !leasePattern.MatchString(lease) {
		return "", fmt.Errorf("ingress: lease %q is not a canonical UUID", lease)
	}
	if len(service) > MaxLabel || !servicePattern.MatchString(service) {
		return "", fmt.Errorf("ingress: service name %q is not a DNS label", service)
	}
	if index < 0 || index > maxIndex {
		return "", fmt.Errorf("ingress: instance index %d out of range", index)
	}
	suffix := "-" + strconv.Itoa(index) + "-" + strings.ReplaceAll(lease, "-", "")
	room := MaxLabel - len(suffix)
	if len(service) > room {
		sum := sha256.Sum256([]byte(service))
		tag := hex.EncodeToString(sum[:3])
		service = strings.TrimRight(service[:room-len(tag)-1], "-") + "-" + tag
	}
	return service + suffix, nil
}

// FQDN is one container's name: its Label under wildcard.
func FQDN(lease, service string, index int, wildcard string) (string, error) {
	label, err := Label(lease, service, index)
	if err != nil {
		return "", err
	}
	name := label + "." + strings.ToLower(strings.TrimSuffix(wildcard, "."))
	if len(name) > MaxName {
		return "", fmt.Errorf("ingress: %s is longer than %d characters", name, MaxName)
	}
	return name, nil
}

// LeaseFQDNs names every instance of a lease: service → quantity in, service →
// one FQDN per instance index out. It refuses a lease whose names would not all
// differ (only a cut service name could make two meet).
func LeaseFQDNs(lease string, quantities map[string]int, wildcard string) (map[string][]string, error) {
	out := make(map[string][]string, len(quantities))
	seen := map[string]string{}
	for svc, n := range quantities {
		names := make([]string, n)
		for i := range n {
			name, err := FQDN(lease, svc, i, wildcard)
			if err != nil {
				return nil, err
			}
			who := svc + "/" + strconv.Itoa(i)
			if other, dup := seen[name]; dup {
				return nil, fmt.Errorf("ingress: %s and %s would share the name %s", other, who, name)
			}
			seen[name], names[i] = who, name
		}
		out[svc] = names
	}
	return out, nil
}
