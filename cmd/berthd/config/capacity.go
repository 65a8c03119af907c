package config

// LeaseCapacity is how many leases of the smallest profile the resource pool
// can hold (total CPU, memory and disk; a diskless profile counts its scratch
// tmpfs as disk). Each lease has a network of its own, so berthd and
// `berthctl doctor` compare this with Docker's address pools.
func (c *Config) LeaseCapacity() int {
	best := 0
	for _, p := range c.SKUProfiles {
		disk := p.DiskMB
		if disk == 0 {
			disk = c.ContainerTmpfsSizeMB
		}
		n := int(c.TotalCPUCores / p.CPUCores)
		n = min(n, int(c.TotalMemoryMB/p.MemoryMB))
		if disk > 0 {
			n = min(n, int(c.TotalDiskMB/disk))
		}
		best = max(best, n)
	}
	return best
}
