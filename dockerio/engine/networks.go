package engine

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"

	"github.com/berth-dev/berth/dockerio"
	"github.com/berth-dev/berth/dockerio/engine/labels"
)

// poolExhaustedMarker is how dockerd 20.10 reports that no address pool has room
// for another bridge network.
const poolExhaustedMarker = "could not find an available, non-overlapping IPv4 address pool"

// EnsureNetwork returns the ID of the lease network fred-<lease>, creating it when
// absent. An existing network of that name is used only when it carries exactly
// our ownership labels; anything else fails with dockerio.ErrForeignNetwork and is
// never touched.
//
// The create comes first: a new lease (the common case) costs one request, and
// the caller's launch verifies the network by its exact ID right before Compose
// attaches to it. The SDK asks a pre-1.44 daemon to refuse a duplicate name, so a
// name already held answers 409, and only then is the name looked up (our network
// is reused, the oldest of ours kept and an empty surplus removed; anything else
// is foreign). Calls for one lease are serialised here, and one installation runs
// one berthd (the data-dir lock and the location-bound identity), so a duplicate
// of ours can only come from an earlier attempt's create still in dockerd — a
// process killed mid-create, whose request dockerd carries out anyway, next to
// ours, past its best-effort duplicate check. A lease's first attempt has no
// earlier one; any later attempt asks for spec.Recheck, and the name is looked
// up after the create until two looks agree (the oldest of ours kept).
func (e *Engine) EnsureNetwork(ctx context.Context, spec dockerio.NetworkSpec) (string, error) {
	if spec.Lease == "" {
		return "", fmt.Errorf("ensure network: empty lease")
	}
	if spec.BackendName == "" {
		spec.BackendName = e.opts.BackendName
	}
	name := dockerio.ProjectName(spec.Lease)
	inst, err := e.installation(spec.InstallationID)
	if err != nil {
		return "", fmt.Errorf("ensure network %s: %w", name, err)
	}
	spec.InstallationID = inst
	unlock, err := e.netLocks.lock(ctx, spec.Lease)
	if err != nil {
		return "", fmt.Errorf("ensure network %s: %w", name, err)
	}
	defer unlock()

	for attempt := 1; ; attempt++ {
		created, err := e.docker.NetworkCreate(ctx, name, network.CreateOptions{
			Driver: "bridge",
			Labels: labels.Network(spec),
		})
		switch {
		case err == nil && spec.Recheck:
			return e.settleLeaseNetwork(ctx, name, spec)
		case err == nil:
			return created.ID, nil
		case strings.Contains(err.Error(), poolExhaustedMarker):
			return "", fmt.Errorf("create network %s: %w: %w", name, dockerio.ErrAddressPoolExhausted, err)
		case !isConflict(err):
			return "", dockerErr("create network "+name, err)
		}
		// The name is held: by our network of an earlier attempt, or by someone else.
		id, err := e.findLeaseNetwork(ctx, name, spec)
		if err != nil || id != "" {
			return id, err
		}
		// Released between the create and the look-up: create again.
		if attempt == 3 {
			return "", fmt.Errorf("ensure network %s: %w: the name is refused at create yet nothing holds it", name, cerrdefs.ErrNotFound)
		}
	}
}

// settleLeaseNetwork looks name up after a create that may have raced another
// creator's (dockerd's duplicate check is best effort: a killed process's create
// can land next to ours) until two looks a pause apart agree; the oldest of ours
// is kept, the empty surplus removed.
func (e *Engine) settleLeaseNetwork(ctx context.Context, name string, spec dockerio.NetworkSpec) (string, error) {
	var prev string
	for attempt := 0; ; attempt++ {
		id, err := e.findLeaseNetwork(ctx, name, spec)
		if err != nil {
			return "", err
		}
		if id == "" {
			return "", fmt.Errorf("ensure network %s: %w: vanished right after create", name, cerrdefs.ErrNotFound)
		}
		if id == prev || attempt == networkSettleChecks {
			return id, nil
		}
		prev = id
		select {
		case <-time.After(networkSettlePause):
		case <-ctx.Done():
			return "", fmt.Errorf("ensure network %s: %w", name, ctx.Err())
		}
	}
}

// Looks after a create that may have raced: at most networkSettleChecks more,
// networkSettlePause apart.
const (
	networkSettleChecks = 5
	networkSettlePause  = 100 * time.Millisecond
)

// findLeaseNetwork looks name up exactly. It returns "" when no network has the
// name, ErrForeignNetwork when any holder is not ours, else the oldest of ours
// (verified by ID), removing our empty surplus duplicates.
func (e *Engine) findLeaseNetwork(ctx context.Context, name string, spec dockerio.NetworkSpec) (string, error) {
	for attempt := 1; ; attempt++ {
		id, err := e.findLeaseNetworkOnce(ctx, name, spec)
		// The chosen network vanished between list and verify: a concurrent
		// creator removed it as its surplus. Look again.
		if cerrdefs.IsNotFound(err) && attempt < 3 && ctx.Err() == nil {
			continue
		}
		return id, err
	}
}

func (e *Engine) findLeaseNetworkOnce(ctx context.Context, name string, spec dockerio.NetworkSpec) (string, error) {
	list, err := e.docker.NetworkList(ctx, network.ListOptions{Filters: filters.NewArgs(filters.Arg("name", name))})
	if err != nil {
		return "", dockerErr("list networks named "+name, err)
	}
	owner := labels.NetworkOwnership(spec)
	var ours []network.Summary
	for _, n := range list {
		if n.Name != name { // the name filter matches substrings
			continue
		}
		if !ownedLeaseNetwork(n, owner) {
			return "", fmt.Errorf("network %s (%s): %w", name, trimID(n.ID), dockerio.ErrForeignNetwork)
		}
		ours = append(ours, n)
	}
	if len(ours) == 0 {
		return "", nil
	}
	slices.SortFunc(ours, func(a, b network.Summary) int {
		return cmp.Or(a.Created.Compare(b.Created), strings.Compare(a.ID, b.ID))
	})
	keep := ours[0]
	for _, n := range ours[1:] {
		e.removeSurplusNetwork(ctx, n.ID, name)
	}
	if err := e.verifyNetwork(ctx, keep.ID, name, spec); err != nil {
		return "", err
	}
	return keep.ID, nil
}

func ownedLeaseNetwork(n network.Summary, owner map[string]string) bool {
	return n.Driver == "bridge" && n.Scope == "local" && labels.HasAll(n.Labels, owner)
}

// removeSurplusNetwork removes a duplicate of ours; it never removes one with
// containers attached (Docker refuses that anyway) and only logs failures: the
// reclaimer's sweep gets another chance at it.
func (e *Engine) removeSurplusNetwork(ctx context.Context, id, name string) {
	if err := e.docker.NetworkRemove(ctx, id); err != nil && !isNotFound(err) {
		e.log.Warn().Err(err).Str("network", name).Str("network_id", id).Msg("could not remove duplicate lease network")
		return
	}
	e.log.Info().Str("network", name).Str("network_id", id).Msg("removed duplicate lease network")
}

// verifyNetwork inspects id and proves it is the lease network: exact ID, name,
// driver and ownership labels.
func (e *Engine) verifyNetwork(ctx context.Context, id, name string, spec dockerio.NetworkSpec) error {
	n, err := e.docker.NetworkInspect(ctx, id, network.InspectOptions{})
	if err != nil {
		return dockerErr("verify network "+name, err)
	}
	if n.ID != id || n.Name != name {
		return fmt.Errorf("verify network %s: %w: %s resolves to %s (%s)", name, dockerio.ErrForeignNetwork, trimID(id), n.Name, trimID(n.ID))
	}
	if !ownedLeaseNetwork(n, labels.NetworkOwnership(spec)) {
		return fmt.Errorf("verify network %s (%s): %w", name, trimID(id), dockerio.ErrForeignNetwork)
	}
	return nil
}

// InspectNetwork reports the network whose full ID is id; a name or an ID prefix
// that happens to resolve is cerrdefs.ErrNotFound.
func (e *Engine) InspectNetwork(ctx context.Context, id string) (dockerio.Network, error) {
	n, err := e.docker.NetworkInspect(ctx, id, network.InspectOptions{})
	if err != nil {
		return dockerio.Network{}, dockerErr("inspect network "+trimID(id), err)
	}
	if n.ID != id {
		return dockerio.Network{}, fmt.Errorf("inspect network %s: %w: no network has exactly this ID", trimID(id), cerrdefs.ErrNotFound)
	}
	return toNetwork(n), nil
}

func toNetwork(n network.Inspect) dockerio.Network {
	return dockerio.Network{ID: n.ID, Name: n.Name, Labels: n.Labels, Containers: len(n.Containers)}
}

// LeaseNetworks lists this installation's managed lease networks with their
// attached-container counts (a list does not carry them on API 1.41, so each is
// inspected). Sorted by name.
func (e *Engine) LeaseNetworks(ctx context.Context) ([]dockerio.Network, error) {
	return e.scopeNetworks(ctx, labels.NetworkScopeLease, func(s network.Summary) (dockerio.Network, bool, error) {
		n, err := e.docker.NetworkInspect(ctx, s.ID, network.InspectOptions{})
		if isNotFound(err) {
			return dockerio.Network{}, false, nil // removed since the list
		}
		if err != nil {
			return dockerio.Network{}, false, dockerErr("inspect network "+s.Name, err)
		}
		return toNetwork(n), true, nil
	})
}

// RemoveNetwork removes this installation's lease or pool network, or an adopted
// fred v0.13 per-tenant network, whose full ID is id. Idempotent: when no network
// has exactly this ID there is nothing to remove. A network that is not ours is
// refused with dockerio.ErrForeignObject and left alone. A network with containers
// attached is refused by Docker and reported; an adopted one is refused here
// while Docker lists any container on it, running or not (Docker would let a
// stopped one be stranded).
func (e *Engine) RemoveNetwork(ctx context.Context, id string) error {
	n, err := e.docker.NetworkInspect(ctx, id, network.InspectOptions{})
	if isNotFound(err) {
		return nil
	}
	if err != nil {
		return dockerErr("remove network "+trimID(id), err)
	}
	if n.ID != id {
		return nil
	}
	scope := n.Labels[dockerio.LabelNetworkScope]
	switch {
	case e.adoptedNetwork(n):
		attached, err := e.attachedContainers(ctx, n.ID)
		if err != nil {
			return fmt.Errorf("remove adopted network %s: %w", n.Name, err)
		}
		if attached > 0 {
			return fmt.Errorf("remove adopted network %s (%s): %d containers attached", n.Name, trimID(id), attached)
		}
	case !e.ours(n.Labels) || (scope != labels.NetworkScopeLease && scope != labels.NetworkScopePool):
		return fmt.Errorf("remove network %s (%s, installation %q): %w", n.Name, trimID(id),
			n.Labels[dockerio.LabelInstallation], dockerio.ErrForeignObject)
	}
	if err := e.docker.NetworkRemove(ctx, n.ID); err != nil && !isNotFound(err) {
		return dockerErr("remove network "+n.Name, err)
	}
	return nil
}

// AdoptedNetworks lists the adopted fred v0.13 per-tenant networks that still
// exist (Options.Adopted), each with the containers Docker lists attached to it
// in any state. Nothing is asked of Docker when the allow-list names no network.
// Sorted by name.
func (e *Engine) AdoptedNetworks(ctx context.Context) ([]dockerio.Network, error) {
	if !e.adoptsNetworks() {
		return nil, nil
	}
	list, err := e.docker.NetworkList(ctx, network.ListOptions{Filters: e.fredFilters()})
	if err != nil {
		return nil, dockerErr("list adopted networks", err)
	}
	var out []dockerio.Network
	for _, s := range list {
		if !e.adoptedNetwork(s) {
			continue
		}
		attached, err := e.attachedContainers(ctx, s.ID)
		if err != nil {
			return nil, err
		}
		out = append(out, dockerio.Network{ID: s.ID, Name: s.Name, Labels: s.Labels, Containers: attached})
	}
	sortNetworks(out)
	return out, nil
}

// attachedContainers counts the containers Docker lists on the network id, in
// any state: a stopped container keeps its place on its networks, unlike the
// endpoints an inspect of the network counts.
func (e *Engine) attachedContainers(ctx context.Context, id string) (int, error) {
	list, err := e.docker.ContainerList(ctx, container.ListOptions{All: true, Filters: filters.NewArgs(filters.Arg("network", id))})
	if err != nil {
		return 0, dockerErr("list containers on network "+trimID(id), err)
	}
	return len(list), nil
}

// CreatePoolNetwork creates one warm-pool network under a fresh random name. A
// name collision (one in 2^48) answers 409 and is tried once more.
func (e *Engine) CreatePoolNetwork(ctx context.Context) (dockerio.Network, error) {
	l := labels.PoolNetworkOwnership(e.opts.BackendName, e.opts.InstallationID)
	for attempt := 1; ; attempt++ {
		var b [6]byte
		if _, err := rand.Read(b[:]); err != nil {
			return dockerio.Network{}, fmt.Errorf("create pool network: %w", err)
		}
		name := labels.PoolNetworkPrefix + hex.EncodeToString(b[:])
		created, err := e.docker.NetworkCreate(ctx, name, network.CreateOptions{Driver: "bridge", Labels: l})
		switch {
		case err == nil:
			return dockerio.Network{ID: created.ID, Name: name, Labels: l}, nil
		case strings.Contains(err.Error(), poolExhaustedMarker):
			return dockerio.Network{}, fmt.Errorf("create network %s: %w: %w", name, dockerio.ErrAddressPoolExhausted, err)
		case isConflict(err) && attempt < 2:
			continue
		default:
			return dockerio.Network{}, dockerErr("create network "+name, err)
		}
	}
}

// PoolNetworks lists this installation's pool networks by label (one request;
// no container counts), sorted by name.
func (e *Engine) PoolNetworks(ctx context.Context) ([]dockerio.Network, error) {
	return e.scopeNetworks(ctx, labels.NetworkScopePool, func(n network.Summary) (dockerio.Network, bool, error) {
		owned := n.Driver == "bridge" && n.Scope == "local" && labels.OwnedPoolNetwork(n.Name, n.Labels, e.opts.BackendName, e.opts.InstallationID)
		return dockerio.Network{ID: n.ID, Name: n.Name, Labels: n.Labels}, owned, nil
	})
}

// scopeNetworks lists this installation's networks of one scope ("lease" or
// "pool") by label, each as view reports it (ok false: left out), sorted by
// name (then ID).
func (e *Engine) scopeNetworks(ctx context.Context, scope string, view func(network.Summary) (n dockerio.Network, ok bool, err error)) ([]dockerio.Network, error) {
	list, err := e.docker.NetworkList(ctx, network.ListOptions{Filters: e.ownFilters(
		filters.Arg("label", dockerio.LabelNetworkScope+"="+scope),
	)})
	if err != nil {
		return nil, dockerErr("list "+scope+" networks", err)
	}
	out := make([]dockerio.Network, 0, len(list))
	for _, s := range list {
		n, ok, err := view(s)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, n)
		}
	}
	sortNetworks(out)
	return out, nil
}

// sortNetworks orders networks by name, then ID.
func sortNetworks(ns []dockerio.Network) {
	slices.SortFunc(ns, func(a, b dockerio.Network) int {
		return cmp.Or(strings.Compare(a.Name, b.Name), strings.Compare(a.ID, b.ID))
	})
}
