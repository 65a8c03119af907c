// Package addresspool counts the bridge networks Docker's default address pools
// can hold and says when that is fewer than the leases berthd may admit: every
// lease gets a network of its own, and a failed network create fails the lease.
// berthd warns about a shortfall at start and `berthctl doctor` reports it; both
// read the pools from Docker's /info and judge them here, so they agree.
package addresspool

import (
	"fmt"
	"net/netip"
)

// DockerDefaultNetworks is how many bridge networks a daemon without configured
// default-address-pools can create (measured on Docker 20.10: the 31st create fails).
const DockerDefaultNetworks = 30

// Fix is what an operator changes when the pools are too small.
const Fix = "start dockerd with --default-address-pool base=172.16.0.0/12,size=24 (4096 networks; in /etc/docker/daemon.json: \"default-address-pools\": [{\"base\": \"172.16.0.0/12\", \"size\": 24}])"

// Pool is one entry of Docker's default address pools (/info DefaultAddressPools).
type Pool struct {
	Base string // CIDR the networks are cut from
	Size int    // prefix length of each network
}

// Capacity counts the networks the pools can be cut into; no pools is Docker's
// built-in default.
func Capacity(pools []Pool) (int, error) {
	if len(pools) == 0 {
		return DockerDefaultNetworks, nil
	}
	total := 0
	for _, p := range pools {
		prefix, err := netip.ParsePrefix(p.Base)
		if err != nil || p.Size < prefix.Bits() || p.Size > prefix.Addr().BitLen() {
			return 0, fmt.Errorf("docker info: address pool %s/%d not understood", p.Base, p.Size)
		}
		total += 1 << min(p.Size-prefix.Bits(), 30)
	}
	return total, nil
}

// Shortfall is "" when networks can hold a network for each of leases, else a
// one-line finding saying by how much they fall short.
func Shortfall(networks, leases int) string {
	if networks >= leases {
		return ""
	}
	return fmt.Sprintf("Docker's default address pools hold %d networks, fewer than the %d leases the resource pool can admit (one network each)", networks, leases)
}
