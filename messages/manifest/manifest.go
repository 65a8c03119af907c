// Package manifest parses and validates tenant manifests and lease items exactly
// per CONTRACT.md ("Tenant manifest", items/service_name rules). Every refusal is a
// *messages.Refusal whose Kind is messages.ErrInvalidManifest, ErrImageNotAllowed
// or ErrBadRequest and whose Msg is tenant-safe and under 512 bytes.
//
// Choices where the contract is silent (each one errs toward accepting what has a
// single unambiguous meaning, since a 400 closes the lease on-chain):
//   - JSON: exact-case field names; duplicate keys, trailing data, invalid UTF-8,
//     nesting beyond 16 levels or more than 100k values are refused; a field whose
//     value is null counts as absent.
//   - ports keys and expose entries: "N/tcp", "N/udp" or bare "N" (tcp, as in
//     Dockerfile EXPOSE and Compose), stored canonically as "N/proto"; no ranges,
//     no leading zeros. Expose ranges are refused because Docker expands them port
//     by port.
//   - depends_on entries: an object whose condition defaults to service_started
//     (Compose's default), or null meaning the same.
//   - user: each of user and group may independently be numeric or a name.
//   - health_check durations must be 0 or ≥ 1ms (Docker refuses smaller ones at
//     create time, which would make the lease fail after admission instead).
//   - an empty allowed_registries list allows nothing (fail closed).
package manifest

import (
	"strconv"

	"github.com/berth-dev/berth/messages"
)

// Options configure Build.
type Options struct {
	// AllowedRegistries are registry hosts such as "docker.io", "ghcr.io" or
	// "127.0.0.1:5000"; compared after the same normalisation as image references
	// ("index.docker.io" allows "nginx"). Empty allows nothing.
	AllowedRegistries []string
}

// Lease is a validated, normalised lease: items with service names filled in, and
// one Service per item.
type Lease struct {
	Items    []messages.LeaseItem // normalised (lone unnamed item → "app"), in request order
	Services map[string]*Service  // keyed by service name; exactly the items' service names
	Flat     bool                 // the payload was the flat form
}

// Build parses the base64-decoded payload and validates it against the items.
// Item problems are ErrBadRequest; manifest problems, including items ↔ services
// mismatches and Compose key collisions, are ErrInvalidManifest; an image from a
// registry outside opts.AllowedRegistries is ErrImageNotAllowed (reported only when
// the manifest is otherwise valid).
func Build(payload []byte, items []messages.LeaseItem, opts Options) (*Lease, error) {
	norm, err := NormalizeItems(items)
	if err != nil {
		return nil, err
	}
	if len(payload) == 0 {
		return nil, invalid("manifest is empty")
	}
	if len(payload) > MaxPayloadBytes {
		return nil, invalid("manifest exceeds %d bytes", MaxPayloadBytes)
	}
	root, err := parseTree(payload)
	if err != nil {
		return nil, err
	}
	if root.kind != kindObject {
		return nil, invalid("manifest must be a JSON object, not %s", root.kind)
	}
	names, nodes, flat, err := splitForms(root)
	if err != nil {
		return nil, err
	}
	if err := matchItems(names, norm, flat); err != nil {
		return nil, err
	}
	lease := &Lease{Items: norm, Services: make(map[string]*Service, len(names)), Flat: flat}
	for i, name := range names {
		svc, err := decodeService(name, nodes[i], !flat)
		if err != nil {
			return nil, err
		}
		lease.Services[name] = svc
	}
	if err := checkComposeKeys(norm); err != nil {
		return nil, err
	}
	if err := checkDependencies(lease.Services); err != nil {
		return nil, err
	}
	allowed := allowSet(opts.AllowedRegistries)
	for _, name := range names {
		host, _ := parseReference(lease.Services[name].Image)
		if _, ok := allowed[host]; !ok {
			return nil, refuse(messages.ErrImageNotAllowed,
				"service %q: image registry %s is not allowed on this provider", name, excerpt(host))
		}
	}
	return lease, nil
}

// splitForms returns the services of a stack manifest, or the flat manifest
// wrapped as the single service "app", in document order.
func splitForms(root *node) (names []string, nodes []*node, flat bool, err error) {
	services := root.get("services")
	if services == nil {
		return []string{DefaultService}, []*node{root}, true, nil
	}
	for _, key := range root.keys {
		if key != "services" {
			return nil, nil, false, invalid("unknown top-level field %s: a stack manifest has only \"services\"", excerpt(key))
		}
	}
	if services.kind != kindObject || len(services.keys) == 0 {
		return nil, nil, false, invalid("services must be an object with at least one service")
	}
	for _, name := range services.keys {
		if !validServiceName(name) {
			return nil, nil, false, invalid("service name %s must match ^[a-z0-9]([a-z0-9-]*[a-z0-9])?$ and be at most %d characters",
				excerpt(name), maxServiceNameLen)
		}
	}
	return services.keys, services.kids, false, nil
}

// matchItems proves the manifest's services and the items' service names are the
// same set (both are already free of duplicates).
func matchItems(names []string, items []messages.LeaseItem, flat bool) error {
	inManifest := make(map[string]struct{}, len(names))
	for _, n := range names {
		inManifest[n] = struct{}{}
	}
	inItems := make(map[string]struct{}, len(items))
	for _, it := range items {
		inItems[it.ServiceName] = struct{}{}
		if _, ok := inManifest[it.ServiceName]; !ok {
			if flat {
				return invalid("lease item service_name %q has no service in the manifest: a flat manifest defines only the service %q",
					it.ServiceName, DefaultService)
			}
			if len(items) == 1 && it.ServiceName == DefaultService {
				return invalid("lease item service_name %q has no service in the manifest (a lone item without service_name means %q)",
					it.ServiceName, DefaultService)
			}
			return invalid("lease item service_name %q has no service in the manifest", it.ServiceName)
		}
	}
	for _, n := range names {
		if _, ok := inItems[n]; !ok {
			return invalid("service %q has no lease item; manifest services and items must match one to one", n)
		}
	}
	return nil
}

// ComposeKey names one instance's Compose service: quantity 1 → "<svc>",
// quantity n>1 → "<svc>-<i>" (i = 0..n-1). It matches dockerio.ComposeKeys.
func ComposeKey(service string, quantity, index int) string {
	if quantity == 1 {
		return service
	}
	return service + "-" + strconv.Itoa(index)
}

// checkComposeKeys proves quantity expansion gives every instance its own Compose
// key (e.g. "web" quantity 2 → web-0, web-1 collides with a service "web-0").
func checkComposeKeys(items []messages.LeaseItem) error {
	owner := make(map[string]string)
	for _, it := range items {
		for i := 0; i < it.Quantity; i++ {
			key := ComposeKey(it.ServiceName, it.Quantity, i)
			if other, dup := owner[key]; dup {
				return invalid("services %q and %q both expand to the Compose service %q; rename one", other, it.ServiceName, key)
			}
			owner[key] = it.ServiceName
		}
	}
	return nil
}
