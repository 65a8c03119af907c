package netpool

import (
	"context"
	"time"

	"github.com/berth-dev/berth/dockerio"
	"github.com/berth-dev/berth/messages"
	"github.com/berth-dev/berth/supervisors"
)

// Client is how a lease worker reaches the pool (steps.NetworkPool).
type Client struct {
	Tree    *supervisors.Tree
	Path    messages.Address
	Timeout time.Duration // a pool that does not answer in time is passed over
}

// Claim asks for the lease's pool network (or its slot of the default bridge:
// Bridged); ID "" when there is none to give. single: the release runs one
// container.
func (c *Client) Claim(ctx context.Context, lease string, bind, single bool) (dockerio.Network, error) {
	return c.ask(ctx, messages.ClaimNetwork{Lease: lease, Bind: bind, Single: single})
}

// Bind asks the pool to bind made, a pool network the lease created itself.
func (c *Client) Bind(ctx context.Context, lease string, made dockerio.Network) (dockerio.Network, error) {
	return c.ask(ctx, messages.ClaimNetwork{Lease: lease, Bind: true, Made: made.ID, MadeName: made.Name})
}

func (c *Client) ask(ctx context.Context, m messages.ClaimNetwork) (dockerio.Network, error) {
	rep, err := supervisors.Ask(ctx, c.Tree, c.Path, c.Timeout, func(r chan<- messages.NetworkClaim) any {
		m.Reply = r
		return &m
	})
	if err != nil {
		return dockerio.Network{}, err
	}
	return dockerio.Network{ID: rep.ID, Name: rep.Name, Bridged: rep.Bridged}, rep.Err
}

// Drop tells the pool the lease's bound network is gone.
func (c *Client) Drop(lease, id string) {
	c.Tree.Send(c.Path, &messages.DropNetwork{Lease: lease, ID: id})
}
