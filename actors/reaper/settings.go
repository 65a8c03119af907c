package reaper

import (
	"time"

	"github.com/berth-dev/berth/dockerio"
	"github.com/berth-dev/berth/supervisors"
)

// Settings of the reaper.
type Settings struct {
	Interval            time.Duration // retention_reap_interval
	OrphanConfirmations int           // retention_orphan_confirmations (0: never prune)
	PassTimeout         time.Duration
	RegistryPath        string
	VolumeHoldPath      string
}

// Deps are the reaper's collaborators.
type Deps struct {
	supervisors.Env
	Volumes  dockerio.Volumes
	Settings *Settings
	Metrics  *Metrics
}
