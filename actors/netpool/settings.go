package netpool

import (
	"time"

	"github.com/berth-dev/berth/dockerio"
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
	IdleWait       time.Duration
	RegistryPath   string
	BackendName    string
	InstallationID string
	SnapshotEvery  int // 0 = 256
}

// Deps are the pool's collaborators.
type Deps struct {
	supervisors.Env
	Store    supervisors.JournalStore
	Engine   dockerio.Engine
	Settings *Settings
	Metrics  *Metrics
}
