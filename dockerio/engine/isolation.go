package engine

import (
	"cmp"
	"context"
	"fmt"
	"strings"

	"github.com/docker/docker/api/types/network"

	"github.com/berth-dev/berth/dockerio"
	"github.com/berth-dev/berth/dockerio/isolation"
)

// localDockerd reports whether dockerd runs on this host (a unix socket), where
// berthd can read and write its firewall; a dockerd on another host has its
// firewall there, out of berthd's reach.
func (e *Engine) localDockerd() bool {
	h := e.opts.Host
	return h == "" || strings.HasPrefix(h, "unix://")
}

// GuardIsolation keeps the isolation guard (dockerio/isolation) in place on
// dockerd's host; installed reports that it had to put it back.
func (e *Engine) GuardIsolation(ctx context.Context) (bool, error) {
	if !e.localDockerd() {
		return false, fmt.Errorf("isolation guard: docker_host %s is not this host's dockerd; install the guard where dockerd runs: %w", e.opts.Host, dockerio.ErrUnavailable)
	}
	return isolation.Host.Ensure(ctx)
}

// bridgeNameOption names the default bridge's Linux interface (docker0).
const bridgeNameOption = "com.docker.network.bridge.name"

// DockerFirewall reads the rules dockerd programmed on its host for the default
// bridge: a dockerd started with --iptables=false keeps no network apart while
// every option still reads isolated.
func (e *Engine) DockerFirewall(ctx context.Context) (isolation.DockerRules, error) {
	if !e.localDockerd() {
		return isolation.DockerRules{}, fmt.Errorf("docker_host %s is not this host's dockerd; its firewall cannot be read: %w", e.opts.Host, dockerio.ErrUnavailable)
	}
	n, err := e.defaultBridge(ctx)
	if err != nil {
		return isolation.DockerRules{}, err
	}
	return bridgeRules(ctx, n)
}

// bridgeRules reads dockerd's rules for the default bridge n, as listed.
func bridgeRules(ctx context.Context, n network.Inspect) (isolation.DockerRules, error) {
	return isolation.Host.DockerRules(ctx, cmp.Or(n.Options[bridgeNameOption], "docker0"))
}

// firewallGap says why dockerd's own rules do not isolate the default bridge n
// ("" when they do, or when dockerd is another host's and the rules cannot be read).
func (e *Engine) firewallGap(ctx context.Context, n network.Inspect) string {
	if !e.localDockerd() {
		return ""
	}
	r, err := bridgeRules(ctx, n)
	switch {
	case err != nil:
		return "dockerd's firewall rules could not be read (" + err.Error() + ")"
	case !r.ICCDrop:
		return `dockerd drops nothing between containers on the default bridge: it runs without iptables (--iptables=false?), so "icc": false isolates nothing`
	}
	return ""
}
