package refresh

import (
	"context"
	"time"

	"github.com/berth-dev/berth/messages"
	"github.com/berth-dev/berth/supervisors"
)

// Settings of the refresh actor.
type Settings struct {
	RegistryPath messages.Address
	// Concurrency is runtime_refresh_max_concurrency: leases one run refreshes
	// at once; 0 disables POST /runtime_refresh.
	Concurrency   int
	Interval      time.Duration // the stale gauge's read while no run is active
	RetryEvery    time.Duration // a run's pass while no lease is in flight (pending ones retried)
	PollEvery     time.Duration // a run's pass while leases are in flight
	MaxRun        time.Duration // a run starts no lease this long after it started
	AskTimeout    time.Duration // one ask of the registry or a lease
	SnapshotEvery int
}

// DefaultSettings are the seed's: 4 at a time, skipped leases retried every
// 10 s, no lease started an hour into a run.
func DefaultSettings() Settings {
	return Settings{RegistryPath: messages.Registry, Concurrency: 4, Interval: time.Minute, RetryEvery: 10 * time.Second,
		PollEvery: time.Second, MaxRun: time.Hour, AskTimeout: 10 * time.Second, SnapshotEvery: 64}
}

// Lister lists this installation's managed containers (dockerio/engine).
type Lister interface {
	ListManaged(ctx context.Context) ([]messages.Container, error)
}

// Deps are its collaborators.
type Deps struct {
	supervisors.Env
	Store    supervisors.JournalStore
	Engine   Lister
	Settings *Settings
	Metrics  *Metrics
}
