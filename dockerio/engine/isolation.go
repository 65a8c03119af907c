package engine

import (
	"context"
	"fmt"
	"strings"

	"github.com/berth-dev/berth/dockerio"
	"github.com/berth-dev/berth/dockerio/isolation"
)

// GuardIsolation keeps the isolation guard (dockerio/isolation) in place on
// dockerd's host; installed reports that it had to put it back. A dockerd on
// another host has its firewall there, out of berthd's reach.
func (e *Engine) GuardIsolation(ctx context.Context) (bool, error) {
	if h := e.opts.Host; h != "" && !strings.HasPrefix(h, "unix://") {
		return false, fmt.Errorf("isolation guard: docker_host %s is not this host's dockerd; install the guard where dockerd runs: %w", h, dockerio.ErrUnavailable)
	}
	return isolation.Host.Ensure(ctx)
}
