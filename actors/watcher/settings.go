package watcher

import (
	"time"

	"github.com/berth-dev/berth/dockerio"
	"github.com/berth-dev/berth/supervisors"
)

// Settings of the watcher.
type Settings struct {
	InstallationID string
	RegistryPath   string
	ReconcilerPath string        // asked for a pass after every reconnect
	QueueSize      int           // 4096
	BackoffBase    time.Duration // 1 s
	BackoffCap     time.Duration // 30 s
}

// Deps are the watcher's collaborators.
type Deps struct {
	supervisors.Env
	Engine   dockerio.Engine
	Settings *Settings
	Metrics  *Metrics
}
