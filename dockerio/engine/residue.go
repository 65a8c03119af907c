package engine

import (
	"context"
	"sort"
	"strings"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"

	"github.com/berth-dev/berth/dockerio"
)

// LeaseResidue is what Docker holds of one lease now, in any state: this
// installation's containers and lease networks, and the containers labelled
// with the lease that are not this installation's (counted, never touched).
func (e *Engine) LeaseResidue(ctx context.Context, lease string) (dockerio.LeaseResidue, error) {
	var r dockerio.LeaseResidue
	byLease := filters.NewArgs(filters.Arg("label", dockerio.LabelLease+"="+lease))
	list, err := e.docker.ContainerList(ctx, container.ListOptions{All: true, Filters: byLease})
	if err != nil {
		return r, dockerErr("list the containers of lease "+lease, err)
	}
	for _, c := range list {
		if c.Labels[dockerio.LabelLease] != lease { // the filter is Docker's: check
			continue
		}
		if !e.ownsContainer(c.ID, c.Labels) {
			r.Unattributed++
			continue
		}
		name := c.ID
		if len(c.Names) > 0 {
			name = strings.TrimPrefix(c.Names[0], "/")
		}
		r.Containers = append(r.Containers, name)
	}
	nets, err := e.docker.NetworkList(ctx, network.ListOptions{Filters: byLease})
	if err != nil {
		return r, dockerErr("list the networks of lease "+lease, err)
	}
	for _, n := range nets {
		if n.Labels[dockerio.LabelLease] == lease && e.ours(n.Labels) {
			r.Networks = append(r.Networks, n.Name)
		}
	}
	sort.Strings(r.Containers)
	sort.Strings(r.Networks)
	return r, nil
}
