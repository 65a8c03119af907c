package config

import "testing"

func TestLeaseCapacity_IsTheSmallestProfileTheTotalsHold(t *testing.T) {
	c := &Config{TotalCPUCores: 8, TotalMemoryMB: 16384, TotalDiskMB: 102400, ContainerTmpfsSizeMB: 64,
		SKUProfiles: map[string]SKUProfile{
			"micro": {CPUCores: 0.25, MemoryMB: 256, DiskMB: 512}, // 32 by CPU, 64 by memory, 200 by disk
			"large": {CPUCores: 2, MemoryMB: 2048, DiskMB: 4096},
		}}
	if got := c.LeaseCapacity(); got != 32 {
		t.Errorf("LeaseCapacity = %d, want 32 (CPU binds the micro profile)", got)
	}
	c.SKUProfiles = map[string]SKUProfile{"diskless": {CPUCores: 0.1, MemoryMB: 64}} // 80 by CPU, 256 by memory, 1600 by scratch
	if got := c.LeaseCapacity(); got != 80 {
		t.Errorf("LeaseCapacity (diskless) = %d, want 80", got)
	}
}
