package watcher

import (
	"context"
	"time"

	"github.com/berth-dev/berth/dockerio"
	"github.com/berth-dev/berth/messages"
	"github.com/berth-dev/berth/supervisors"
)

// Settings of the watcher.
type Settings struct {
	InstallationID string
	RegistryPath   messages.Address
	ReconcilerPath messages.Address // asked for a pass after every reconnect
	QueueSize      int              // 4096
	BackoffBase    time.Duration    // 1 s
	BackoffCap     time.Duration    // 30 s
}

// DefaultSettings are the watcher's fixed settings: a 4096-death queue, reconnects
// backing off 1 s → 30 s; the installation comes from the store.
func DefaultSettings() Settings {
	return Settings{RegistryPath: messages.Registry, ReconcilerPath: messages.Reconciler, QueueSize: 4096,
		BackoffBase: time.Second, BackoffCap: 30 * time.Second}
}

// Docker is what the watcher asks of the Engine API (dockerio/engine).
type Docker interface {
	Ping(ctx context.Context) error
	Events(ctx context.Context) (<-chan dockerio.Event, <-chan error)
}

// Deps are the watcher's collaborators.
type Deps struct {
	supervisors.Env
	Engine   Docker
	Settings *Settings
	Metrics  *Metrics
}
