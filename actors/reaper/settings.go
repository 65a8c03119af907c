package reaper

import (
	"time"

	"github.com/berth-dev/berth/dockerio"
	"github.com/berth-dev/berth/messages"
	"github.com/berth-dev/berth/supervisors"
)

// Settings of the reaper.
type Settings struct {
	Interval            time.Duration // retention_reap_interval
	OrphanConfirmations int           // retention_orphan_confirmations (0: never prune)
	PassTimeout         time.Duration
	RegistryPath        messages.Address
	VolumeHoldPath      messages.Address
}

// DefaultSettings are the reaper's fixed settings: a sweep within 10 min.
func DefaultSettings() Settings {
	return Settings{PassTimeout: 10 * time.Minute, RegistryPath: messages.Registry, VolumeHoldPath: messages.VolumeHold}
}

// Deps are the reaper's collaborators.
type Deps struct {
	supervisors.Env
	Volumes  dockerio.Volumes
	Settings *Settings
	Metrics  *Metrics
}
