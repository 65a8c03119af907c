package policy

import (
	"slices"
	"strings"
)

// The lease mount budget (seed: "a maximum of 16,384 mounts and 32 MiB of
// target-path bytes across the lease"): past it, dockerd and the kernel spend
// more on one lease's mount tables than any tenant workload justifies.
const (
	MaxLeaseMounts      = 16384
	MaxLeaseTargetBytes = 32 << 20
)

// worstWritablePathBytes is the longest target a detected writable path can
// have: a depth-1 name (at most NAME_MAX, 255 bytes) under the longest parent.
const worstWritablePathBytes = len("/var/cache/") + 255

// fixedTmpfs are the mounts a read-only rootfs always gets.
var fixedTmpfs = []string{"/tmp", "/run"}

// MaxWritablePaths bounds the writable paths of one instance; the lease mount
// budget reserves this many per instance before detection.
const MaxWritablePaths = 4

// Mounts is what the instances of one service mount, as the budget counts it.
type Mounts struct {
	Quantity     int
	ImageVolumes []string // the image's VOLUME targets
	Tmpfs        []string // the tenant's tmpfs targets
}

// MountBudget refuses a lease whose instances together would mount more than
// MaxLeaseMounts filesystems or MaxLeaseTargetBytes of target paths. Each
// instance counts its image VOLUMEs and tenant tmpfs, and under a read-only
// rootfs the fixed /tmp and /run and the worst case of MaxWritablePaths
// writable paths, detected or not: the answer is the same before detection,
// after it, and for a maintenance or compensation plan of the same release.
func MountBudget(services []Mounts, readonlyRootfs bool) error {
	mounts, bytes := 0, 0
	for _, svc := range services {
		m, b := len(svc.ImageVolumes)+len(svc.Tmpfs), 0
		for _, t := range svc.ImageVolumes {
			b += len(t)
		}
		for _, t := range svc.Tmpfs {
			b += len(t)
		}
		if readonlyRootfs {
			m += len(fixedTmpfs) + MaxWritablePaths
			b += len("/tmp") + len("/run") + MaxWritablePaths*worstWritablePathBytes
		}
		mounts += m * max(svc.Quantity, 0)
		bytes += b * max(svc.Quantity, 0)
	}
	if mounts > MaxLeaseMounts {
		return refuse("the lease would mount %d filesystems across its instances (VOLUMEs, tmpfs, the fixed /tmp and /run, %d writable paths each), at most %d",
			mounts, MaxWritablePaths, MaxLeaseMounts)
	}
	if bytes > MaxLeaseTargetBytes {
		return refuse("the lease's mount targets would take %d bytes across its instances, at most %d", bytes, MaxLeaseTargetBytes)
	}
	return nil
}

// WritablePaths checks a service's writable paths against its other mounts:
// at most MaxWritablePaths canonical targets, usable as a tmpfs target, none
// masking what the runtime needs, none over or under another, an image
// VOLUME, a tenant tmpfs or the fixed /tmp and /run (one mount would hide the
// other).
func WritablePaths(paths, imageVolumes, tmpfs []string) error {
	if len(paths) > MaxWritablePaths {
		return refuse("%d writable paths, at most %d", len(paths), MaxWritablePaths)
	}
	for i, p := range paths {
		if !Canonical(p) || strings.ContainsRune(p, ':') {
			return refuse("writable path %q is not a canonical absolute path without ':'", p)
		}
		if m := masked(p); m != "" {
			return refuse("writable path %q would mask %s", p, m)
		}
		for _, other := range paths[:i] {
			if Overlap(p, other) {
				return refuse("writable paths %q and %q overlap", other, p)
			}
		}
		for _, v := range slices.Concat(imageVolumes, tmpfs, fixedTmpfs) {
			if Overlap(p, v) {
				return refuse("writable path %q overlaps %q, an image VOLUME or a tmpfs", p, v)
			}
		}
	}
	return nil
}
