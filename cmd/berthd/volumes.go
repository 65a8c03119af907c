package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/berth-dev/berth/cmd/berthd/config"
	"github.com/berth-dev/berth/dockerio/volumes"
)

// openVolumes opens the managed-volume root of a config with stateful SKUs
// (nil when volume_data_path is empty: then only diskless SKUs load). Relative
// paths are taken from the working directory. With volume_mount_path unset
// (development only: production requires it) the mount holding the data path
// is found; with volume_filesystem unset a btrfs mount gets the quota driver
// and anything else the dir driver, loudly, because it enforces nothing. The
// driver comes guarded by the root's identity as it is now (volumes.Guard):
// every later operation proves the root is still this one.
func openVolumes(cfg *config.Config, installationID string, log zerolog.Logger) (*volumes.Guard, error) {
	if cfg.VolumeDataPath == "" {
		return nil, nil
	}
	data, err := filepath.Abs(cfg.VolumeDataPath)
	if err != nil {
		return nil, fmt.Errorf("volume_data_path %s: %w", cfg.VolumeDataPath, err)
	}
	opts := volumes.Options{DataPath: data, Filesystem: cfg.VolumeFilesystem, AttestTimeout: cfg.StorageAttestationTimeout}
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
	return volumes.NewGuard(v, installationID, log.With().Str("component", "volumes").Logger())
}

// registerVolumeRoot exports the root's proof: berth_volume_root_unproven proves
// it at each scrape (three syscalls), berth_volume_root_held_operations counts
// the operations refused since it was last proven.
func registerVolumeRoot(reg prometheus.Registerer, g *volumes.Guard) {
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "berth_volume_root_unproven",
		Help: "1 while the volume root is not the filesystem and directory berthd opened at start (unmounted, replaced): volume operations are held."},
		func() float64 {
			if g.Prove() != nil {
				return 1
			}
			return 0
		}))
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "berth_volume_root_held_operations",
		Help: "Distinct volume operations (destroy, rename, …) refused since the volume root was last proven; their owners retry them."},
		func() float64 {
			_, held := g.State()
			return float64(held)
		}))
}

// proveVolumeRoot is /health's probe of the volume root (nil without one).
func (d *daemon) proveVolumeRoot() error {
	if d.volRoot == nil {
		return nil
	}
	if err := d.volRoot.Prove(); err != nil {
		_, held := d.volRoot.State()
		return fmt.Errorf("%w (%d volume operations held until it is mounted again)", err, held)
	}
	return nil
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
