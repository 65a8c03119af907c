package engine

import (
	"context"
	"fmt"
	"net/netip"
	"strings"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"

	"github.com/berth-dev/berth/dockerio"
)

// iccOption is the default bridge's option that says whether containers on it
// may talk to each other (the daemon's "icc" setting).
const iccOption = "com.docker.network.bridge.enable_icc"

// bridgeNFWarning is the daemon's warning that bridged traffic bypasses
// iptables: icc=false's DROP rule would then never see it.
const bridgeNFWarning = "bridge-nf-call-iptables is disabled"

// bridgeReserve is kept free on the default bridge for whatever else the host
// starts there (a helper, an operator's container).
const bridgeReserve = 16

// DefaultBridge inspects Docker's default bridge and the daemon's warnings.
func (e *Engine) DefaultBridge(ctx context.Context) (dockerio.BridgeFacts, error) {
	n, err := e.docker.NetworkInspect(ctx, dockerio.DefaultBridgeName, network.InspectOptions{})
	if err != nil {
		return dockerio.BridgeFacts{}, dockerErr("inspect the default bridge", err)
	}
	info, err := e.docker.Info(ctx)
	if err != nil {
		return dockerio.BridgeFacts{}, dockerErr("docker info", err)
	}
	// This installation's containers there are its bridged leases, whose slots
	// the pool counts from its journal: only others' take room from it.
	ours, err := e.docker.ContainerList(ctx, container.ListOptions{Filters: e.ownFilters(filters.Arg("network", dockerio.DefaultBridgeName))})
	if err != nil {
		return dockerio.BridgeFacts{}, dockerErr("list our containers on the default bridge", err)
	}
	others := max(0, len(n.Containers)-len(ours))
	facts := dockerio.BridgeFacts{ID: n.ID, Reason: bridgeNotIsolated(n)}
	for _, w := range info.Warnings {
		if facts.Reason == "" && strings.Contains(w, bridgeNFWarning) {
			facts.Reason = "bridged traffic bypasses iptables (" + bridgeNFWarning + ")"
		}
	}
	for _, c := range n.IPAM.Config {
		p, err := netip.ParsePrefix(c.Subnet)
		if err != nil || !p.Addr().Is4() {
			continue
		}
		facts.Subnet = p.Masked().String()
		// Less the network, broadcast and gateway addresses.
		hosts := 1<<(32-p.Bits()) - 3
		facts.Capacity = max(0, hosts-others-bridgeReserve)
		break
	}
	if facts.Subnet == "" && facts.Reason == "" {
		facts.Reason = "the default bridge has no IPv4 subnet"
	}
	facts.Isolated = facts.Reason == ""
	return facts, nil
}

// bridgeNotIsolated says why n, the default bridge, lets its containers reach
// each other ("" when it does not: icc is off).
func bridgeNotIsolated(n network.Inspect) string {
	if v := n.Options[iccOption]; v != "false" {
		return fmt.Sprintf("inter-container communication is on (%s=%q)", iccOption, v)
	}
	return ""
}
