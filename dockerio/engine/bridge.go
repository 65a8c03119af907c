package engine

import (
	"context"
	"fmt"
	"net/netip"
	"strings"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/system"
	"golang.org/x/sync/errgroup"

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

// DefaultBridge reads Docker's default bridge, the daemon's warnings and the
// containers on the bridge, the three at once (each grows with the containers
// Docker runs; at a thousand this is what a restart waits for).
func (e *Engine) DefaultBridge(ctx context.Context) (dockerio.BridgeFacts, error) {
	var (
		n     network.Inspect
		info  system.Info
		on    []container.Summary
		group errgroup.Group
	)
	group.Go(func() (err error) { n, err = e.defaultBridge(ctx); return err })
	group.Go(func() (err error) { info, err = e.info(ctx); return err })
	group.Go(func() (err error) {
		on, err = e.docker.ContainerList(ctx, container.ListOptions{Filters: filters.NewArgs(filters.Arg("network", dockerio.DefaultBridgeName))})
		return dockerErr("list the containers on the default bridge", err)
	})
	if err := group.Wait(); err != nil {
		return dockerio.BridgeFacts{}, err
	}
	// This installation's containers there are its bridged leases, whose slots
	// the pool counts from its journal: only others' take room from it.
	others := 0
	for _, c := range on {
		if !e.ownsContainer(c.ID, c.Labels) {
			others++
		}
	}
	facts := dockerio.BridgeFacts{ID: n.ID, Reason: bridgeNotIsolated(n)}
	for _, w := range info.Warnings {
		if facts.Reason == "" && strings.Contains(w, bridgeNFWarning) {
			facts.Reason = "bridged traffic bypasses iptables (" + bridgeNFWarning + ")"
		}
	}
	if facts.Reason == "" {
		facts.Reason = e.firewallGap(ctx, n) // the bridge as listed above: not listed again
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

// defaultBridge is Docker's default bridge as the network list shows it: its
// options and addresses without the endpoint of every container attached,
// which inspecting it returns (a quarter of a megabyte at a thousand).
func (e *Engine) defaultBridge(ctx context.Context) (network.Inspect, error) {
	list, err := e.docker.NetworkList(ctx, network.ListOptions{Filters: filters.NewArgs(
		filters.Arg("name", dockerio.DefaultBridgeName), filters.Arg("type", "builtin"))})
	if err != nil {
		return network.Inspect{}, dockerErr("list the default bridge", err)
	}
	for _, n := range list {
		if n.Name == dockerio.DefaultBridgeName { // the name filter matches substrings
			return n, nil
		}
	}
	return network.Inspect{}, fmt.Errorf("docker lists no network %q: %w", dockerio.DefaultBridgeName, cerrdefs.ErrNotFound)
}
