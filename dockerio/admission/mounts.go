package admission

import (
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/berth-dev/berth/dockerio"
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

// MountBudget refuses a plan whose instances together would mount more than
// MaxLeaseMounts filesystems or MaxLeaseTargetBytes of target paths. Each
// instance counts its image VOLUMEs and tenant tmpfs, and under a read-only
// rootfs the fixed /tmp and /run and the worst case of MaxWritablePaths
// writable paths, detected or not: the answer is the same before detection,
// after it, and for a maintenance or compensation plan of the same release.
func MountBudget(plan dockerio.Plan) error {
	mounts, bytes := 0, 0
	for _, svc := range plan.Services {
		m, b := len(svc.ImageVolumes)+len(svc.Tmpfs), 0
		for _, t := range svc.ImageVolumes {
			b += len(t)
		}
		for _, t := range svc.Tmpfs {
			b += len(t)
		}
		if plan.ReadonlyRootfs {
			m += len(fixedTmpfs) + dockerio.MaxWritablePaths
			b += len("/tmp") + len("/run") + dockerio.MaxWritablePaths*worstWritablePathBytes
		}
		mounts += m * max(svc.Quantity, 0)
		bytes += b * max(svc.Quantity, 0)
	}
	if mounts > MaxLeaseMounts {
		return refuse("the lease would mount %d filesystems across its instances (VOLUMEs, tmpfs, the fixed /tmp and /run, %d writable paths each), at most %d",
			mounts, dockerio.MaxWritablePaths, MaxLeaseMounts)
	}
	if bytes > MaxLeaseTargetBytes {
		return refuse("the lease's mount targets would take %d bytes across its instances, at most %d", bytes, MaxLeaseTargetBytes)
	}
	return nil
}

// WritablePaths checks a service's writable paths against the rest of its
// plan: at most MaxWritablePaths canonical targets, usable as a tmpfs target,
// none masking what the runtime needs, none over or under another, an image
// VOLUME or a tenant tmpfs (one mount would hide the other); and, when given,
// one clean absolute directory per instance to seed them in.
func WritablePaths(svc dockerio.ServicePlan) error {
	if len(svc.WritablePaths) > dockerio.MaxWritablePaths {
		return refuse("%d writable paths, at most %d", len(svc.WritablePaths), dockerio.MaxWritablePaths)
	}
	for i, p := range svc.WritablePaths {
		if !Canonical(p) || strings.ContainsRune(p, ':') {
			return refuse("writable path %q is not a canonical absolute path without ':'", p)
		}
		if m := masked(p); m != "" {
			return refuse("writable path %q would mask %s", p, m)
		}
		for _, other := range svc.WritablePaths[:i] {
			if Overlap(p, other) {
				return refuse("writable paths %q and %q overlap", other, p)
			}
		}
		for _, v := range slices.Concat(svc.ImageVolumes, svc.Tmpfs, fixedTmpfs) {
			if Overlap(p, v) {
				return refuse("writable path %q overlaps %q, an image VOLUME or a tmpfs", p, v)
			}
		}
	}
	if len(svc.WritableDirs) == 0 {
		return nil
	}
	if len(svc.WritableDirs) != svc.Quantity {
		return fmt.Errorf("%d instances but %d writable-path directories", svc.Quantity, len(svc.WritableDirs))
	}
	return cleanDirs("writable-path directory", svc.WritableDirs)
}

// cleanDirs refuses a host directory of a plan that is not a clean absolute
// path other than the root.
func cleanDirs(kind string, dirs []string) error {
	for i, d := range dirs {
		if d == "" || !path.IsAbs(d) || path.Clean(d) != d || d == "/" {
			return fmt.Errorf("instance %d: %s %q is not a clean absolute path", i, kind, d)
		}
	}
	return nil
}

// SeedRequest checks a request to seed writable paths: the paths as a plan
// would mount them, at least one clean absolute directory, positive caps and
// a numeric owner.
func SeedRequest(req dockerio.SeedRequest) error {
	switch {
	case req.ImageID == "":
		return fmt.Errorf("no image ID")
	case len(req.Dirs) == 0:
		return fmt.Errorf("no directory to seed")
	case req.MaxEntries <= 0 || req.MaxBytes <= 0:
		return fmt.Errorf("caps of %d entries and %d bytes: both must be positive", req.MaxEntries, req.MaxBytes)
	case req.UID < 0 || req.GID < 0:
		return fmt.Errorf("owner %d:%d is not a numeric uid:gid", req.UID, req.GID)
	}
	return WritablePaths(dockerio.ServicePlan{WritablePaths: req.Paths, Quantity: len(req.Dirs), WritableDirs: req.Dirs})
}
