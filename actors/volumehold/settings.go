package volumehold

import (
	"time"

	"github.com/berth-dev/berth/dockerio"
	"github.com/berth-dev/berth/supervisors"
)

// Settings of the hold actor.
type Settings struct {
	RegistryPath string
	BackoffBase  time.Duration // 1 s
	BackoffCap   time.Duration // 1 min
}

// Deps are its collaborators.
type Deps struct {
	supervisors.Env
	Store    supervisors.JournalStore
	Volumes  dockerio.Volumes
	Settings *Settings
	Metrics  *Metrics
}
