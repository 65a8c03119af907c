package engine

import (
	"context"
	"fmt"
	"net/netip"
)

// dockerDefaultNetworks is how many bridge networks a daemon without configured
// default-address-pools can create (measured: the 31st create fails).
const dockerDefaultNetworks = 30

// NetworkCapacity is how many bridge networks the daemon's default address pools
// can hold: every lease takes one, so berthd warns at startup when the pools are
// smaller than the resource pool's lease capacity.
func (e *Engine) NetworkCapacity(ctx context.Context) (int, error) {
	info, err := e.docker.Info(ctx)
	if err != nil {
		return 0, dockerErr("docker info", err)
	}
	pools := make([]addressPool, 0, len(info.DefaultAddressPools))
	for _, p := range info.DefaultAddressPools {
		pools = append(pools, addressPool{base: p.Base, size: p.Size})
	}
	return poolCapacity(pools)
}

type addressPool struct {
	base string // CIDR
	size int    // prefix length of each network cut from it
}

// poolCapacity counts the networks the pools can be cut into.
func poolCapacity(pools []addressPool) (int, error) {
	if len(pools) == 0 {
		return dockerDefaultNetworks, nil
	}
	total := 0
	for _, p := range pools {
		prefix, err := netip.ParsePrefix(p.base)
		if err != nil || p.size < prefix.Bits() || p.size > prefix.Addr().BitLen() {
			return 0, fmt.Errorf("docker info: address pool %s/%d not understood", p.base, p.size)
		}
		total += 1 << min(p.size-prefix.Bits(), 30)
	}
	return total, nil
}
