package engine

import (
	"context"

	"github.com/docker/docker/api/types/system"

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

// info is the daemon's `docker info`, one request for concurrent callers:
// startup's checks (seccomp, the bridge, the address pools) read it at once,
// and with a thousand containers each answer costs dockerd 0.1–0.3 s.
func (e *Engine) info(ctx context.Context) (system.Info, error) {
	v, err, _ := e.infos.Do("info", func() (any, error) { return e.docker.Info(ctx) })
	if err != nil {
		return system.Info{}, dockerErr("docker info", err)
	}
	return v.(system.Info), nil
}
