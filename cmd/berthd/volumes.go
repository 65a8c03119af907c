package main

import (
	"fmt"
	"path/filepath"

	"github.com/rs/zerolog"

	"github.com/berth-dev/berth/cmd/berthd/config"
	"github.com/berth-dev/berth/dockerio"
	"github.com/berth-dev/berth/dockerio/volumes"
)

// openVolumes opens the managed-volume root of a config with stateful SKUs
// (nil when volume_data_path is empty: then only diskless SKUs load). Relative
// paths are taken from the working directory. With volume_mount_path unset
// (development only: production requires it) the mount holding the data path
// is found; with volume_filesystem unset a btrfs mount gets the quota driver
// and anything else the dir driver, loudly, because it enforces nothing.
func openVolumes(cfg *config.Config, log zerolog.Logger) (dockerio.Volumes, error) {
	if cfg.VolumeDataPath == "" {
		return nil, nil
	}
	data, err := filepath.Abs(cfg.VolumeDataPath)
	if err != nil {
		return nil, fmt.Errorf("volume_data_path %s: %w", cfg.VolumeDataPath, err)
	}
	opts := volumes.Options{DataPath: data, Filesystem: cfg.VolumeFilesystem}
	if cfg.VolumeMountPath != "" {
		if opts.MountPath, err = filepath.Abs(cfg.VolumeMountPath); err != nil {
			return nil, fmt.Errorf("volume_mount_path %s: %w", cfg.VolumeMountPath, err)
		}
	}
	if opts.MountPath == "" || opts.Filesystem == "" {
		point, fsType, err := volumes.Containing(data)
		if err != nil {
			return nil, err
		}
		if opts.MountPath == "" && !cfg.ProductionMode {
			opts.MountPath = point
		}
		if opts.Filesystem == "" && fsType != volumes.FSBtrfs && !cfg.ProductionMode {
			// Development on a laptop's ext4: tenant data works, quotas do not.
			opts.Filesystem = volumes.FSDir
			log.Warn().Str("volume_data_path", data).Str("filesystem", fsType).
				Msg("managed volumes use the dir driver: disk quotas are NOT enforced (use a btrfs mount with quotas, as production_mode requires)")
		}
	}
	v, err := volumes.Open(opts)
	if err != nil {
		return nil, err
	}
	ev := log.Info()
	if !v.Enforced() {
		ev = log.Warn()
	}
	ev.Str("volume_data_path", v.Root()).Str("driver", v.Kind()).Bool("quota_enforced", v.Enforced()).Msg("managed volumes opened")
	return v, nil
}
