package reconciler

import (
	"context"
	"time"

	"github.com/berth-dev/berth/dockerio"
	"github.com/berth-dev/berth/messages"
	"github.com/berth-dev/berth/persistence"
	"github.com/berth-dev/berth/supervisors"
)

// Settings of the reconciler.
type Settings struct {
	Interval          time.Duration // reconcile_interval
	PassTimeout       time.Duration // one pass, Docker list included
	AckTimeout        time.Duration // how long leases have to act on their inventory
	RegistryPath      messages.Address
	StopTimeout       time.Duration // container_stop_timeout: the grace of every automatic removal
	MaxRemovals       int           // automatic removals per pass (100)
	RemoveTimeout     time.Duration // deadline of each removal (30 s)
	DiagnosticsMaxAge time.Duration // diagnostics_max_age; 0 = never pruned
	PruneEvery        time.Duration // how often diagnostics.db is pruned and closed leases' journals settled (1 h)
	CompactAfter      time.Duration // a closed lease's journal is compacted to its receipt this long after the close (1 h)
	ClosedMaxAge      time.Duration // releases_max_age: a closed lease's receipt is kept this long; 0 = forever
	MaxClosedChanges  int           // closed leases' streams compacted or deleted per pass (1,000)
	// Bridged: single-container leases run on Docker's default bridge (decided
	// at start); each pass then proves the bridge still isolates them.
	Bridged bool
}

// DefaultSettings are the reconciler's fixed settings: a pass within 2 min, 30 s
// for leases to act on their inventory, at most 100 gentle removals a pass (30 s
// each), diagnostics pruned hourly. The interval and ages come from the config.
func DefaultSettings() Settings {
	return Settings{PassTimeout: 2 * time.Minute, AckTimeout: 30 * time.Second, RegistryPath: messages.Registry,
		MaxRemovals: 100, RemoveTimeout: 30 * time.Second, PruneEvery: time.Hour,
		CompactAfter: time.Hour, MaxClosedChanges: 1000}
}

// Docker is what the reconciler asks of the Engine API (dockerio/engine).
type Docker interface {
	ListManaged(ctx context.Context) ([]messages.Container, error)
	// StopRemove is the gentle removal of automatic cleanup: re-inspect the exact
	// ID, require this installation's label, stop it within stopTimeout, remove it
	// with Force=false and RemoveVolumes=false. An absent container is success.
	StopRemove(ctx context.Context, id string, stopTimeout time.Duration) error
	// SweepHelpers removes the never-started image helpers (ImageUser,
	// DetectWritablePaths, SeedWritablePaths) a killed daemon left, and stale
	// ones whose removal failed; it returns how many it removed.
	SweepHelpers(ctx context.Context) (int, error)
	// GuardIsolation makes sure the host firewall keeps Docker's bridges apart
	// even while Docker rewrites its own isolation rules (it drops them for a
	// moment on every network create), putting the guard back when it is
	// missing; installed reports that it had to.
	GuardIsolation(ctx context.Context) (installed bool, err error)
	// UnadoptedFredV013 are the containers fred v0.13 made under this backend
	// name that no adoption made this installation's (never touched).
	UnadoptedFredV013(ctx context.Context) ([]messages.Container, error)
	// DefaultBridge reads whether Docker's default bridge still isolates its
	// containers (icc off, dockerd's DROP rule in place).
	DefaultBridge(ctx context.Context) (dockerio.BridgeFacts, error)
	// LeaseResidue lists what Docker holds of one lease, any state.
	LeaseResidue(ctx context.Context, lease string) (dockerio.LeaseResidue, error)
}

// Deps are the reconciler's collaborators.
type Deps struct {
	supervisors.Env
	Engine   Docker
	Diag     *persistence.Diagnostics // nil: nothing to prune
	Settings *Settings
	Metrics  *Metrics
	// ClosedReceipt reports whether a lease's journal ends in a closed receipt:
	// the only authority to remove containers of a lease nobody runs.
	ClosedReceipt func(lease string) (bool, error)
	// ClosedStreams compacts and deletes closed leases' streams
	// (lease.ClosedStreams); nil: they are kept whole.
	ClosedStreams func(compactBefore, forgetBefore time.Time, keep func(lease string) bool, max int) (compacted, forgotten int, err error)
}
