package netpool

import (
	"context"
	"time"

	"github.com/berth-dev/berth/dockerio"
	"github.com/berth-dev/berth/messages"
	"github.com/berth-dev/berth/supervisors"
)

// Settings of the pool.
type Settings struct {
	Size     int           // network_pool_size: free networks kept ready
	Interval time.Duration // reconcile_interval: a pass at least this often
	Quiet    time.Duration // a close or a claim asks for a pass once claims paused this long
	Budget   time.Duration // one pass
	// IdleWait is how long one pass may wait, in all, for berthd to have no
	// Engine API request in flight before each create or surplus removal (an
	// engine that reports InFlight): the refill then fills the gaps of a burst
	// instead of competing with its container starts, and the trim of a mass
	// close's surplus lets the reclaimer's removals go first. 0: at once.
	IdleWait time.Duration
	// StopBudget bounds the trim as the pool stops (stop.go), well inside
	// berthd's 75 s drain. 0: the pool keeps its networks at stop.
	StopBudget time.Duration
	// Bridge is Docker's default bridge as found at start; Bridged: a
	// single-container lease's first claim takes one of its Bridge.Capacity
	// slots (single_container_network: default_bridge, and the daemon
	// isolates it). Leases bound to it keep their binding either way.
	Bridge         dockerio.BridgeFacts
	Bridged        bool
	RegistryPath   messages.Address
	BackendName    string
	InstallationID string
	SnapshotEvery  int // 0 = 256
}

// DefaultSettings are the pool's fixed settings: a pass once claims paused 2 s,
// a minute's budget a pass of which up to 40 s waiting for Docker to be idle,
// and 20 s to trim the pool at stop.
func DefaultSettings() Settings {
	return Settings{Quiet: 2 * time.Second, Budget: time.Minute, IdleWait: 40 * time.Second, StopBudget: 20 * time.Second,
		RegistryPath: messages.Registry}
}

// Docker is what the pool asks of the Engine API (dockerio/engine).
type Docker interface {
	// CreatePoolNetwork creates one warm-pool network, berth-pool-<random>,
	// labelled ours with fred.network_scope=pool and no lease.
	CreatePoolNetwork(ctx context.Context) (dockerio.Network, error)
	// PoolNetworks lists this installation's pool networks (ID, name, labels;
	// Containers is not filled: inspect a network to count them).
	PoolNetworks(ctx context.Context) ([]dockerio.Network, error)
	InspectNetwork(ctx context.Context, id string) (dockerio.Network, error)
	// RemoveNetwork removes this installation's lease or pool network by exact ID.
	RemoveNetwork(ctx context.Context, id string) error
	// Launched lists a lease's containers from one listing, not inspected.
	Launched(ctx context.Context, lease string) ([]messages.Container, error)
}

// Deps are the pool's collaborators.
type Deps struct {
	supervisors.Env
	Store    supervisors.JournalStore
	Engine   Docker
	Settings *Settings
	Metrics  *Metrics
}
