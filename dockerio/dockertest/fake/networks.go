package fake

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/berth-dev/berth/dockerio"
	"github.com/berth-dev/berth/dockerio/engine/labels"
)

type fakeNetwork struct {
	id     string
	name   string
	labels map[string]string
	seq    int64 // creation order
}

func (e *Engine) createNetworkLocked(name string, l map[string]string) string {
	e.seq++
	id := randomHex(32)
	n := &fakeNetwork{id: id, name: name, labels: copyMap(l), seq: e.seq}
	e.networks[id] = n
	index(e.netByName, name, id, n)
	return id
}

// EnsureNetwork mirrors the real engine: a same-named network is used only when
// it carries exactly our ownership labels, anything else is ErrForeignNetwork.
func (e *Engine) EnsureNetwork(ctx context.Context, spec dockerio.NetworkSpec) (string, error) {
	if err := e.enter(ctx, OpEnsureNetwork); err != nil {
		return "", err
	}
	if spec.Lease == "" {
		return "", fmt.Errorf("ensure network: empty lease")
	}
	name := dockerio.ProjectName(spec.Lease)
	inst, err := e.installation(spec.InstallationID)
	if err != nil {
		return "", fmt.Errorf("ensure network %s: %w", name, err)
	}
	spec.InstallationID = inst
	owner := labels.NetworkOwnership(spec)
	e.mu.Lock()
	defer e.mu.Unlock()
	var ours []*fakeNetwork
	for _, n := range e.netByName[name] {
		if !labels.HasAll(n.labels, owner) {
			return "", fmt.Errorf("network %s: %w", name, dockerio.ErrForeignNetwork)
		}
		ours = append(ours, n)
	}
	if len(ours) > 0 {
		slices.SortFunc(ours, func(a, b *fakeNetwork) int { return cmp.Compare(a.seq, b.seq) })
		return ours[0].id, nil
	}
	return e.createNetworkLocked(name, labels.Network(spec)), nil
}

// InspectNetwork reports the network with exactly this ID.
func (e *Engine) InspectNetwork(ctx context.Context, id string) (dockerio.Network, error) {
	return inspect(ctx, e, OpInspectNetwork, "network", id, e.networks, e.networkLocked)
}

func (e *Engine) networkLocked(n *fakeNetwork) dockerio.Network {
	return dockerio.Network{ID: n.id, Name: n.name, Labels: copyMap(n.labels), Containers: e.attachedLocked(n.id)}
}

// attachedLocked counts containers with an endpoint on the network: like Docker,
// only containers that are up hold one.
func (e *Engine) attachedLocked(networkID string) int {
	n := 0
	for _, c := range e.byNetwork[networkID] {
		if isUp(c.c.State) {
			n++
		}
	}
	return n
}

func isUp(state string) bool {
	return state == "running" || state == "paused" || state == "restarting"
}

// LeaseNetworks lists this installation's managed lease networks, sorted by name.
func (e *Engine) LeaseNetworks(ctx context.Context) ([]dockerio.Network, error) {
	installationID := e.opts.InstallationID
	if err := e.enter(ctx, OpLeaseNetworks); err != nil {
		return nil, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	want := map[string]string{
		dockerio.LabelManaged:      "true",
		dockerio.LabelNetworkScope: labels.NetworkScopeLease,
		dockerio.LabelInstallation: installationID,
	}
	var out []dockerio.Network
	for _, n := range e.networks {
		if labels.HasAll(n.labels, want) {
			out = append(out, e.networkLocked(n))
		}
	}
	slices.SortFunc(out, func(a, b dockerio.Network) int {
		return cmp.Or(strings.Compare(a.Name, b.Name), strings.Compare(a.ID, b.ID))
	})
	return out, nil
}

// AdoptedNetworks lists the adopted fred v0.13 per-tenant networks: none, and
// like the real engine without an adoption it asks nothing of Docker. The fake
// adopts nothing; the real engine's adoption is proven in dockerio/engine.
func (e *Engine) AdoptedNetworks(context.Context) ([]dockerio.Network, error) {
	return nil, nil
}

// RemoveNetwork removes this installation's lease or pool network with exactly this ID;
// absent is success, another's is refused (dockerio.ErrForeignObject), one with
// running containers attached is refused (as Docker does).
func (e *Engine) RemoveNetwork(ctx context.Context, id string) error {
	if err := e.enter(ctx, OpRemoveNetwork); err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	n, ok := e.networks[id]
	if !ok {
		return nil
	}
	scope := n.labels[dockerio.LabelNetworkScope]
	if !e.ours(n.labels) || (scope != labels.NetworkScopeLease && scope != labels.NetworkScopePool) {
		return fmt.Errorf("remove network %s (%s, installation %q): %w", n.name, id, n.labels[dockerio.LabelInstallation], dockerio.ErrForeignObject)
	}
	if k := e.attachedLocked(id); k > 0 {
		return fmt.Errorf("remove network %s: error while removing network: network %s id %s has active endpoints (%d)", n.name, n.name, id, k)
	}
	delete(e.networks, id)
	unindex(e.netByName, n.name, id)
	return nil
}

// AddForeignLeaseNetwork creates the lease network fred-<lease> exactly as
// another installation's berth would (its ownership labels, its installation
// ID) and returns its ID: this fake's EnsureNetwork for the lease then fails with
// dockerio.ErrForeignNetwork, and its LeaseNetworks and RemoveNetwork leave it alone.
func (e *Engine) AddForeignLeaseNetwork(lease, installation string) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.createNetworkLocked(dockerio.ProjectName(lease), labels.Network(dockerio.NetworkSpec{
		Lease: lease, Tenant: "foreign-tenant", BackendName: "docker", InstallationID: installation}))
}

// CreatePoolNetwork creates a warm-pool network as the real engine does.
func (e *Engine) CreatePoolNetwork(ctx context.Context) (dockerio.Network, error) {
	if err := e.enter(ctx, OpCreatePool); err != nil {
		return dockerio.Network{}, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	l := labels.PoolNetworkOwnership(e.backendName(), e.opts.InstallationID)
	name := labels.PoolNetworkPrefix + randomHex(12)
	id := e.createNetworkLocked(name, l)
	return e.networkLocked(e.networks[id]), nil
}

// PoolNetworks lists this installation's pool networks, sorted by name.
func (e *Engine) PoolNetworks(ctx context.Context) ([]dockerio.Network, error) {
	if err := e.enter(ctx, OpPoolNetworks); err != nil {
		return nil, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []dockerio.Network
	for _, n := range e.networks {
		if labels.OwnedPoolNetwork(n.name, n.labels, e.backendName(), e.opts.InstallationID) {
			out = append(out, dockerio.Network{ID: n.id, Name: n.name, Labels: copyMap(n.labels)})
		}
	}
	slices.SortFunc(out, func(a, b dockerio.Network) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// SetBridge sets what DefaultBridge answers and what a bridged launch finds
// (default: isolated, 10.200.0.0/20, room for 4000).
func (e *Engine) SetBridge(facts dockerio.BridgeFacts) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.bridge = facts
}

// DefaultBridge answers what SetBridge set.
func (e *Engine) DefaultBridge(ctx context.Context) (dockerio.BridgeFacts, error) {
	if err := e.enter(ctx, OpDefaultBridge); err != nil {
		return dockerio.BridgeFacts{}, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.bridge, nil
}

// verifyBridgeLocked refuses a bridged launch once the bridge is not isolated,
// as the real engine does.
func (e *Engine) verifyBridgeLocked(plan *dockerio.Plan) ([]string, error) {
	order, err := validatePlan(*plan)
	if err != nil {
		return nil, err
	}
	if !e.bridge.Isolated {
		return nil, fmt.Errorf("verify the default bridge: %s: %w", e.bridge.Reason, dockerio.ErrBridgeNotIsolated)
	}
	if len(plan.Services) != 1 || plan.Services[0].Quantity != 1 {
		return nil, fmt.Errorf("plan: the default bridge carries single-container leases only")
	}
	return order, nil
}

// FredV013Objects lists the containers and networks of the backend name that
// fred v0.13 made (dockerio.MadeByFredV013): the fake holds one only when a
// test made it so.
func (e *Engine) FredV013Objects(ctx context.Context) ([]dockerio.FredObject, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	backend := e.opts.BackendName
	var out []dockerio.FredObject
	for _, fc := range e.containers {
		if dockerio.MadeByFredV013(fc.c.Labels, backend) {
			out = append(out, dockerio.FredObject{Kind: "container", ID: fc.c.ID, Name: fc.c.Name, Lease: fc.c.Labels[dockerio.LabelLease]})
		}
	}
	for _, n := range e.networks {
		if dockerio.MadeByFredV013(n.labels, backend) {
			out = append(out, dockerio.FredObject{Kind: "network", ID: n.id, Name: n.name})
		}
	}
	dockerio.SortFredObjects(out)
	return out, nil
}
