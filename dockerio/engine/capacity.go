package engine

import (
	"context"

	"github.com/berth-dev/berth/dockerio/addresspool"
)

// NetworkCapacity is how many bridge networks the daemon's default address pools
// can hold: every lease takes one, so berthd warns at startup when the pools are
// smaller than the resource pool's lease capacity.
func (e *Engine) NetworkCapacity(ctx context.Context) (int, error) {
	info, err := e.info(ctx)
	if err != nil {
		return 0, err
	}
	pools := make([]addresspool.Pool, 0, len(info.DefaultAddressPools))
	for _, p := range info.DefaultAddressPools {
		pools = append(pools, addresspool.Pool{Base: p.Base, Size: p.Size})
	}
	return addresspool.Capacity(pools)
}
