// Package labels is the single definition of the labels and names berth writes on
// the Docker objects it creates, and of how it reads them back. The real engine
// (dockerio/engine) and the in-memory fake (dockerio/dockertest/fake) both use it, so the fake
// cannot drift from what Docker actually carries. Pure Go: no Docker SDK here.
package labels

import (
	"fmt"
	"maps"
	"strconv"
	"strings"
	"time"

	"github.com/berth-dev/berth/dockerio"
	"github.com/berth-dev/berth/dockerio/ingress"
)

// NetworkScopeLease is the fred.network_scope value of a per-lease network.
const NetworkScopeLease = "lease"

// NetworkScopePool is the fred.network_scope value of a warm-pool network: made
// before any lease needs it, so it names no lease; which lease holds it is in
// the netpool journal (Docker can neither rename a network nor relabel it).
const NetworkScopePool = "pool"

// PoolNetworkPrefix starts every warm-pool network's name.
const PoolNetworkPrefix = "berth-pool-"

// PoolNetworkOwnership is the label set that proves a pool network is ours, and
// the set it is created with.
func PoolNetworkOwnership(backend, installation string) map[string]string {
	return map[string]string{
		dockerio.LabelManaged:      "true",
		dockerio.LabelNetworkScope: NetworkScopePool,
		dockerio.LabelBackend:      backend,
		dockerio.LabelInstallation: installation,
	}
}

// OwnedPoolNetwork reports whether a network is this installation's pool
// network: its name, our ownership labels and no lease label.
func OwnedPoolNetwork(name string, l map[string]string, backend, installation string) bool {
	_, leased := l[dockerio.LabelLease]
	return strings.HasPrefix(name, PoolNetworkPrefix) && !leased && HasAll(l, PoolNetworkOwnership(backend, installation))
}

// Container returns every label of one instance of svc: the tenant's manifest
// labels first, then the fred.* labels, so a tenant label can never shadow ours
// (the manifest validator already refuses reserved prefixes; this is the backstop).
func Container(plan dockerio.Plan, svc dockerio.ServicePlan, index int, createdAt time.Time) map[string]string {
	l := make(map[string]string, len(svc.Labels)+20)
	maps.Copy(l, svc.Labels)
	l[dockerio.LabelManaged] = "true"
	l[dockerio.LabelLease] = plan.Lease
	l[dockerio.LabelTenant] = plan.Tenant
	l[dockerio.LabelProvider] = plan.ProviderUUID
	l[dockerio.LabelSKU] = svc.SKU
	l[dockerio.LabelCreatedAt] = createdAt.UTC().Format(time.RFC3339)
	l[dockerio.LabelService] = svc.Name
	l[dockerio.LabelInstance] = strconv.Itoa(index)
	l[dockerio.LabelFailCount] = strconv.Itoa(plan.FailCount)
	l[dockerio.LabelCallbackURL] = plan.CallbackURL
	l[dockerio.LabelLifecycleURL] = plan.LifecycleURL
	l[dockerio.LabelRuntimeContract] = strconv.Itoa(dockerio.ContractOf(plan))
	l[dockerio.LabelMaintenanceID] = plan.MaintenanceID // empty for a provision launch
	l[dockerio.LabelBackend] = plan.BackendName
	l[dockerio.LabelImageRef] = svc.Image
	l[dockerio.LabelImageID] = svc.ImageID
	l[dockerio.LabelInstallation] = plan.InstallationID
	l[dockerio.LabelOperationID] = plan.OperationID
	l[dockerio.LabelGeneration] = strconv.FormatUint(plan.Generation, 10)
	// CheckIngress refused a plan whose labels cannot be made before any
	// container is: what is left to do here cannot fail.
	il, _ := Ingress(plan, svc, index)
	maps.Copy(l, il)
	return l
}

// Ingress is one instance's Traefik labels with fred.fqdn (and
// fred.custom_domain): nil when ingress is off or the service has no routable
// TCP port.
func Ingress(plan dockerio.Plan, svc dockerio.ServicePlan, index int) (map[string]string, error) {
	if plan.Ingress == nil {
		return nil, nil
	}
	ports, hint := dockerio.ServicePorts(&svc.Service)
	c := ingress.Container{Lease: plan.Lease, Service: svc.Name, Index: index,
		Ports: ports, Hint: hint, Network: plan.NetworkName, CustomDomain: svc.CustomDomain}
	if index < len(svc.FQDNs) {
		c.FQDN = svc.FQDNs[index]
	}
	return ingress.Labels(*plan.Ingress, c)
}

// CheckIngress refuses a plan with an instance whose ingress labels cannot be
// made (a name that is no DNS label, no network name, a bad custom domain).
func CheckIngress(plan dockerio.Plan) error {
	if plan.Ingress == nil {
		return nil
	}
	quantities := map[string]int{}
	for _, svc := range plan.Services {
		quantities[svc.Name] = svc.Quantity
		for i := range svc.Quantity {
			if _, err := Ingress(plan, svc, i); err != nil {
				return fmt.Errorf("plan: %w", err)
			}
		}
	}
	if _, err := ingress.LeaseFQDNs(plan.Lease, quantities, plan.Ingress.WildcardDomain); err != nil {
		return fmt.Errorf("plan: %w", err)
	}
	return nil
}

// NetworkOwnership is the label set that proves a lease network is ours. A network
// named fred-<lease> is used only when every one of these matches exactly.
func NetworkOwnership(spec dockerio.NetworkSpec) map[string]string {
	return map[string]string{
		dockerio.LabelManaged:      "true",
		dockerio.LabelNetworkScope: NetworkScopeLease,
		dockerio.LabelLease:        spec.Lease,
		dockerio.LabelBackend:      spec.BackendName,
		dockerio.LabelInstallation: spec.InstallationID,
	}
}

// Network is the label set a lease network is created with: ownership plus tenant.
func Network(spec dockerio.NetworkSpec) map[string]string {
	l := NetworkOwnership(spec)
	l[dockerio.LabelTenant] = spec.Tenant
	return l
}

// HasAll reports whether have carries every key of want with the same value.
func HasAll(have, want map[string]string) bool {
	for k, v := range want {
		got, ok := have[k]
		if !ok || got != v {
			return false
		}
	}
	return true
}

// Instance is the identity a managed container's labels claim.
type Instance struct {
	Lease       string
	Service     string
	Index       int
	OperationID string
	Generation  uint64
	ImageRef    string
}

// ParseInstance reads the identity labels of a container. ok is false when the
// container is not managed or its service/index labels are missing or malformed.
// A missing or malformed generation reads as 0 (it is diagnostic, not identity).
func ParseInstance(l map[string]string) (Instance, bool) {
	if l[dockerio.LabelManaged] != "true" || l[dockerio.LabelLease] == "" || l[dockerio.LabelService] == "" {
		return Instance{}, false
	}
	idx, err := strconv.Atoi(l[dockerio.LabelInstance])
	if err != nil || idx < 0 {
		return Instance{}, false
	}
	gen, _ := strconv.ParseUint(l[dockerio.LabelGeneration], 10, 64)
	return Instance{
		Lease:       l[dockerio.LabelLease],
		Service:     l[dockerio.LabelService],
		Index:       idx,
		OperationID: l[dockerio.LabelOperationID],
		Generation:  gen,
		ImageRef:    l[dockerio.LabelImageRef],
	}, true
}

// AgreesWithComposeKey reports whether a container's claimed (service, index) is
// what dockerio.ComposeKeys would have produced for its Compose service key:
// the bare name for a quantity-1 service (index 0), <name>-<index> otherwise.
func AgreesWithComposeKey(key, service string, index int) bool {
	if key == service {
		return index == 0
	}
	return key == service+"-"+strconv.Itoa(index)
}

// HealthFromStatus parses the health state out of Docker's list Status text
// ("Up 3 minutes (healthy)", "Up 2 seconds (health: starting)"); "" when the
// container has no health check or is not running.
func HealthFromStatus(status string) string {
	switch {
	case strings.HasSuffix(status, "(healthy)"):
		return "healthy"
	case strings.HasSuffix(status, "(unhealthy)"):
		return "unhealthy"
	case strings.HasSuffix(status, "(health: starting)"):
		return "starting"
	}
	return ""
}
