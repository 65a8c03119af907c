package dockerio

// The adapter's checks of a plan before Up, and of a seeding request: the
// tenant's rules (messages/policy) asserted on what is about to be launched,
// and the plan's completeness — the image resolved, one host directory per
// instance where one is needed. A plan is checked even though its parts were
// admitted: it may come from a journal written by an older release.

import (
	"fmt"
	"path"

	"github.com/berth-dev/berth/messages/policy"
)

// CheckService is the engine's and the fake's check of one planned service
// before Up: a resolved image ID, admissible VOLUMEs, no tenant tmpfs over
// one, the volume directories it needs, and usable writable paths.
func CheckService(svc ServicePlan) error {
	if svc.ImageID == "" {
		return fmt.Errorf("plan: service %q: no resolved image ID", svc.Name)
	}
	_, err := policy.Volumes(svc.ImageVolumes)
	if err == nil {
		err = policy.TmpfsOverlap(svc.Tmpfs, svc.ImageVolumes)
	}
	if err == nil {
		err = checkVolumeDirs(svc)
	}
	if err == nil {
		err = CheckWritablePaths(svc)
	}
	if err != nil {
		return fmt.Errorf("plan: service %q: %w", svc.Name, err)
	}
	return nil
}

// CheckMountBudget is policy.MountBudget of the plan's services.
func CheckMountBudget(plan Plan) error {
	services := make([]policy.Mounts, len(plan.Services))
	for i, svc := range plan.Services {
		services[i] = policy.Mounts{Quantity: svc.Quantity, ImageVolumes: svc.ImageVolumes, Tmpfs: svc.Tmpfs}
	}
	return policy.MountBudget(services, plan.ReadonlyRootfs)
}

// checkVolumeDirs checks a service's managed volume directories against its
// plan: a stateful service (DiskMB > 0) with image VOLUMEs needs one absolute,
// clean directory per instance (VolumeDirs[i] for instance i); a diskless one
// has none (its VOLUMEs are tmpfs, never durable data). The error is a plain
// plan error, not ErrImageNotAdmissible: the image is fine, the plan is
// incomplete.
func checkVolumeDirs(svc ServicePlan) error {
	if svc.DiskMB <= 0 {
		if len(svc.VolumeDirs) > 0 {
			return fmt.Errorf("diskless (disk_mb 0) but given %d volume directories: its image VOLUMEs are tmpfs", len(svc.VolumeDirs))
		}
		return nil
	}
	if len(svc.ImageVolumes) == 0 && len(svc.VolumeDirs) == 0 {
		return nil // nothing to mount
	}
	if len(svc.VolumeDirs) != svc.Quantity {
		return fmt.Errorf("stateful (disk_mb %d) with %d instances but %d volume directories: every instance needs its managed volume (dockerio.Volumes.Ensure) before launch",
			svc.DiskMB, svc.Quantity, len(svc.VolumeDirs))
	}
	return cleanDirs("volume directory", svc.VolumeDirs)
}

// CheckWritablePaths is policy.WritablePaths of the service, and, when given,
// one clean absolute directory per instance to seed them in.
func CheckWritablePaths(svc ServicePlan) error {
	if err := policy.WritablePaths(svc.WritablePaths, svc.ImageVolumes, svc.Tmpfs); err != nil {
		return err
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

// CheckSeedRequest checks a request to seed writable paths: the paths as a
// plan would mount them, at least one clean absolute directory, positive caps
// and a numeric owner.
func CheckSeedRequest(req SeedRequest) error {
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
	return CheckWritablePaths(ServicePlan{WritablePaths: req.Paths, Quantity: len(req.Dirs), WritableDirs: req.Dirs})
}
