package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

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
func openVolumes(cfg *config.Config, installationID string, log zerolog.Logger) (dockerio.Volumes, error) {
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
	warned := false
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
			opts.Filesystem, warned = volumes.FSDir, true
			log.Warn().Str("volume_data_path", data).Str("filesystem", fsType).
				Msg("managed volumes use the dir driver: disk quotas are NOT enforced (use a btrfs mount with quotas, as production_mode requires)")
		}
	}
	v, err := volumes.Open(opts)
	if err != nil {
		return nil, err
	}
	if err := claimVolumeRoot(v.Root(), installationID); err != nil {
		return nil, err
	}
	ev := log.Info()
	if !v.Enforced() && !warned {
		ev = log.Warn()
	}
	ev.Str("volume_data_path", v.Root()).Str("driver", v.Kind()).Bool("quota_enforced", v.Enforced()).Msg("managed volumes opened")
	return v, nil
}

// claimVolumeRoot writes the marker into a root that has none and refuses a
// root another installation claimed.
func claimVolumeRoot(root, installationID string) error {
	p := filepath.Join(root, volumes.InstallationMarker)
	raw, err := os.ReadFile(p)
	switch {
	case err == nil:
		if owner := strings.TrimSpace(string(raw)); owner != installationID {
			return fmt.Errorf("volume_data_path %s belongs to installation %s (%s), not to this berthd's %s: "+
				"two installations must not share a volume root; give this one its own volume_data_path "+
				"(or, if installation %s is gone for good, remove %s)", root, owner, p, installationID, owner, p)
		}
		return nil
	case !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("volume root marker %s: %w", p, err)
	}
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		if errors.Is(err, fs.ErrExist) {
			return claimVolumeRoot(root, installationID) // another process won the race: check its claim
		}
		return fmt.Errorf("volume root marker %s: %w", p, err)
	}
	if _, err := f.WriteString(installationID + "\n"); err != nil {
		f.Close()
		return fmt.Errorf("volume root marker %s: %w", p, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("volume root marker %s: %w", p, err)
	}
	return f.Close()
}
